/* Emulated heterogeneity (--emulate, CPU backend): the ranks of a plan share
 * one machine, and each runs at the speed the cluster file gives its
 * device, relative to the machine the emulation runs on (the cluster's
 * emulation host, else its fastest device; calibrate it with hexic-profile).
 * The figures are the rank program's constants (struct hx_rt_emulation,
 * written by codegen); this file is the only place that applies them (the
 * executor calls its hooks):
 *   - compute: a compute op (forward, backward, optimizer) of a device
 *     slowdown times slower than this machine ends slowdown x its reference
 *     CPU time after it began, plus the time it spent waiting (TP
 *     all-reduces, HexiSeq exchanges, the loss all-reduce): the rank sleeps
 *     until then. The reference is the fewest CPU seconds an op of its kind
 *     (forward, backward, optimizer: reference_of) took in the
 *     first RT_EMU_CALIBRATION_STEPS steps ($HEXIC_EMULATE_CALIBRATION
 *     if set) and since; those steps run one rank's compute at
 *     a time (a machine-wide lock, let go only in a wait), so each op is
 *     timed on an otherwise idle machine, run back to back with the ops
 *     before it as it would be alone. Why not each
 *     op's own time: ranks sharing cores and memory slow one another down,
 *     and a rank that has slept comes back to cold caches (on the machine
 *     this was written on, an op after a 50 ms sleep took 12% longer), none
 *     of which a device of a real cluster suffers. As long as an op's own
 *     run fits in slowdown x its reference, those slowdowns are absorbed;
 *     so a cluster emulated faithfully has every device somewhat slower
 *     than this machine (an emulation host block);
 *   - messages between stage leaders: the sender stamps the time it started
 *     the send (one clock: CLOCK_MONOTONIC of the one machine) on a
 *     communicator of its own, and the receiver, once it has the data, sleeps
 *     until stamp + latency + bytes / bandwidth of the link between them;
 *   - TP and gradient-sync all-reduces take at least a ring all-reduce's time
 *     over the group's slowest link, 2 (n - 1) (latency + bytes / (n bandwidth));
 *     a gradient bucket started inside a backward starts at the emulated
 *     device's time (rt_emu_clock), and a rank's buckets queue on one link.
 *     A gradient all-reduce ends that long after its group's LAST member
 *     started it (the members agree on that time over a communicator of
 *     their own), on every member: a member that came early waits for the
 *     others and then for the whole ring, as on a real cluster, not only
 *     for the real (fast) all-reduce on this machine.
 * Sleeping ranks leave their cores to the others, so a mixed cluster of a
 * few ranks fits a machine of fewer cores as long as the sum of 1/slowdown
 * over the ranks leaves cores idle. The CUDA backend ignores it.
 *
 * The runtime trace (HEXIC_TRACE=FILE, either backend, with or without
 * --emulate) lives here too, as it times the same ops: each rank keeps its
 * events in memory (at most RT_TRACE_MAX_EVENTS), and at the end rank 0
 * writes FILE in trace.json's format (codegen/trace.c: Chrome trace events,
 * microseconds, one track per rank, the simulator's event names), so the
 * measured and the simulated iteration open side by side in Perfetto. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <time.h>
#include <unistd.h>

#include "rt_exec_internal.h"
#include "rt_init.h"

/* ---- the pure rules ---- */

double rt_emu_op_end_s(double start_s, double wait_s, double slowdown, double reference_cpu_s) {
  double end = start_s;
  if (wait_s > 0)
    end += wait_s;
  if (reference_cpu_s > 0)
    end += (slowdown > 1 ? slowdown : 1) * reference_cpu_s;
  return end;
}

double rt_emu_reference_cpu_s(double *fewest_s, double cpu_s) {
  if (cpu_s > 0 && (!(*fewest_s > 0) || cpu_s < *fewest_s))
    *fewest_s = cpu_s;
  return *fewest_s > 0 ? *fewest_s : 0;
}

bool rt_emu_late(double start_s, double end_s, double ran_until_s) {
  return ran_until_s - end_s > 0.1 * (end_s - start_s) + 1e-4;
}

double rt_emu_link_s(const struct hx_rt_link *l, double bytes) {
  double t = l->latency_s > 0 ? l->latency_s : 0;
  if (l->bandwidth > 0 && bytes > 0)
    t += bytes / l->bandwidth;
  return t;
}

double rt_emu_ring_s(const struct hx_rt_link *l, int nranks, double bytes) {
  if (nranks < 2)
    return 0;
  return 2.0 * (nranks - 1) * rt_emu_link_s(l, bytes / nranks);
}

