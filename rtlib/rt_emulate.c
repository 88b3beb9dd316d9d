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
 *     until then. The reference is the fewest CPU seconds the op took in the
 *     first RT_EMU_CALIBRATION_STEPS steps, which run one rank's compute at
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
 * Sleeping ranks leave their cores to the others, so a mixed cluster of a
 * few ranks fits a machine of fewer cores as long as the sum of 1/slowdown
 * over the ranks leaves cores idle. The CUDA backend ignores it. */
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
#include "rt_log.h"

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

/* ---- the hooks ---- */

void rt_emu_init(struct rt_exec *e, bool requested) {
  struct rt_emu *u = &e->emu;
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
  hx_rt_mpi_check(MPI_Comm_dup(MPI_COMM_WORLD, &u->comm), "emulation communicator");
  int slots = e->cfg->activation_slots;
  u->stamps = hx_rt_calloc((size_t)(2 * slots), sizeof *u->stamps);
  u->reqs = hx_rt_calloc((size_t)(2 * slots), sizeof *u->reqs);
  for (int i = 0; i < 2 * slots; i++)
    u->reqs[i] = MPI_REQUEST_NULL;
  u->reference_cpu_s = hx_rt_calloc((size_t)e->cfg->nops, sizeof *u->reference_cpu_s);
  lock_open(e);
  hx_rt_set_wait_hooks(wait_enter, wait_leave, e);
  if (e->cfg->rank == 0)
    hx_rt_log_banner("emulating the cluster file's device and link speeds (--emulate); "
                     "the first %d steps time each rank's compute alone",
                     RT_EMU_CALIBRATION_STEPS);
}

/* One line on rank 0: each rank's compute of one step at its device's
 * speed (slowdown x the reference of every compute op of the schedule),
 * what the simulator's per-rank busy time (plan.json) should match, less
 * the transfers. Collective. */
static void report_compute(struct rt_exec *e) {
  const struct rt_emu *u = &e->emu;
  double mine[3] = {0, (double)u->emulated_ops, (double)u->late_ops};
  for (int i = 0; i < e->cfg->nops; i++)
    mine[0] += u->fig->slowdown * u->reference_cpu_s[i];
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
                     RT_EMU_CALIBRATION_STEPS);
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
  if (!u->on)
    return;
  /* before the gather: a run that ends in a calibration step leaves the
   * lock with the rank that stepped last, and the others still need it to
   * finish their optimizer step and reach the gather */
  hx_rt_set_wait_hooks(NULL, NULL, NULL);
  lock_give(u);
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
  free(u->reference_cpu_s);
  u->reference_cpu_s = NULL;
  u->on = false;
}

void rt_emu_op_begin(struct rt_exec *e, int op_index) {
  struct rt_emu *u = &e->emu;
  if (!u->on)
    return;
  if (u->first_step < 0)
    u->first_step = (long long)e->step;
  u->calibrating = (long long)e->step < u->first_step + RT_EMU_CALIBRATION_STEPS;
  if (u->calibrating)
    lock_take(u);
  else
    lock_give(u); /* held from the last calibration step */
  u->in_op = true;
  u->op_index = op_index;
  u->waited = (struct rt_emu_mark){0, 0};
  u->wait_depth = 0;
  u->op_start = mark_now();
}

void rt_emu_op_end(struct rt_exec *e) {
  struct rt_emu *u = &e->emu;
  if (!u->on || !u->in_op)
    return;
  struct rt_emu_mark now = mark_now();
  double cpu_s = now.cpu_s - u->op_start.cpu_s - u->waited.cpu_s;
  double *reference = &u->reference_cpu_s[u->op_index];
  u->in_op = false;
  /* every run may lower the reference: a calibration step disturbed by
   * something else on the machine is not kept for the rest of the run */
  double cpu_ref = rt_emu_reference_cpu_s(reference, cpu_s);
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
  double reference = u->reference_cpu_s[u->op_index];
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
  sleep_until(sent + rt_emu_link_s(l, bytes));
}

void rt_emu_allreduce_done(struct rt_exec *e, int group_index, int nranks, double bytes,
                           double start_s) {
  struct rt_emu *u = &e->emu;
  if (!u->on)
    return;
  const struct hx_rt_link *l = group_index < 0 ? &u->fig->tp : &u->fig->groups[group_index];
  wait_enter(e); /* inside an op (TP): the link's time, not the device's */
  sleep_until(start_s + rt_emu_ring_s(l, nranks, bytes));
  wait_leave(e);
}

void rt_emu_finish(struct rt_exec *e) {
  struct rt_emu *u = &e->emu;
  if (!u->on)
    return;
  int n = 2 * e->cfg->activation_slots;
  hx_rt_wait_all(n, u->reqs, &(struct hx_rt_wait){"emulation stamps", -1, -1, 0, NULL});
}
