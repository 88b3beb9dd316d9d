/* Start-up, world check, fatal errors and the fault watchdog (see rt_init.h
 * for the design), and the console output declared at the end of rt_init.h. */
#include "rt_init.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int g_rank = 0, g_world_size = 1;
static double g_timeout_s = HX_RT_DEFAULT_TIMEOUT_S;
static int g_max_count = INT_MAX, g_tag_ub = 32767; /* MPI's guaranteed minimum until queried */

/* Watchdog state shared between the training thread and the watchdog. */
static _Atomic int64_t g_last_progress_ns;
static atomic_bool g_in_wait; /* in hx_rt_wait_all, which keeps its own clock */
/* The longest time the watchdog found this process not running at all (its
 * sleep overran by that much): SIGSTOP, or a starved machine. */
static _Atomic int64_t g_frozen_ns;
static atomic_bool g_watch_enabled;
/* The transport's fault hooks (hx_rt_set_fault_hooks); set before the
 * training, read by the watchdog thread. */
static _Atomic(hx_rt_fault_check_fn) g_fault_check;
static _Atomic(hx_rt_fault_abort_fn) g_fault_abort;
static atomic_bool g_watch_quit;
static bool g_watch_running; /* thread created (main thread only) */
static pthread_t g_watch_thread;

static int64_t monotonic_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static bool mpi_is_up(void) {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  return initialized && !finalized;
}

static void vprint_error(const char *fmt, va_list ap) {
  char msg[1024];
  vsnprintf(msg, sizeof msg, fmt, ap);
  /* One fprintf per message, so lines of different ranks do not mix. */
  fprintf(stderr, "hexic-rt: rank %d: error: %s\n", g_rank, msg);
  fflush(stderr);
}

_Noreturn void hx_rt_fatal(int code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vprint_error(fmt, ap);
  va_end(ap);
  if (mpi_is_up())
    MPI_Abort(MPI_COMM_WORLD, code);
  exit(code);
}

void *hx_rt_calloc(size_t count, size_t size) {
  void *p = calloc(count ? count : 1, size ? size : 1);
  if (!p)
    hx_rt_fatal(HX_RT_EXIT_ERROR, "out of memory (%zu x %zu bytes)", count, size);
  return p;
}

void hx_rt_mpi_check(int rc, const char *what) {
  if (rc == MPI_SUCCESS)
    return;
  char msg[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(rc, msg, &len) != MPI_SUCCESS)
    snprintf(msg, sizeof msg, "MPI error %d", rc);
  hx_rt_fatal(HX_RT_EXIT_MPI, "%s failed: %s (a peer rank probably died)", what, msg);
}

/* ---- watchdog ---- */

void hx_rt_progress(void) { atomic_store(&g_last_progress_ns, monotonic_ns()); }