double rt_emu_shard_s(const struct hx_rt_link *l, int nranks, double largest_bytes) {
  return nranks < 2 ? 0 : (nranks - 1) * rt_emu_link_s(l, largest_bytes);
}

/* ---- clocks, sleeps and the calibration lock ---- */

static struct rt_emu_mark mark_now(void) {
  struct timespec cpu;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &cpu);
  return (struct rt_emu_mark){hx_rt_now_s(), (double)cpu.tv_sec + (double)cpu.tv_nsec * 1e-9};
}

static void sleep_until(double t) {
  for (;;) {
    double left = t - hx_rt_now_s();
    if (left <= 0)
      return;
    struct timespec ts = {(time_t)left, (long)((left - (double)(time_t)left) * 1e9)};
    if (nanosleep(&ts, NULL) != 0 && errno != EINTR)
      return;
  }
}

static void lock_take(struct rt_emu *u) {
  if (u->lock_held)
    return;
  while (flock(u->lock_fd, LOCK_EX) != 0)
    if (errno != EINTR)
      hx_rt_fatal(HX_RT_EXIT_ERROR, "--emulate: cannot take the calibration lock: %s",
                  strerror(errno));
  u->lock_held = true;
}

static void lock_give(struct rt_emu *u) {
  if (!u->lock_held)
    return;
  flock(u->lock_fd, LOCK_UN);
  u->lock_held = false;
}

/* One file every rank opens: rank 0 makes it, and unlinks it once all have
 * it open (a lock needs no name after that). Collective. */
static void lock_open(struct rt_exec *e) {
  char path[512] = "";
  if (e->cfg->rank == 0) { /* $TMPDIR, else (unset or unusable) /tmp */
    const char *env = getenv("TMPDIR"), *dirs[2] = {env && *env ? env : "/tmp", "/tmp"};
    int fd = -1;
    for (int k = 0; k < 2 && fd < 0; k++) {
      snprintf(path, sizeof path, "%s/hexic-emulate-XXXXXX", dirs[k]);
      fd = mkstemp(path);
    }
    if (fd < 0)
      path[0] = '\0';
    else
      close(fd);
  }
  hx_rt_mpi_check(MPI_Bcast(path, (int)sizeof path, MPI_CHAR, 0, MPI_COMM_WORLD), "emulation lock");
  if (!path[0])
    hx_rt_fatal(HX_RT_EXIT_ERROR, "--emulate: rank 0 cannot make its lock file in $TMPDIR or /tmp");
  e->emu.lock_fd = open(path, O_RDWR | O_CLOEXEC);
  int opened = e->emu.lock_fd >= 0, all = 0;
  hx_rt_mpi_check(MPI_Allreduce(&opened, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD),
                  "emulation lock");
  if (e->cfg->rank == 0)
    unlink(path);
  if (!all)
    hx_rt_fatal(HX_RT_EXIT_ERROR,
                "--emulate runs every rank on one machine: a rank cannot open %s, made by rank 0",
                path);
}

/* ---- gradient-sync groups: when the last member started ---- */

/* Per group of the rank config (cfg->groups: those this rank is in), a
 * communicator of its members (MPI_COMM_NULL for a group of one). */
static struct {
  MPI_Comm *comm;
  int n;
} groups;

/* Collective over each group's members, in increasing global id on every
 * rank, the id its tag (as the transport opens its groups: overlapping
 * groups cannot deadlock; an index in cfg->groups differs between ranks). */
static void groups_open(const struct hx_rt_rank_config *c) {
  groups.n = c->ngroups;
  groups.comm = hx_rt_calloc((size_t)(c->ngroups > 0 ? c->ngroups : 1), sizeof *groups.comm);
  MPI_Group world;
  hx_rt_mpi_check(MPI_Comm_group(MPI_COMM_WORLD, &world), "emulation groups");
  for (int i = 0; i < c->ngroups; i++) {
    const struct hx_rt_group *g = &c->groups[i];
    bool member = false;
    for (int k = 0; k < g->nranks; k++)
      member |= g->ranks[k] == c->rank;
    groups.comm[i] = MPI_COMM_NULL;
    if (!member || g->nranks < 2)
      continue;
    MPI_Group mine;
    hx_rt_mpi_check(MPI_Group_incl(world, g->nranks, g->ranks, &mine), "emulation groups");
    hx_rt_mpi_check(MPI_Comm_create_group(MPI_COMM_WORLD, mine, g->id, &groups.comm[i]),
                    "emulation groups");
    MPI_Group_free(&mine);
  }
  MPI_Group_free(&world);
}

