/* Start-up, world check, fatal errors and the fault watchdog (see rt_init.h
 * for the design). */
#include "rt_init.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
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
static atomic_bool g_watch_enabled;
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

/* Wakes several times per bound so the overshoot stays a small fraction of
 * it; never calls MPI (MPI runs with MPI_THREAD_FUNNELED). */
static void *watchdog_main(void *unused) {
  (void)unused;
  double period = fmin(0.25, g_timeout_s / 8);
  while (!atomic_load(&g_watch_quit)) {
    sleep_s(period);
    if (!atomic_load(&g_watch_enabled))
      continue;
    double idle = (double)(monotonic_ns() - atomic_load(&g_last_progress_ns)) * 1e-9;
    if (idle > g_timeout_s) {
      fprintf(stderr,
              "hexic-rt: rank %d: error: no progress for %.1f s (HEXIC_TIMEOUT_S=%g): a peer "
              "rank died or hangs; exiting\n",
              g_rank, idle, g_timeout_s);
      fflush(stderr);
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
  hx_rt_watchdog_start();
}

int hx_rt_rank(void) { return g_rank; }
int hx_rt_world_size(void) { return g_world_size; }

void hx_rt_finalize(void) {
  watchdog_join();
  if (mpi_is_up())
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