static void sleep_s(double s) {
  struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

/* Being stopped for this long means a rank, not its peers, is at fault. */
static int64_t frozen_limit_ns(void) { return (int64_t)(fmax(1.0, g_timeout_s / 2) * 1e9); }

void hx_rt_set_fault_hooks(hx_rt_fault_check_fn check, hx_rt_fault_abort_fn abort_fn) {
  atomic_store(&g_fault_check, check);
  atomic_store(&g_fault_abort, abort_fn);
}

/* Releases what the transport holds before the process exits (NCCL's
 * communicators: ncclCommAbort ends their kernels, so no peer stays
 * blocked in one with this rank gone). */
static void abort_transport(void) {
  hx_rt_fault_abort_fn abort_fn = atomic_exchange(&g_fault_abort, NULL);
  if (abort_fn)
    abort_fn();
}

/* The transport reports a fault (a peer that left NCCL's communicators):
 * say so, release the transport and end the process; mpirun ends the rest. */
static void check_transport(void) {
  hx_rt_fault_check_fn check = atomic_load(&g_fault_check);
  char msg[512];
  if (!check || !check(msg, sizeof msg))
    return;
  fprintf(stderr, "hexic-rt: rank %d: error: %s; exiting\n", g_rank, msg);
  fflush(stderr);
  abort_transport();
  _exit(HX_RT_EXIT_MPI);
}

/* Wakes several times per bound so the overshoot stays a small fraction of
 * it; never calls MPI (MPI runs with MPI_THREAD_FUNNELED). A rank that was
 * itself stopped (SIGSTOP, then mpirun's SIGCONT) says so. */
static void *watchdog_main(void *unused) {
  (void)unused;
  double period = fmin(0.25, g_timeout_s / 8);
  while (!atomic_load(&g_watch_quit)) {
    int64_t before = monotonic_ns();
    sleep_s(period);
    int64_t overrun = monotonic_ns() - before - (int64_t)(period * 1e9);
    if (overrun > atomic_load(&g_frozen_ns))
      atomic_store(&g_frozen_ns, overrun);
    if (atomic_load(&g_watch_enabled))
      check_transport();
    if (!atomic_load(&g_watch_enabled) || atomic_load(&g_in_wait))
      continue;
    double idle = (double)(monotonic_ns() - atomic_load(&g_last_progress_ns)) * 1e-9;
    if (idle > g_timeout_s) {
      int64_t frozen = atomic_load(&g_frozen_ns);
      if (frozen >= frozen_limit_ns())
        fprintf(stderr,
                "hexic-rt: rank %d: error: no progress for %.1f s: this rank did not run for "
                "%.1f s; exiting\n"
                "hexic-rt: failed rank %d: it did not run for %.1f s (stopped, e.g. by "
                "SIGSTOP)\n",
                g_rank, idle, frozen * 1e-9, g_rank, frozen * 1e-9);
      else
        fprintf(stderr,
                "hexic-rt: rank %d: error: no progress for %.1f s (HEXIC_TIMEOUT_S=%g): a peer "
                "rank died or hangs; exiting\n",
                g_rank, idle, g_timeout_s);
      fflush(stderr);
      abort_transport();
      /* _exit: the main thread may hold locks inside MPI; mpirun sees a rank
       * leave without MPI_Finalize and ends the rest of the job. */
      _exit(HX_RT_EXIT_TIMEOUT);
    }
  }
  return NULL;
}

void hx_rt_watchdog_start(void) {
  hx_rt_progress();
  atomic_store(&g_watch_enabled, true);
  if (g_watch_running)
    return;
  atomic_store(&g_watch_quit, false);
  int rc = pthread_create(&g_watch_thread, NULL, watchdog_main, NULL);
  if (rc != 0)
    hx_rt_fatal(HX_RT_EXIT_ERROR, "cannot start the watchdog thread: %s", strerror(rc));
  g_watch_running = true;
}

void hx_rt_watchdog_stop(void) { atomic_store(&g_watch_enabled, false); }

static void watchdog_join(void) {
  if (!g_watch_running)
    return;
  atomic_store(&g_watch_enabled, false);
  atomic_store(&g_watch_quit, true);
  pthread_join(g_watch_thread, NULL);
  g_watch_running = false;
}

/* ---- waits that name what they wait on (see rt_init.h, item 3) ---- */

enum { TAG_QUERY = 1, TAG_ANSWER = 2, WHAT_CHARS = 96 };

/* The answer to a status query: the answering rank's current wait, then
 * nranks ints (a collective's members; -1: the whole world). */
struct answer {
  int seq; /* the query's, so a late answer to an earlier query is told apart */
  int peer, micro_batch, nranks;
  int frozen_ms; /* g_frozen_ns of the answering rank */
  char what[WHAT_CHARS];
};

static MPI_Comm g_ctl = MPI_COMM_NULL;  /* queries and answers, apart from the data */
static const struct hx_rt_wait *g_wait; /* what the main thread waits on now */
static int g_query_seq;

/* Sends in flight (queries, answers) with their buffers, freed once done. */
struct outgoing {
  MPI_Request req;
  void *buf;
};
static struct outgoing *g_out;
static int g_nout, g_cap_out;

static void *must_alloc(size_t bytes) {
  void *p = calloc(1, bytes ? bytes : 1);
  if (!p)
    hx_rt_fatal(HX_RT_EXIT_ERROR, "out of memory (%zu bytes) tracing a stall", bytes);
  return p;
}

static void reap_outgoing(void) {
  for (int i = 0; i < g_nout;) {
    int done = 0;
    MPI_Test(&g_out[i].req, &done, MPI_STATUS_IGNORE);
    if (!done) {
      i++;
      continue;
    }
    free(g_out[i].buf);
    g_out[i] = g_out[--g_nout];
  }
}

/* Sends buf (malloc'ed; owned from here on) without waiting for it. */
static void post_outgoing(void *buf, size_t bytes, int to, int tag) {
  if (g_nout == g_cap_out) {
    g_cap_out = g_cap_out ? 2 * g_cap_out : 16;
    struct outgoing *grown = realloc(g_out, sizeof *g_out * (size_t)g_cap_out);
    if (!grown)
      hx_rt_fatal(HX_RT_EXIT_ERROR, "out of memory tracing a stall");
    g_out = grown;
  }
  struct outgoing *o = &g_out[g_nout++];
  o->buf = buf;
  hx_rt_mpi_check(MPI_Isend(buf, (int)bytes, MPI_BYTE, to, tag, g_ctl, &o->req),
                  "send a status query or answer");
}

static size_t answer_bytes(int nranks) {
  return sizeof(struct answer) + sizeof(int) * (size_t)(nranks > 0 ? nranks : 0);
}

static const int *answer_ranks(const struct answer *a) { return (const int *)(a + 1); }

static void answer_query(int to, int seq) {
  const struct hx_rt_wait *w = g_wait;
  int nranks = w->peer >= 0 ? 0 : w->ranks ? w->nranks : -1;
  struct answer *a = must_alloc(answer_bytes(nranks));
  int frozen_ms = (int)fmin(atomic_load(&g_frozen_ns) / 1000000, INT_MAX);
  *a = (struct answer){seq, w->peer, w->micro_batch, nranks, frozen_ms, ""};
  snprintf(a->what, sizeof a->what, "%s", w->what);
  if (nranks > 0)
    memcpy(a + 1, w->ranks, sizeof(int) * (size_t)nranks);
  post_outgoing(a, answer_bytes(nranks), to, TAG_ANSWER);
}

/* Answers every status query that has arrived (inside a wait only). */
static void serve_queries(void) {
  reap_outgoing();
  for (;;) {
    int flag = 0, seq = 0;
    MPI_Status st;
    if (MPI_Iprobe(MPI_ANY_SOURCE, TAG_QUERY, g_ctl, &flag, &st) != MPI_SUCCESS || !flag)
      return;
    hx_rt_mpi_check(MPI_Recv(&seq, (int)sizeof seq, MPI_BYTE, st.MPI_SOURCE, TAG_QUERY, g_ctl,
                             MPI_STATUS_IGNORE),
                    "receive a status query");
    answer_query(st.MPI_SOURCE, seq);
  }
}

/* What a wait completes: MPI requests, or a transport's own condition (an
 * NCCL operation's event: hx_rt_wait_until). */
struct waiter {
  int n;
  MPI_Request *reqs;
  bool (*done)(void *arg); /* NULL: the requests */
  void *arg;
};

static bool wait_done(const struct waiter *x, const struct hx_rt_wait *w) {
  if (x->done)
    return x->done(x->arg);
  int done = 0;
  hx_rt_mpi_check(MPI_Testall(x->n, x->reqs, &done, MPI_STATUSES_IGNORE), w->what);
  return done != 0;
}

/* Polling costs a core; after the first millisecond, sleep a little. */
static void pause_polling(int64_t waited_ns) {
  if (waited_ns < 1000000) {
    sched_yield();
    return;
  }
  struct timespec ts = {0, 50000};
  nanosleep(&ts, NULL);
}

/* " (receive an activation, micro-batch 3)" or " (gradient all-reduce, over 4 ranks)". */
static void describe_wait(char *buf, size_t size, const char *what, int micro_batch, int peer,
                          int nranks) {
  char mb[48] = "", group[48] = "";
  if (micro_batch >= 0)
    snprintf(mb, sizeof mb, ", micro-batch %d", micro_batch);
  if (peer < 0)
    snprintf(group, sizeof group, ", over %s%d ranks", nranks < 0 ? "all " : "",
             nranks < 0 ? g_world_size : nranks);
  snprintf(buf, size, " (%s%s%s)", what, mb, group);
}

/* The ranks a wait (or an answer describing one) waits on, but self. */
static int wait_targets(int peer, int nranks, const int *ranks, int *out) {
  int n = 0;
  if (peer >= 0) {
    if (peer != g_rank)
      out[n++] = peer;
    return n;
  }
  int count = nranks < 0 || !ranks ? g_world_size : nranks;
  for (int k = 0; k < count; k++) {
    int r = nranks < 0 || !ranks ? k : ranks[k];
    if (r != g_rank && r >= 0 && r < g_world_size)
      out[n++] = r;
  }
  return n;
}

/* A stall being traced: who led to whom, and what each rank answered. */
struct trace {
  int *via;                 /* per rank: the rank whose wait named it; -1: not reached */
  struct answer **answered; /* per rank: its answer, NULL if none */
  int *level, nlevel;       /* the ranks being asked now */
  int *scratch;             /* wait_targets' output */
};

/* Asks every rank of the level what it waits on, waiting up to the timeout
 * for the answers while serving queries. Returns 1 when the stalled wait
 * completed meanwhile, 0 when every rank answered, -1 when some did not. */
static int ask_level(struct trace *t, const struct waiter *x, const struct hx_rt_wait *w) {
  int seq = ++g_query_seq, pending = t->nlevel, result = 0;
  size_t cap = answer_bytes(g_world_size);
  MPI_Request *rr = must_alloc(sizeof *rr * (size_t)t->nlevel);
  struct answer **bufs = must_alloc(sizeof *bufs * (size_t)t->nlevel);
  for (int i = 0; i < t->nlevel; i++) {
    bufs[i] = must_alloc(cap);
    hx_rt_mpi_check(MPI_Irecv(bufs[i], (int)cap, MPI_BYTE, t->level[i], TAG_ANSWER, g_ctl, &rr[i]),
                    "post a status answer");
    int *q = must_alloc(sizeof *q);
    *q = seq;
    post_outgoing(q, sizeof *q, t->level[i], TAG_QUERY);
  }
  int64_t start = monotonic_ns(), limit = (int64_t)(g_timeout_s * 1e9);
  while (pending > 0 && monotonic_ns() - start < limit) {
    if (wait_done(x, w)) {
      result = 1;
      break;
    }
    serve_queries();
    for (int i = 0; i < t->nlevel; i++) {
      int flag = 0;
      if (rr[i] == MPI_REQUEST_NULL || (MPI_Test(&rr[i], &flag, MPI_STATUS_IGNORE), !flag))
        continue;
      if (bufs[i]->seq != seq) { /* a late answer to an earlier trace: listen again */
        hx_rt_mpi_check(
            MPI_Irecv(bufs[i], (int)cap, MPI_BYTE, t->level[i], TAG_ANSWER, g_ctl, &rr[i]),
            "post a status answer");
        continue;
      }
      t->answered[t->level[i]] = bufs[i];
      bufs[i] = NULL;
      pending--;
    }
    pause_polling(monotonic_ns() - start);
  }
  for (int i = 0; i < t->nlevel; i++) {
    if (rr[i] != MPI_REQUEST_NULL) {
      MPI_Cancel(&rr[i]);
      MPI_Wait(&rr[i], MPI_STATUS_IGNORE);
    }
    free(bufs[i]);
  }
  free(rr);
  free(bufs);
  return result ? result : pending ? -1 : 0;
}

/* The next level: the ranks the answering ranks of this one wait on. */
static void next_level(struct trace *t) {
  int *next = must_alloc(sizeof *next * (size_t)g_world_size), nnext = 0;
  for (int i = 0; i < t->nlevel; i++) {
    const struct answer *a = t->answered[t->level[i]];
    int k = wait_targets(a->peer, a->nranks, answer_ranks(a), t->scratch);
    for (int j = 0; j < k; j++)
      if (t->via[t->scratch[j]] < 0) {
        t->via[t->scratch[j]] = t->level[i];
        next[nnext++] = t->scratch[j];
      }
  }
  free(t->level);
  t->level = next;
  t->nlevel = nnext;
}

/* The first rank of the level that did not answer, or that answered but
 * says it did not run for a long while (stopped, then continued: mpirun
 * sends SIGCONT before its SIGTERM); -1 when none. */
static int level_culprit(const struct trace *t) {
  for (int i = 0; i < t->nlevel; i++) {
    const struct answer *a = t->answered[t->level[i]];
    if (!a || (int64_t)a->frozen_ms * 1000000 >= frozen_limit_ns())
      return t->level[i];
  }
  return -1;
}

/* Prints the verdict: this rank's stalled wait, then one line for launch.sh
 * naming the rank at fault (culprit, reached from the rank `via`). */
static void print_verdict(const struct trace *t, const char *mine, double waited_s, int culprit) {
  const struct answer *seen = t->answered[culprit];
  char why[160], theirs[200];
  if (seen)
    snprintf(why, sizeof why, "it did not run for %.1f s (stopped, e.g. by SIGSTOP)",
             seen->frozen_ms * 1e-3);
  else
    snprintf(why, sizeof why, "it does not answer (stopped, hung or dead)");
  int via = t->via[culprit];
  if (via == g_rank) {
    snprintf(theirs, sizeof theirs, "%s", mine);
  } else {
    const struct answer *a = t->answered[via];
    describe_wait(theirs, sizeof theirs, a->what, a->micro_batch, a->peer, a->nranks);
  }
  /* One fprintf per line: lines of different ranks do not mix. */
  char verb[64];
  snprintf(verb, sizeof verb, seen ? "did not run meanwhile" : "does not answer within %g s",
           g_timeout_s);
  fprintf(stderr,
          "hexic-rt: rank %d: error: no progress for %.1f s waiting%s; rank %d %s "
          "(HEXIC_TIMEOUT_S); exiting\n",
          g_rank, waited_s, mine, culprit, verb);
  fprintf(stderr, "hexic-rt: failed rank %d: %s; rank %d waits on it%s\n", culprit, why, via,
          theirs);
}

_Noreturn static void report_stall(const struct trace *t, const struct hx_rt_wait *w,
                                   double waited_s) {
  char mine[200];
  describe_wait(mine, sizeof mine, w->what, w->micro_batch, w->peer,
                w->peer >= 0 ? 0
                : w->ranks   ? w->nranks
                             : -1);
  int culprit = level_culprit(t);
  if (culprit >= 0)
    print_verdict(t, mine, waited_s, culprit);
  else
    fprintf(stderr,
            "hexic-rt: rank %d: error: no progress for %.1f s waiting%s; every rank on the way "
            "answers and waits in turn: a deadlock, or an operation slower than "
            "HEXIC_TIMEOUT_S=%g; exiting\n",
            g_rank, waited_s, mine, g_timeout_s);
  fflush(stderr);
  abort_transport();
  _exit(HX_RT_EXIT_TIMEOUT);
}

/* This rank itself did not run for a long while (it was stopped and has
 * just been continued): it is the one at fault, not the peers it waits on. */
static void report_if_frozen(const struct hx_rt_wait *w) {
  int64_t frozen = atomic_load(&g_frozen_ns);
  if (frozen < frozen_limit_ns())
    return;
  fprintf(stderr,
          "hexic-rt: rank %d: error: this rank did not run for %.1f s while waiting on %s\n"
          "hexic-rt: failed rank %d: it did not run for %.1f s (stopped, e.g. by SIGSTOP)\n",
          g_rank, frozen * 1e-9, w->what, g_rank, frozen * 1e-9);
  fflush(stderr);
  _exit(HX_RT_EXIT_TIMEOUT);
}

/* Traces a stalled wait breadth first (see rt_init.h); returns true when the
 * wait completed meanwhile, else reports and exits. */
static bool trace_stall(const struct waiter *x, const struct hx_rt_wait *w, int64_t start) {
  report_if_frozen(w);
  struct trace t = {must_alloc(sizeof(int) * (size_t)g_world_size),
                    must_alloc(sizeof(struct answer *) * (size_t)g_world_size),
                    must_alloc(sizeof(int) * (size_t)g_world_size), 0,
                    must_alloc(sizeof(int) * (size_t)g_world_size)};
  for (int r = 0; r < g_world_size; r++)
    t.via[r] = -1;
  t.via[g_rank] = g_rank;
  t.nlevel = wait_targets(w->peer, w->peer >= 0 ? 0 : w->ranks ? w->nranks : -1, w->ranks, t.level);
  for (int i = 0; i < t.nlevel; i++)
    t.via[t.level[i]] = g_rank;
  int outcome = 0;
  while (t.nlevel > 0 && (outcome = ask_level(&t, x, w)) == 0 && level_culprit(&t) < 0)
    next_level(&t);
  if (outcome != 1)
    report_stall(&t, w, (double)(monotonic_ns() - start) * 1e-9);
  for (int r = 0; r < g_world_size; r++)
    free(t.answered[r]);
  free(t.via);
  free(t.answered);
  free(t.level);
  free(t.scratch);
  return true;
}

static void (*g_wait_enter)(void *), (*g_wait_leave)(void *);
static void *g_wait_hook_arg;

void hx_rt_set_wait_hooks(void (*enter)(void *arg), void (*leave)(void *arg), void *arg) {
  g_wait_enter = enter;
  g_wait_leave = leave;
  g_wait_hook_arg = arg;
}

static void wait_for(const struct waiter *x, const struct hx_rt_wait *w) {
  if (g_wait_enter)
    g_wait_enter(g_wait_hook_arg);
  const struct hx_rt_wait *outer = g_wait;
  g_wait = w;
  atomic_store(&g_in_wait, true);
  int64_t start = monotonic_ns(), limit = (int64_t)(g_timeout_s * 1e9);
  bool traced = false;
  while (!wait_done(x, w)) {
    serve_queries();
    int64_t waited = monotonic_ns() - start;
    if (!traced && waited > limit)
      traced = trace_stall(x, w, start);
    pause_polling(waited);
  }
  g_wait = outer;
  atomic_store(&g_in_wait, outer != NULL);
  hx_rt_progress();
  if (g_wait_leave)
    g_wait_leave(g_wait_hook_arg);
}

void hx_rt_wait_all(int n, MPI_Request *reqs, const struct hx_rt_wait *w) {
  wait_for(&(struct waiter){n, reqs, NULL, NULL}, w);
}

void hx_rt_wait_until(bool (*done)(void *arg), void *arg, const struct hx_rt_wait *w) {
  wait_for(&(struct waiter){0, NULL, done, arg}, w);
}

/* ---- start-up and shutdown ---- */

static double timeout_from_env(void) {
  const char *s = getenv("HEXIC_TIMEOUT_S");
  if (!s || !*s)
    return HX_RT_DEFAULT_TIMEOUT_S;
  char *end = NULL;
  errno = 0;
  double v = strtod(s, &end);
  if (errno || *end || !isfinite(v) || v <= 0)
    hx_rt_fatal(HX_RT_EXIT_ERROR, "HEXIC_TIMEOUT_S='%s' is not a positive number of seconds", s);
  return v;
}

/* ---- message limits ---- */

int hx_rt_max_count(void) { return g_max_count; }
int hx_rt_tag_ub(void) { return g_tag_ub; }

int64_t hx_rt_chunk_count(int64_t n, int64_t max_count) {
  return n <= 0 ? 0 : (n - 1) / max_count + 1;
}

void hx_rt_chunk_at(int64_t n, int64_t max_count, int64_t k, int64_t *offset, int *count) {
  *offset = k * max_count;
  int64_t left = n - *offset;
  *count = (int)(left < max_count ? left : max_count);
}

int hx_rt_message_chunks(int64_t n) {
  int64_t chunks = hx_rt_chunk_count(n, g_max_count);
  if (chunks > 1 << 20)
    hx_rt_fatal(HX_RT_EXIT_ERROR,
                "a message of %lld elements would travel as %lld messages: "
                "HEXIC_MPI_MAX_COUNT=%d is too small",
                (long long)n, (long long)chunks, g_max_count);
  return (int)chunks;
}

int hx_rt_message_tag(int64_t micro_batch, int kind, int tag_ub) {
  int64_t span = ((int64_t)tag_ub + 1) / 4;
  return kind + 4 * (int)(micro_batch % span);
}

/* ---- messages of any size ---- */

void hx_rt_post_chunks(void *buf, int64_t n, MPI_Datatype type, int peer, int tag, bool send,
                       MPI_Comm comm, MPI_Request *reqs, const char *what) {
  int size = 0;
  hx_rt_mpi_check(MPI_Type_size(type, &size), what);
  for (int k = 0, nk = hx_rt_message_chunks(n); k < nk; k++) {
    int64_t off;
    int count;
    hx_rt_chunk_at(n, g_max_count, k, &off, &count);
    char *at = (char *)buf + off * size;
    int rc = send ? MPI_Isend(at, count, type, peer, tag, comm, &reqs[k])
                  : MPI_Irecv(at, count, type, peer, tag, comm, &reqs[k]);
    hx_rt_mpi_check(rc, what);
  }
}

static MPI_Request *requests(int n) { return hx_rt_calloc((size_t)n, sizeof(MPI_Request)); }

MPI_Request *hx_rt_send_requests(int64_t max_n, int *nreqs) {
  *nreqs = hx_rt_message_chunks(max_n);
  MPI_Request *reqs = requests(*nreqs);
  for (int k = 0; k < *nreqs; k++)
    reqs[k] = MPI_REQUEST_NULL;
  return reqs;
}

void hx_rt_send_check_ready(const MPI_Request *reqs, int nreqs, int64_t n, const char *what) {
  if (hx_rt_message_chunks(n) > nreqs)
    hx_rt_fatal(HX_RT_EXIT_ERROR, "internal: %s of %" PRId64 " elements exceeds its handle", what,
                n);
  for (int k = 0; k < nreqs; k++)
    if (reqs[k] != MPI_REQUEST_NULL)
      hx_rt_fatal(HX_RT_EXIT_ERROR, "internal: a send started before the previous one finished");
}

void hx_rt_recv_chunks(void *buf, int64_t n, MPI_Datatype type, int peer, int tag, MPI_Comm comm,
                       const struct hx_rt_wait *w) {
  int nk = hx_rt_message_chunks(n);
  MPI_Request *reqs = requests(nk);
  hx_rt_post_chunks(buf, n, type, peer, tag, false, comm, reqs, w->what);
  hx_rt_wait_all(nk, reqs, w);
  free(reqs);
}

void hx_rt_bcast_chunks(void *buf, int64_t n, MPI_Datatype type, int root, MPI_Comm comm,
                        const struct hx_rt_wait *w) {
  int size = 0, nk = hx_rt_message_chunks(n);
  hx_rt_mpi_check(MPI_Type_size(type, &size), w->what);
  MPI_Request *reqs = requests(nk);
  for (int k = 0; k < nk; k++) {
    int64_t off;
    int count;
    hx_rt_chunk_at(n, g_max_count, k, &off, &count);
    hx_rt_mpi_check(MPI_Ibcast((char *)buf + off * size, count, type, root, comm, &reqs[k]),
                    w->what);
  }
  hx_rt_wait_all(nk, reqs, w);
  free(reqs);
}

MPI_Request *hx_rt_allreduce_floats_start(float *buf, int64_t n, MPI_Comm comm, int *nreqs,
                                          const char *what) {
  int nk = hx_rt_message_chunks(n);
  MPI_Request *reqs = requests(nk);
  for (int k = 0; k < nk; k++) {
    int64_t off;
    int count;
    hx_rt_chunk_at(n, g_max_count, k, &off, &count);
    hx_rt_mpi_check(
        MPI_Iallreduce(MPI_IN_PLACE, buf + off, count, MPI_FLOAT, MPI_SUM, comm, &reqs[k]), what);
  }
  *nreqs = nk;
  return reqs;
}

void hx_rt_allreduce_floats(float *buf, int64_t n, MPI_Comm comm, const struct hx_rt_wait *w) {
  int nk = 0;
  MPI_Request *reqs = hx_rt_allreduce_floats_start(buf, n, comm, &nk, w->what);
  hx_rt_wait_all(nk, reqs, w);
  free(reqs);
}

/* Does one collective of int counts carry these blocks? */
static bool fits_one_call(const long *counts, int n) {
  int64_t sum = 0;
  for (int i = 0; i < n; i++)
    sum += counts[i];
  return sum <= g_max_count;
}

static int chunks_of_blocks(const long *counts, int n) {
  int64_t total = 0;
  for (int i = 0; i < n; i++)
    total += hx_rt_message_chunks(counts[i]);
  if (total > 1 << 20)
    hx_rt_fatal(HX_RT_EXIT_ERROR, "a collective of %d blocks would travel as %lld messages", n,
                (long long)total);
  return (int)total;
}

/* One request and, in the same allocation (the caller frees the requests
 * after the wait), the int counts and displacements MPI reads until the
 * non-blocking collective completes. */
static MPI_Request *request_with_counts(const long *counts, int n, int **c, int **displs) {
  size_t head = (sizeof(MPI_Request) + sizeof(int) - 1) / sizeof(int) * sizeof(int);
  char *block = hx_rt_calloc(1, head + 2 * (size_t)n * sizeof(int));
  *c = (int *)(block + head);
  *displs = *c + n;
  for (int i = 0; i < n; i++) {
    (*c)[i] = (int)counts[i];
    (*displs)[i] = i ? (*displs)[i - 1] + (*c)[i - 1] : 0;
  }
  return (MPI_Request *)block;
}

/* Past one call's int counts: each member's block travels by itself,
 * chunk by chunk, rooted at that member: with send, summed into it
 * (MPI_Ireduce; member me receives in recv), else broadcast from it in place
 * in recv (MPI_Ibcast). */
static MPI_Request *post_blocks(const float *send, float *recv, const long *counts, int n, int me,
                                MPI_Comm comm, int *nreqs, const char *what) {
  MPI_Request *reqs = requests(chunks_of_blocks(counts, n));
  int k = 0;
  int64_t at = 0;
  for (int i = 0; i < n; at += counts[i], i++)
    for (int c = 0, nc = hx_rt_message_chunks(counts[i]); c < nc; c++) {
      int64_t off;
      int count;
      hx_rt_chunk_at(counts[i], g_max_count, c, &off, &count);
      if (send)
        hx_rt_mpi_check(MPI_Ireduce(send + at + off, i == me ? recv + off : NULL, count, MPI_FLOAT,
                                    MPI_SUM, i, comm, &reqs[k++]),
                        what);
      else
        hx_rt_mpi_check(MPI_Ibcast(recv + at + off, count, MPI_FLOAT, i, comm, &reqs[k++]), what);
    }
  *nreqs = k;
  return reqs;
}

MPI_Request *hx_rt_reduce_scatter_floats_start(const float *send, float *recv, const long *counts,
                                               int n, MPI_Comm comm, int *nreqs, const char *what) {
  int me = 0;
  hx_rt_mpi_check(MPI_Comm_rank(comm, &me), what);
  if (!fits_one_call(counts, n))
    return post_blocks(send, recv, counts, n, me, comm, nreqs, what);
  int *c, *displs;
  MPI_Request *reqs = request_with_counts(counts, n, &c, &displs);
  static float empty; /* a receive buffer for an empty block */
  hx_rt_mpi_check(
      MPI_Ireduce_scatter(send, c[me] ? recv : &empty, c, MPI_FLOAT, MPI_SUM, comm, &reqs[0]),
      what);
  *nreqs = 1;
  return reqs;
}

MPI_Request *hx_rt_allgather_floats_start(float *buf, const long *counts, int n, MPI_Comm comm,
                                          int *nreqs, const char *what) {
  if (!fits_one_call(counts, n))
    return post_blocks(NULL, buf, counts, n, -1, comm, nreqs, what);
  int *c, *displs;
  MPI_Request *reqs = request_with_counts(counts, n, &c, &displs);
  hx_rt_mpi_check(MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, buf, c, displs, MPI_FLOAT,
                                  comm, &reqs[0]),
                  what);
  *nreqs = 1;
  return reqs;
}