static void groups_close(void) {
  for (int i = 0; i < groups.n; i++)
    if (groups.comm[i] != MPI_COMM_NULL)
      MPI_Comm_free(&groups.comm[i]);
  free(groups.comm);
  groups.comm = NULL;
  groups.n = 0;
}

/* When the gradient all-reduce or the pipeline receive this rank has just
 * waited for completed at the emulated link's speed (0: unknown): its
 * trace event carries it, as the rank may look for the result only later,
 * once its own compute is done (rt_emu_allreduce_done and rt_emu_arrive
 * set it, the next such rt_trace_event takes it). */
static double link_done_s, link_began_s; /* began: an all-reduce's last start */

/* The latest start_s over group group_index's members (start_s itself
 * outside a group). Collective over the group, in the buckets' one order. */
static double last_start_s(int group_index, double start_s) {
  if (group_index < 0 || group_index >= groups.n || groups.comm[group_index] == MPI_COMM_NULL)
    return start_s;
  double last = start_s;
  hx_rt_mpi_check(MPI_Allreduce(&start_s, &last, 1, MPI_DOUBLE, MPI_MAX, groups.comm[group_index]),
                  "emulation: the group's last start");
  return last;
}

/* ---- waits: not compute ---- */

/* Calibrating, a rank lets the lock go only when it waits: its ops run back
 * to back as they would alone on the machine, up to the next wait. */
static void wait_enter(void *arg) {
  struct rt_emu *u = &((struct rt_exec *)arg)->emu;
  if (u->wait_depth++ > 0)
    return;
  if (u->calibrating) /* the others compute while this rank waits */
    lock_give(u);
  if (u->in_op)
    u->wait_start = mark_now();
}

static void wait_leave(void *arg) {
  struct rt_emu *u = &((struct rt_exec *)arg)->emu;
  if (u->wait_depth == 0 || --u->wait_depth > 0 || !u->in_op)
    return;
  if (u->calibrating)
    lock_take(u);
  struct rt_emu_mark now = mark_now();
  u->waited.wall_s += now.wall_s - u->wait_start.wall_s;
  u->waited.cpu_s += now.cpu_s - u->wait_start.cpu_s;
}

/* ---- the runtime trace ---- */

/* The most events a rank keeps (56 bytes each, some 260 written): past it
 * the rest of the run is left out, and the trace ends with a note saying
 * so, as trace.json does past its own limit. */
enum { RT_TRACE_MAX_EVENTS = 200000 };

/* peer: a send's or a receive's other leader; a gradient all-reduce's
 * group (its global id, struct hx_rt_group), written as "group" so that a
 * reader can match one all-reduce across its members. */
struct trace_event {
  double start_s, end_s;
  double done_s;   /* all-reduce, all-gather, recv under --emulate: at link speed (0: unknown) */
  double began_s;  /* all-reduce under --emulate: its last member's start on the link */
  double waited_s; /* a compute op under --emulate: its waits (collectives inside it) */
  /* a compute op under --emulate: its compute at the device's speed, from
   * CPU seconds (what it would take on an idle machine, whatever the load) */
  double emulated_s;
  int32_t kind, micro_batch, layer, peer;
};

/* What a rank sends rank 0 before its events. */
struct trace_head {
  int32_t n, pipeline, stage;
  int64_t dropped;
  char device[64];
};

/* One rank per process: the trace is the process's, like a backend's state. */
static struct {
  bool on;          /* this rank records */
  bool any;         /* some rank does: the start and the write are collective */
  const char *path; /* rank 0: FILE */
  MPI_Comm comm;    /* the events' way to rank 0 */
  double zero_s;    /* a barrier's end: time 0 of the trace on every rank */
  double op_start_s;
  int op_index;
  struct trace_event *ev;
  int n, cap;
  int64_t dropped;
} tr;

double rt_trace_now(void) { return tr.on ? hx_rt_now_s() : 0; }

