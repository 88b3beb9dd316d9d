/* --emulate's rules (rtlib/rt_emulate.c), pure and untimed: when a compute
 * op ends on the emulated device, the reference time its calibration runs
 * leave, the least time of a message over a link and of a ring
 * all-reduce over a group's slowest link. The end-to-end run (same losses
 * with and without --emulate, the slow rank's constants) is
 * tests/exec/run_emulate.sh; step times are bench/measured.sh's. */
#include <math.h>

#include "rt_test.h"
#include "rtlib/rt_exec_internal.h"

static int near(double a, double b) { return fabs(a - b) <= 1e-12 * (fabs(b) + 1); }

static void op_end(void) {
  /* 3x slower: the op's reference CPU seconds three times over, from its start */
  CHECK(near(rt_emu_op_end_s(10.0, 0, 3.0, 0.01), 10.03));
  CHECK(near(rt_emu_op_end_s(10.0, 0, 1.5, 0.2), 10.3));
  /* its waits keep their wall time, unstretched */
  CHECK(near(rt_emu_op_end_s(10.0, 0.5, 2.0, 0.1), 10.7));
  CHECK(near(rt_emu_op_end_s(10.0, 0, 1.0, 0.5), 10.5)); /* this machine's speed */
  CHECK(near(rt_emu_op_end_s(10.0, 0, 0.5, 0.5), 10.5)); /* never faster than it */
  CHECK(rt_emu_op_end_s(10.0, -1.0, 3.0, -1.0) == 10.0); /* clocks that went back */
  CHECK(near(rt_emu_op_end_s(10.0, 0, NAN, 1.0), 11.0));
}

static void reference(void) {
  double fewest = 0;
  CHECK(rt_emu_reference_cpu_s(&fewest, -1.0) == 0); /* nothing measured yet */
  CHECK(near(rt_emu_reference_cpu_s(&fewest, 0.02), 0.02));
  CHECK(near(rt_emu_reference_cpu_s(&fewest, 0.015), 0.015)); /* the fewest of the runs */
  CHECK(near(rt_emu_reference_cpu_s(&fewest, 0.03), 0.015));
  CHECK(near(rt_emu_reference_cpu_s(&fewest, 0), 0.015));
  CHECK(near(fewest, 0.015));
}

static void late(void) {
  /* an op emulated from 10.0 to 10.1 s: late once its own run passes 10.11 s */
  CHECK(!rt_emu_late(10.0, 10.1, 10.05)); /* it slept the rest */
  CHECK(!rt_emu_late(10.0, 10.1, 10.105));
  CHECK(rt_emu_late(10.0, 10.1, 10.2));
  CHECK(!rt_emu_late(10.0, 10.0, 10.00005)); /* an empty op: within 0.1 ms */
  CHECK(rt_emu_late(10.0, 10.0, 10.001));
}

static void link_time(void) {
  struct hx_rt_link l = {20e-6, 1e9};
  CHECK(near(rt_emu_link_s(&l, 1e6), 20e-6 + 1e-3));
  CHECK(near(rt_emu_link_s(&l, 0), 20e-6));
  struct hx_rt_link none = {0, 0}; /* no peer: nothing to wait for */
  CHECK(rt_emu_link_s(&none, 1e9) == 0);
  struct hx_rt_link latency_only = {5e-6, 0};
  CHECK(near(rt_emu_link_s(&latency_only, 1e9), 5e-6));
}

static void ring_time(void) {
  struct hx_rt_link l = {10e-6, 1e9};
  CHECK(rt_emu_ring_s(&l, 1, 4e6) == 0); /* alone: no all-reduce */
  /* 2 (n - 1) steps of bytes / n each */
  CHECK(near(rt_emu_ring_s(&l, 4, 4e6), 6 * (10e-6 + 1e-3)));
  CHECK(near(rt_emu_ring_s(&l, 2, 2e6), 2 * (10e-6 + 1e-3)));
}

/* ZeRO-1's reduce-scatter and all-gather: n - 1 steps of the largest share
 * (passes/cost/cost.c's hx_reduce_scatter_s), half the ring of an even split. */
static void shard_time(void) {
  struct hx_rt_link l = {10e-6, 1e9};
  CHECK(rt_emu_shard_s(&l, 1, 4e6) == 0);
  CHECK(near(rt_emu_shard_s(&l, 4, 2e6), 3 * (10e-6 + 2e-3)));
  CHECK(near(rt_emu_shard_s(&l, 4, 1e6), rt_emu_ring_s(&l, 4, 4e6) / 2));
}

int main(void) {
  op_end();
  reference();
  late();
  link_time();
  ring_time();
  shard_time();
  return rt_test_finish("test_rt_emulate");
}