/* Receives first, then sends: every receive is posted before any send, so
 * MPI never has to buffer a message the peer has not asked for yet. */
void hx_rt_exchange(const struct hx_rt_msg *recvs, int nrecvs, const struct hx_rt_msg *sends,
                    int nsends, MPI_Datatype type, int tag, MPI_Comm comm,
                    const struct hx_rt_wait *w) {
  int nreqs = 0;
  for (int k = 0; k < nrecvs; k++)
    nreqs += recvs[k].n > 0 ? hx_rt_message_chunks(recvs[k].n) : 0;
  for (int k = 0; k < nsends; k++)
    nreqs += sends[k].n > 0 ? hx_rt_message_chunks(sends[k].n) : 0;
  MPI_Request *reqs = requests(nreqs), *at = reqs;
  for (int k = 0; k < nrecvs; k++)
    if (recvs[k].n > 0) {
      hx_rt_post_chunks(recvs[k].buf, recvs[k].n, type, recvs[k].peer, tag, false, comm, at,
                        w->what);
      at += hx_rt_message_chunks(recvs[k].n);
    }
  for (int k = 0; k < nsends; k++)
    if (sends[k].n > 0) {
      hx_rt_post_chunks(sends[k].buf, sends[k].n, type, sends[k].peer, tag, true, comm, at,
                        w->what);
      at += hx_rt_message_chunks(sends[k].n);
    }
  hx_rt_wait_all(nreqs, reqs, w);
  free(reqs);
}