void rt_trace_event(const struct rt_exec *e, enum rt_trace_kind kind, int micro_batch, int layer,
                    int peer, double start_s, double end_s) {
  (void)e;
  if (!tr.on)
    return;
  if (tr.n == RT_TRACE_MAX_EVENTS) {
    tr.dropped++;
    return;
  }
  if (tr.n == tr.cap) {
    int cap = tr.cap ? 2 * tr.cap : 4096;
    cap = cap < RT_TRACE_MAX_EVENTS ? cap : RT_TRACE_MAX_EVENTS;
    struct trace_event *grown = hx_rt_calloc((size_t)cap, sizeof *grown);
    if (tr.n)
      memcpy(grown, tr.ev, (size_t)tr.n * sizeof *grown);
    free(tr.ev);
    tr.ev = grown;
    tr.cap = cap;
  }
  double done = 0, began = 0;
  if (kind == RT_TRACE_ALLREDUCE || kind == RT_TRACE_RECV || kind == RT_TRACE_ALLGATHER) {
    done = link_done_s;
    began = kind == RT_TRACE_ALLREDUCE ? link_began_s : 0;
    link_done_s = link_began_s = 0;
  }
  tr.ev[tr.n++] =
      (struct trace_event){start_s, end_s, done, began, 0, 0, kind, micro_batch, layer, peer};
}

/* Collective: whether any rank traces; rank 0 refuses a FILE that exists
 * (nothing the user wrote is overwritten) before the first step. */
static void trace_init(struct rt_exec *e) {
  const char *path = getenv("HEXIC_TRACE");
  int mine = path && *path, any = 0;
  hx_rt_mpi_check(MPI_Allreduce(&mine, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD), "HEXIC_TRACE");
  if (!any)
    return;
  if (e->cfg->rank == 0) {
    if (!mine)
      hx_rt_fatal(HX_RT_EXIT_ERROR, "HEXIC_TRACE is set on some ranks but not on rank 0, which "
                                    "writes the trace: set it for every rank");
    if (access(path, F_OK) == 0)
      hx_rt_fatal(HX_RT_EXIT_ERROR,
                  "HEXIC_TRACE='%s' exists: the runtime trace does not write over a file; remove "
                  "it or name another",
                  path);
    tr.path = path;
  }
  tr.any = true;
  tr.on = mine;
  hx_rt_mpi_check(MPI_Comm_dup(MPI_COMM_WORLD, &tr.comm), "HEXIC_TRACE");
  hx_rt_mpi_check(MPI_Barrier(tr.comm), "HEXIC_TRACE");
  tr.zero_s = hx_rt_now_s();
}

static const char *trace_kind_name(int kind) {
  static const char *const names[] = {
      "forward",    "backward",  "send",      "recv",
      "all-reduce", "optimizer", "broadcast", "loss and norm all-reduce",
      "all-gather"};
  return kind >= 0 && kind <= RT_TRACE_ALLGATHER ? names[kind] : "?";
}

/* One event as codegen/trace.c writes a simulated one. */
static void write_trace_event(FILE *f, int rank, const struct trace_head *h,
                              const struct trace_event *v) {
  const char *kind = trace_kind_name(v->kind);
  bool collective = v->kind == RT_TRACE_ALLREDUCE || v->kind == RT_TRACE_ALLGATHER;
  fputs(",\n  {\"name\": \"", f);
  if (v->kind == RT_TRACE_ALLREDUCE && v->layer < 0)
    fputs("all-reduce emb/head", f);
  else if (v->kind == RT_TRACE_ALLREDUCE)
    fprintf(f, "all-reduce layer %d", v->layer);
  else if (v->micro_batch >= 0)
    fprintf(f, "%s mb%d", kind, v->micro_batch);
  else
    fputs(kind, f);
  fprintf(f,
          "\", \"cat\": \"%s\", \"ph\": \"X\", \"pid\": 0, \"tid\": %d, \"ts\": %.3f, "
          "\"dur\": %.3f, \"args\": {\"pipeline\": %d, \"stage\": %d, \"micro_batch\": %d, "
          "\"layer\": %d, \"peer\": %d",
          kind, rank, (v->start_s - tr.zero_s) * 1e6, (v->end_s - v->start_s) * 1e6, h->pipeline,
          h->stage, v->micro_batch, v->layer < -1 ? -1 : v->layer, collective ? -1 : v->peer);
  if (collective)
    fprintf(f, ", \"group\": %d", v->peer);
  if (v->done_s > 0)
    fprintf(f, ", \"done\": %.3f", (v->done_s - tr.zero_s) * 1e6);
  if (v->began_s > 0)
    fprintf(f, ", \"began\": %.3f", (v->began_s - tr.zero_s) * 1e6);
  if (v->waited_s > 0)
    fprintf(f, ", \"waited\": %.3f", v->waited_s * 1e6);
  if (v->emulated_s > 0)
    fprintf(f, ", \"emulated\": %.3f", v->emulated_s * 1e6);
  fputs("}}", f);
}

