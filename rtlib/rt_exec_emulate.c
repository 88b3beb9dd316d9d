/* Emulated heterogeneity (--emulate): the ranks of a plan share one machine,
 * and each runs at the speed the cluster file gives its device, relative to
 * the fastest device of the plan's cluster (this machine, calibrated with
 * hexic-profile). The figures are the rank program's constants (struct
 * hx_rt_emulation, written by codegen); this file is the only place that
 * applies them:
 *   - compute: after each forward, backward and optimizer op, sleep
 *     (slowdown - 1) x the op's measured wall time;
 *   - messages between stage leaders: the sender stamps the time it started
 *     the send (one clock: CLOCK_MONOTONIC of the one machine) on a
 *     communicator of its own, and the receiver, once it has the data, sleeps
 *     until stamp + latency + bytes / bandwidth of the link between them;
 *   - TP and gradient-sync all-reduces take at least a ring all-reduce's time
 *     over the group's slowest link, 2 (n - 1) (latency + bytes / (n bandwidth));
 *     the TP all-reduces inside a layer are taken out of the op's time that
 *     the compute sleep stretches.
 * Waits inside an op for an earlier send to finish are stretched with it.
 * Sleeping ranks leave their cores to the others, so a mixed cluster of a
 * few ranks fits a machine of fewer cores. The CUDA backend ignores it. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "rt_exec_internal.h"
#include "rt_init.h"
#include "rt_log.h"

double rt_emu_compute_sleep_s(double slowdown, double op_s) {
  if (!(slowdown > 1) || !(op_s > 0))
    return 0;
  return (slowdown - 1) * op_s;
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
  struct hx_rt_link piece = *l;
  return 2.0 * (nranks - 1) * rt_emu_link_s(&piece, bytes / nranks);
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

void rt_emu_init(struct rt_exec *e, bool requested) {
  struct rt_emu *u = &e->emu;
  memset(u, 0, sizeof *u);
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
  hx_rt_mpi_check(MPI_Comm_dup(MPI_COMM_WORLD, &u->comm), "emulation communicator");
  int slots = e->cfg->activation_slots;
  u->stamps = rt_calloc((size_t)(2 * slots), sizeof *u->stamps);
  u->reqs = rt_calloc((size_t)(2 * slots), sizeof *u->reqs);
  for (int i = 0; i < 2 * slots; i++)
    u->reqs[i] = MPI_REQUEST_NULL;
  if (e->cfg->rank == 0)
    hx_rt_log_banner("emulating the cluster file's device and link speeds (--emulate)");
}

void rt_emu_compute_done(struct rt_exec *e, double start_s) {
  if (!e->emu.on)
    return;
  double now = hx_rt_now_s(), op_s = now - start_s - e->emu.inner_comm_s;
  e->emu.inner_comm_s = 0;
  sleep_until(now + rt_emu_compute_sleep_s(e->emu.fig->slowdown, op_s));
}

/* kind 0: activation, 1: gradient; one stamp in flight per slot and kind. */
void rt_emu_stamp_send(struct rt_exec *e, int kind, int micro_batch, int peer, int tag) {
  struct rt_emu *u = &e->emu;
  if (!u->on)
    return;
  int i = 2 * (micro_batch % e->cfg->activation_slots) + kind;
  hx_rt_mpi_check(MPI_Wait(&u->reqs[i], MPI_STATUS_IGNORE), "emulation stamp");
  u->stamps[i] = hx_rt_now_s();
  hx_rt_mpi_check(MPI_Isend(&u->stamps[i], 1, MPI_DOUBLE, peer, tag, u->comm, &u->reqs[i]),
                  "emulation stamp");
}

void rt_emu_arrive(struct rt_exec *e, int peer, int tag, double bytes) {
  struct rt_emu *u = &e->emu;
  if (!u->on)
    return;
  double sent = 0;
  hx_rt_mpi_check(MPI_Recv(&sent, 1, MPI_DOUBLE, peer, tag, u->comm, MPI_STATUS_IGNORE),
                  "emulation stamp");
  const struct hx_rt_link *l = peer == e->cfg->prev_leader ? &u->fig->prev : &u->fig->next;
  sleep_until(sent + rt_emu_link_s(l, bytes));
}

void rt_emu_allreduce_done(struct rt_exec *e, int group_index, int nranks, double bytes,
                           double start_s) {
  struct rt_emu *u = &e->emu;
  if (!u->on)
    return;
  const struct hx_rt_link *l = group_index < 0 ? &u->fig->tp : &u->fig->groups[group_index];
  sleep_until(start_s + rt_emu_ring_s(l, nranks, bytes));
  if (group_index < 0) /* inside a layer: the link's time, not the device's */
    u->inner_comm_s += hx_rt_now_s() - start_s;
}

void rt_emu_finish(struct rt_exec *e) {
  struct rt_emu *u = &e->emu;
  if (!u->on)
    return;
  int n = 2 * e->cfg->activation_slots;
  hx_rt_mpi_check(MPI_Waitall(n, u->reqs, MPI_STATUSES_IGNORE), "emulation stamps");
}