MPI_Comm hx_rt_split_comm(int color, int key, int size, const char *what) {
  MPI_Comm comm;
  hx_rt_mpi_check(MPI_Comm_split(MPI_COMM_WORLD, color, key, &comm), what);
  int got = 0;
  MPI_Comm_size(comm, &got);
  if (got != size)
    hx_rt_fatal(HX_RT_EXIT_ERROR, "internal: %s: %d ranks, the plan says %d", what, got, size);
  if (size == 1) {
    MPI_Comm_free(&comm);
    comm = MPI_COMM_NULL;
  }
  hx_rt_progress();
  return comm;
}

MPI_Comm hx_rt_group_comm(const int *ranks, int n, int tag) {
  MPI_Group world, members;
  MPI_Comm comm;
  hx_rt_mpi_check(MPI_Comm_group(MPI_COMM_WORLD, &world), "MPI_Comm_group");
  hx_rt_mpi_check(MPI_Group_incl(world, n, ranks, &members), "MPI_Group_incl");
  hx_rt_mpi_check(MPI_Comm_create_group(MPI_COMM_WORLD, members, tag, &comm),
                  "create a gradient-sync communicator");
  MPI_Group_free(&members);
  MPI_Group_free(&world);
  hx_rt_progress();
  return comm;
}