/* The device name as a JSON string's inside: printable ASCII, no quotes. */
static void write_name(FILE *f, const char *s) {
  for (; *s; s++)
    fputc(*s >= 32 && *s < 127 && *s != '"' && *s != '\\' ? *s : '?', f);
}

static void write_rank(FILE *f, int rank, const struct trace_head *h,
                       const struct trace_event *ev) {
  fprintf(f,
          ",\n  {\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": 0, \"tid\": %d, "
          "\"args\": {\"name\": \"%d ",
          rank, rank);
  write_name(f, h->device);
  fputs("\"}}", f);
  fprintf(f,
          ",\n  {\"name\": \"thread_sort_index\", \"ph\": \"M\", \"pid\": 0, \"tid\": %d, "
          "\"args\": {\"sort_index\": %d}}",
          rank, rank);
  double last = 0;
  for (int k = 0; k < h->n; k++) {
    write_trace_event(f, rank, h, &ev[k]);
    last = ev[k].start_s > last ? ev[k].start_s : last;
  }
  if (h->dropped > 0)
    fprintf(f,
            ",\n  {\"name\": \"trace cut: %lld events of rank %d left out (the limit is %d)\", "
            "\"cat\": \"cut\", \"ph\": \"i\", \"s\": \"t\", \"pid\": 0, \"tid\": %d, "
            "\"ts\": %.3f}",
            (long long)h->dropped, rank, (int)RT_TRACE_MAX_EVENTS, rank, (last - tr.zero_s) * 1e6);
}

/* Rank 0 writes FILE.tmp, rank by rank as the events arrive (its memory
 * holds one rank's at a time), then renames it to FILE. */
static void trace_write(struct rt_exec *e) {
  if (!tr.any)
    return;
  tr.any = false;
  struct trace_head mine = {tr.n, e->cfg->pipeline, e->cfg->stage, tr.dropped, ""};
  snprintf(mine.device, sizeof mine.device, "%s", e->cfg->device_type ? e->cfg->device_type : "");
  if (e->cfg->rank != 0) {
    hx_rt_mpi_check(MPI_Send(&mine, (int)sizeof mine, MPI_BYTE, 0, 0, tr.comm), "HEXIC_TRACE");
    hx_rt_mpi_check(MPI_Send(tr.ev, (int)(tr.n * sizeof *tr.ev), MPI_BYTE, 0, 1, tr.comm),
                    "HEXIC_TRACE");
  } else {
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp", tr.path);
    FILE *f = fopen(tmp, "w");
    if (!f)
      hx_rt_fatal(HX_RT_EXIT_ERROR, "HEXIC_TRACE: cannot write %s: %s", tmp, strerror(errno));
    fputs("{\"displayTimeUnit\": \"ms\", \"traceEvents\": [\n", f);
    fputs("  {\"name\": \"process_name\", \"ph\": \"M\", \"pid\": 0, \"args\": {\"name\": "
          "\"measured (HEXIC_TRACE)\"}}",
          f);
    write_rank(f, 0, &mine, tr.ev);
    struct trace_event *theirs = hx_rt_calloc(RT_TRACE_MAX_EVENTS, sizeof *theirs);
    for (int r = 1; r < e->cfg->world_size; r++) {
      struct trace_head h;
      hx_rt_mpi_check(MPI_Recv(&h, (int)sizeof h, MPI_BYTE, r, 0, tr.comm, MPI_STATUS_IGNORE),
                      "HEXIC_TRACE");
      if (h.n < 0 || h.n > RT_TRACE_MAX_EVENTS)
        hx_rt_fatal(HX_RT_EXIT_ERROR, "internal: rank %d sent %d trace events", r, (int)h.n);
      h.device[sizeof h.device - 1] = '\0';
      hx_rt_mpi_check(
          MPI_Recv(theirs, (int)(h.n * sizeof *theirs), MPI_BYTE, r, 1, tr.comm, MPI_STATUS_IGNORE),
          "HEXIC_TRACE");
      write_rank(f, r, &h, theirs);
    }
    free(theirs);
    fputs("\n]}\n", f);
    bool bad = ferror(f) != 0;
    bad |= fclose(f) != 0; /* closed either way */
    if (bad || rename(tmp, tr.path) != 0)
      hx_rt_fatal(HX_RT_EXIT_ERROR, "HEXIC_TRACE: cannot write %s: %s", tr.path, strerror(errno));
  }
  free(tr.ev);
  tr.ev = NULL;
  tr.n = tr.cap = 0;
  tr.on = false;
  hx_rt_mpi_check(MPI_Comm_free(&tr.comm), "HEXIC_TRACE");
}

static void trace_op_begin(int op_index) {
  tr.op_index = op_index;
  tr.op_start_s = rt_trace_now();
}

static void trace_op_end(struct rt_exec *e) {
  if (!tr.on)
    return;
  const struct hx_rt_op *op = &e->cfg->schedule[tr.op_index];
  enum rt_trace_kind kind = op->kind == HX_RT_FORWARD    ? RT_TRACE_FORWARD
                            : op->kind == HX_RT_BACKWARD ? RT_TRACE_BACKWARD
                                                         : RT_TRACE_OPTIMIZER;
  int mb = kind == RT_TRACE_OPTIMIZER ? -1 : op->micro_batch;
  rt_trace_event(e, kind, mb, -2, -1, tr.op_start_s, hx_rt_now_s());
  if (e->emu.on && tr.n > 0 && tr.ev[tr.n - 1].kind == (int32_t)kind) {
    tr.ev[tr.n - 1].waited_s = e->emu.waited.wall_s;
    tr.ev[tr.n - 1].emulated_s = e->emu.op_emulated_s;
  }
}

/* The calibration steps: RT_EMU_CALIBRATION_STEPS, or
 * $HEXIC_EMULATE_CALIBRATION (1 to 1000). More give each rank's references
 * more of the machine's moments to be taken in: a rank of a slow device
 * that runs two forward ops a step had six, over a few seconds, in which
 * this machine's speed moves by 10-30% (bench/measured.sh sets 6). Every
 * rank reads the same environment (mpirun passes it on), so every rank
 * agrees, or every rank stops alike. */
static int calibration_steps(void) {
  const char *text = getenv("HEXIC_EMULATE_CALIBRATION");
  if (!text)
    return RT_EMU_CALIBRATION_STEPS;
  char *end;
  errno = 0;
  long v = strtol(text, &end, 10);
  if (!*text || *end || errno || v < 1 || v > 1000)
    hx_rt_fatal(HX_RT_EXIT_ERROR,
                "HEXIC_EMULATE_CALIBRATION wants the calibration steps, 1 to 1000, not '%s'", text);
  return (int)v;
}

/* ---- the hooks ---- */

void rt_emu_init(struct rt_exec *e, bool requested) {
  struct rt_emu *u = &e->emu;
  trace_init(e);
  memset(u, 0, sizeof *u);
  u->lock_fd = -1;
  if (!requested)
    return;
  if (!e->cfg->emulation)
    hx_rt_fatal(HX_RT_EXIT_ERROR, "--emulate: this program carries no emulation figures "
                                  "(generate it again with this hexic)");
  if (strcmp(e->dev->backend, "cpu") != 0) {
    if (e->cfg->rank == 0)
      hx_rt_log_banner("--emulate ignored: the %s backend runs at its own speed", e->dev->backend);
    return;
  }
  u->on = true;
  u->fig = e->cfg->emulation;
  u->first_step = -1;
  u->calibration_steps = calibration_steps();
  hx_rt_mpi_check(MPI_Comm_dup(MPI_COMM_WORLD, &u->comm), "emulation communicator");
  int slots = e->cfg->activation_slots;
  u->stamps = hx_rt_calloc((size_t)(2 * slots), sizeof *u->stamps);
  u->reqs = hx_rt_calloc((size_t)(2 * slots), sizeof *u->reqs);
  for (int i = 0; i < 2 * slots; i++)
    u->reqs[i] = MPI_REQUEST_NULL;
  u->reference_cpu_s = hx_rt_calloc(RT_EMU_OP_KINDS, sizeof *u->reference_cpu_s);
  lock_open(e);
  groups_open(e->cfg);
  hx_rt_set_wait_hooks(wait_enter, wait_leave, e);
  if (e->cfg->rank == 0)
    hx_rt_log_banner("emulating the cluster file's device and link speeds (--emulate); "
                     "the first %d steps time each rank's compute alone",
                     u->calibration_steps);
}

/* The reference of op's kind: every forward op of a rank does the same
 * work (its stage's layers on one micro-batch of its pipeline's size), and
 * so does every backward, so they share one, the fewest CPU seconds of any
 * of them. Why not one per op: a minimum over an op's own few calibration
 * runs (three) was as noisy as the machine, and the references of one
 * rank's forward ops differed by 5% and two runs of a plan by 8%; over
 * every micro-batch of every step it settles on the machine's speed, as
 * hexic-profile's fewest of many passes does. */