int hx_rt_group_comms_open(struct hx_rt_group_comms *t, const int *ranks, int n, int id) {
  if (t->n == t->cap) {
    t->cap = t->cap ? 2 * t->cap : 8;
    struct hx_rt_group_comm *grown = realloc(t->items, (size_t)t->cap * sizeof *grown);
    if (!grown)
      hx_rt_fatal(HX_RT_EXIT_ERROR, "out of memory opening gradient-sync groups");
    t->items = grown;
  }
  t->items[t->n] = (struct hx_rt_group_comm){hx_rt_group_comm(ranks, n, id), ranks, n};
  return t->n++;
}

struct hx_rt_wait hx_rt_group_comms_wait(const struct hx_rt_group_comms *t, int i,
                                         const char *what) {
  const struct hx_rt_group_comm *g = &t->items[i];
  return (struct hx_rt_wait){what, -1, -1, g->nranks, g->ranks};
}

/* An integer setting from the environment in [lo, hi]; fallback when unset. */
static int int_from_env(const char *name, int lo, int hi, int fallback) {
  const char *s = getenv(name);
  if (!s || !*s)
    return fallback;
  char *end = NULL;
  errno = 0;
  long long v = strtoll(s, &end, 10);
  if (errno || *end || v < lo || v > hi)
    hx_rt_fatal(HX_RT_EXIT_ERROR, "%s='%s' is not an integer in [%d, %d]", name, s, lo, hi);
  return (int)v;
}