static double *reference_of(const struct rt_emu *u, const struct hx_rt_op *op) {
  return &u->reference_cpu_s[op->kind]; /* 0 for the kinds that are not compute */
}

/* One line on rank 0: each rank's compute of one step at its device's
 * speed (slowdown x the reference of every compute op of the schedule),
 * what the simulator's per-rank busy time (plan.json) should match, less
 * the transfers. Collective. */
static void report_compute(struct rt_exec *e) {
  const struct rt_emu *u = &e->emu;
  double mine[3] = {0, (double)u->emulated_ops, (double)u->late_ops};
  for (int i = 0; i < e->cfg->nops; i++)
    mine[0] += u->fig->slowdown * *reference_of(u, &e->cfg->schedule[i]);
  int n = e->cfg->world_size;
  double *all = e->cfg->rank == 0 ? hx_rt_calloc((size_t)(3 * n), sizeof *all) : NULL;
  hx_rt_mpi_check(MPI_Gather(mine, 3, MPI_DOUBLE, all, 3, MPI_DOUBLE, 0, MPI_COMM_WORLD),
                  "emulation report");
  if (e->cfg->rank != 0)
    return;
  char line[2048];
  int len = snprintf(line, sizeof line, "--emulate: compute of one step at each device's speed:");
  double ops = 0, late = 0;
  for (int r = 0; r < n; r++) {
    if (len < (int)sizeof line - 32)
      len += snprintf(line + len, sizeof line - (size_t)len, " rank %d %.4f s%s", r, all[3 * r],
                      r + 1 < n ? "," : "");
    ops += all[3 * r + 1];
    late += all[3 * r + 2];
  }
  hx_rt_log_banner("%s", line);
  if (ops == 0)
    hx_rt_log_banner("--emulate: every step of this run calibrated (the first %d do): none ran "
                     "at the devices' speeds; run more steps",
                     u->calibration_steps);
  else if (late > 0.05 * ops)
    hx_rt_log_banner("--emulate: warning: %.0f of %.0f compute ops ran past their emulated end: "
                     "this machine could not keep up, and the steps are slower than the "
                     "cluster's; give the devices larger slowdowns (a faster emulation host) "
                     "or run fewer ranks",
                     late, ops);
  free(all);
}

void rt_emu_stop(struct rt_exec *e) {
  struct rt_emu *u = &e->emu;
  /* before the trace's and the report's gathers: a run that ends in a
   * calibration step leaves the lock with the rank that stepped last, and
   * the others still need it to finish their optimizer step and reach the
   * gather (the trace's gather once waited behind it for good) */
  if (u->on) {
    hx_rt_set_wait_hooks(NULL, NULL, NULL);
    lock_give(u);
  }
  trace_write(e);
  if (!u->on)
    return;
  close(u->lock_fd);
  u->lock_fd = -1;
  if (e->step > u->first_step && u->first_step >= 0)
    report_compute(e);
  rt_emu_finish(e);
  free(u->stamps);
  free(u->reqs);
  u->stamps = NULL;
  u->reqs = NULL;
  hx_rt_mpi_check(MPI_Comm_free(&u->comm), "emulation communicator");
  groups_close();
  free(u->reference_cpu_s);
  u->reference_cpu_s = NULL;
  u->on = false;
}

void rt_emu_op_begin(struct rt_exec *e, int op_index) {
  struct rt_emu *u = &e->emu;
  trace_op_begin(op_index);
  if (!u->on)
    return;
  if (u->first_step < 0)
    u->first_step = (long long)e->step;
  u->calibrating = (long long)e->step < u->first_step + u->calibration_steps;
  if (u->calibrating)
    lock_take(u);
  else
    lock_give(u); /* held from the last calibration step */
  u->in_op = true;
  u->op_index = op_index;
  u->waited = (struct rt_emu_mark){0, 0};
  u->op_emulated_s = 0;
  u->wait_depth = 0;
  u->op_start = mark_now();
}

static void emu_op_end(struct rt_exec *e);

/* The op's end at the emulated device's speed (after the sleep), traced. */
void rt_emu_op_end(struct rt_exec *e) {
  emu_op_end(e);
  trace_op_end(e);
}

static void emu_op_end(struct rt_exec *e) {
  struct rt_emu *u = &e->emu;
  if (!u->on || !u->in_op)
    return;
  struct rt_emu_mark now = mark_now();
  double cpu_s = now.cpu_s - u->op_start.cpu_s - u->waited.cpu_s;
  double *reference = reference_of(u, &e->cfg->schedule[u->op_index]);
  u->in_op = false;
  /* every run may lower the reference: a calibration step disturbed by
   * something else on the machine is not kept for the rest of the run */
  double cpu_ref = rt_emu_reference_cpu_s(reference, cpu_s);
  u->op_emulated_s = (u->fig->slowdown > 1 ? u->fig->slowdown : 1) * cpu_ref;
  if (u->calibrating) /* the lock stays taken up to the next wait */
    return;
  double end = rt_emu_op_end_s(u->op_start.wall_s, u->waited.wall_s, u->fig->slowdown, cpu_ref);
  u->emulated_ops++;
  u->late_ops += rt_emu_late(u->op_start.wall_s, end, now.wall_s);
  sleep_until(end);
}

/* Inside an op, the emulated device is as far as its compute so far (at
 * most the op's reference) at its own speed. */
double rt_emu_clock(struct rt_exec *e) {
  const struct rt_emu *u = &e->emu;
  double now = hx_rt_now_s();
  if (!u->on || !u->in_op || u->calibrating)
    return now;
  struct rt_emu_mark m = mark_now();
  double cpu_s = m.cpu_s - u->op_start.cpu_s - u->waited.cpu_s;
  double reference = *reference_of(u, &e->cfg->schedule[u->op_index]);
  if (reference > 0 && cpu_s > reference)
    cpu_s = reference;
  double at = rt_emu_op_end_s(u->op_start.wall_s, u->waited.wall_s, u->fig->slowdown, cpu_s);
  return at > now ? at : now;
}

/* kind 0: activation, 1: gradient; one stamp in flight per slot and kind. */
void rt_emu_stamp_send(struct rt_exec *e, int kind, int micro_batch, int peer, int tag) {
  struct rt_emu *u = &e->emu;
  if (!u->on)
    return;
  int i = 2 * (micro_batch % e->cfg->activation_slots) + kind;
  hx_rt_wait_all(1, &u->reqs[i],
                 &(struct hx_rt_wait){"emulation stamp", micro_batch, peer, 0, NULL});
  u->stamps[i] = hx_rt_now_s();
  hx_rt_mpi_check(MPI_Isend(&u->stamps[i], 1, MPI_DOUBLE, peer, tag, u->comm, &u->reqs[i]),
                  "emulation stamp");
}

void rt_emu_arrive(struct rt_exec *e, int peer, int tag, double bytes) {
  struct rt_emu *u = &e->emu;
  if (!u->on)
    return;
  double sent = 0;
  MPI_Request req;
  hx_rt_mpi_check(MPI_Irecv(&sent, 1, MPI_DOUBLE, peer, tag, u->comm, &req), "emulation stamp");
  hx_rt_wait_all(1, &req, &(struct hx_rt_wait){"emulation stamp", -1, peer, 0, NULL});
  const struct hx_rt_link *l = peer == e->cfg->prev_leader ? &u->fig->prev : &u->fig->next;
  link_done_s = sent + rt_emu_link_s(l, bytes);
  sleep_until(link_done_s);
}

void rt_emu_allreduce_done(struct rt_exec *e, int group_index, int nranks, double bytes,
                           double start_s) {
  struct rt_emu *u = &e->emu;
  if (!u->on)
    return;
  const struct hx_rt_link *l = group_index < 0 ? &u->fig->tp : &u->fig->groups[group_index];
  rt_emu_collective_done(e, group_index, start_s, rt_emu_ring_s(l, nranks, bytes));
}

double rt_emu_collective_done(struct rt_exec *e, int group_index, double start_s, double link_s) {
  if (!e->emu.on)
    return start_s;
  wait_enter(e); /* inside an op (TP): the link's time, not the device's */
  /* a TP group (group_index < 0) runs in lockstep inside its ops; this
   * machine's own collective is taken to be faster than the emulated link */
  double began = last_start_s(group_index, start_s);
  double done = began + link_s;
  sleep_until(done);
  if (group_index >= 0) {
    link_began_s = began;
    link_done_s = done;
  }
  wait_leave(e);
  return done;
}

void rt_emu_finish(struct rt_exec *e) {
  struct rt_emu *u = &e->emu;
  if (!u->on)
    return;
  int n = 2 * e->cfg->activation_slots;
  hx_rt_wait_all(n, u->reqs, &(struct hx_rt_wait){"emulation stamps", -1, -1, 0, NULL});
}