static void read_message_limits(void) {
  int *ub = NULL, found = 0;
  hx_rt_mpi_check(MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &ub, &found), "query MPI_TAG_UB");
  if (found && ub && *ub >= 3)
    g_tag_ub = *ub;
  g_tag_ub = int_from_env("HEXIC_MPI_TAG_UB", 3, g_tag_ub, g_tag_ub);
  g_max_count = int_from_env("HEXIC_MPI_MAX_COUNT", 1, INT_MAX, INT_MAX);
}

void hx_rt_init(int *argc, char ***argv) {
  int provided = 0;
  if (MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS) {
    fprintf(stderr, "hexic-rt: error: MPI_Init failed\n");
    exit(HX_RT_EXIT_MPI);
  }
  MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &g_world_size);
  if (provided < MPI_THREAD_FUNNELED)
    hx_rt_fatal(HX_RT_EXIT_MPI, "the MPI library does not support threads (the watchdog needs "
                                "MPI_THREAD_FUNNELED)");
  /* Errors come back as return codes so hx_rt_mpi_check can say what failed. */
  hx_rt_mpi_check(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN),
                  "MPI_Comm_set_errhandler");
  g_timeout_s = timeout_from_env();
  read_message_limits();
  hx_rt_mpi_check(MPI_Comm_dup(MPI_COMM_WORLD, &g_ctl), "create the status communicator");
  hx_rt_mpi_check(MPI_Comm_set_errhandler(g_ctl, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");
  hx_rt_watchdog_start();
}

int hx_rt_rank(void) { return g_rank; }
int hx_rt_world_size(void) { return g_world_size; }

void hx_rt_finalize(void) {
  watchdog_join();
  if (!mpi_is_up())
    return;
  reap_outgoing();
  for (int i = 0; i < g_nout; i++) /* answers to a tracer that gave up: MPI may drop them */
    MPI_Request_free(&g_out[i].req);
  g_nout = 0;
  if (g_ctl != MPI_COMM_NULL)
    MPI_Comm_free(&g_ctl);
  MPI_Finalize();
}

/* ---- world check ---- */

bool hx_rt_world_matches(int world_size, int plan_ranks, const int *compiled_ranks,
                         const char *const *fingerprints, char *msg, size_t msg_size) {
  if (world_size != plan_ranks) {
    snprintf(msg, msg_size,
             "the plan has %d ranks but %d processes were launched (run launch.sh, or "
             "mpirun -np 1 ./rank_0000 : -np 1 ./rank_0001 : ... with every rank once)",
             plan_ranks, world_size);
    return false;
  }
  for (int r = 0; r < world_size; r++) {
    if (compiled_ranks[r] != r) {
      snprintf(msg, msg_size,
               "world rank %d runs the program of plan rank %d (rank_%04d); launch "
               "rank_NNNN as world rank NNNN, in order",
               r, compiled_ranks[r], compiled_ranks[r]);
      return false;
    }
  }
  for (int r = 1; r < world_size; r++) {
    if (strncmp(fingerprints[r], fingerprints[0], HX_RT_FINGERPRINT_MAX - 1) != 0) {
      snprintf(msg, msg_size,
               "world rank %d runs a program of another plan (fingerprint '%.*s', rank 0 has "
               "'%.*s'); rebuild and launch every rank from one hexic output",
               r, HX_RT_FINGERPRINT_MAX - 1, fingerprints[r], HX_RT_FINGERPRINT_MAX - 1,
               fingerprints[0]);
      return false;
    }
  }
  return true;
}

void hx_rt_check_world(int compiled_rank, int plan_ranks, const char *fingerprint) {
  int n = g_world_size;
  char mine[HX_RT_FINGERPRINT_MAX] = {0};
  snprintf(mine, sizeof mine, "%s", fingerprint ? fingerprint : "");
  int *ranks = malloc(sizeof *ranks * (size_t)n);
  char *fps = malloc((size_t)n * HX_RT_FINGERPRINT_MAX);
  const char **fp_of = malloc(sizeof *fp_of * (size_t)n);
  if (!ranks || !fps || !fp_of)
    hx_rt_fatal(HX_RT_EXIT_ERROR, "out of memory in the world check");
  hx_rt_mpi_check(MPI_Allgather(&compiled_rank, 1, MPI_INT, ranks, 1, MPI_INT, MPI_COMM_WORLD),
                  "MPI_Allgather (world check)");
  hx_rt_mpi_check(MPI_Allgather(mine, HX_RT_FINGERPRINT_MAX, MPI_CHAR, fps, HX_RT_FINGERPRINT_MAX,
                                MPI_CHAR, MPI_COMM_WORLD),
                  "MPI_Allgather (world check)");
  for (int r = 0; r < n; r++)
    fp_of[r] = fps + (size_t)r * HX_RT_FINGERPRINT_MAX;
  char msg[512];
  bool ok = hx_rt_world_matches(n, plan_ranks, ranks, fp_of, msg, sizeof msg);
  free(ranks);
  free(fps);
  free(fp_of);
  hx_rt_progress();
  if (ok)
    return;
  /* Every rank saw the same gathered tables, so every rank reaches this
   * point and the job ends in an orderly way, each rank saying why. */
  fprintf(stderr, "hexic-rt: rank %d: error: launched world does not match the plan: %s\n", g_rank,
          msg);
  fflush(stderr);
  hx_rt_finalize();
  exit(HX_RT_EXIT_WORLD);
}

/* ---- console output (rt_init.h) ---- */

int hx_rt_log_format_step(char *buf, size_t size, const struct hx_rt_step_stats *s) {
  return snprintf(buf, size, "step %lld/%lld | loss %.6f | lr %.4e | %.1f ms | %.0f tok/s",
                  (long long)(s->step + 1), (long long)s->steps, s->loss, s->lr, s->ms,
                  s->tokens_per_s);
}

void hx_rt_log_step(const struct hx_rt_step_stats *s) {
  char line[256];
  hx_rt_log_format_step(line, sizeof line, s);
  /* One write of the whole line: stdout of several ranks goes through mpirun's
   * forwarding, which keeps whole writes together. */
  printf("%s\n", line);
  fflush(stdout);
}

void hx_rt_log_banner(const char *fmt, ...) {
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  printf("hexic: %s\n", msg);
  fflush(stdout);
}

double hx_rt_now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}
