/* --emulate's rules (the --emulate section of rtlib/rt_exec_ops.c), pure and untimed: the sleep
 * after a compute op, the least time of a message over a link and of a ring
 * all-reduce over a group's slowest link. The end-to-end run (same losses
 * with and without --emulate, the slow rank's constants) is
 * tests/exec/run_emulate.sh; step times are bench/measured.sh's. */
#include <math.h>

#include "rt_test.h"
#include "rtlib/rt_exec_internal.h"

static int near(double a, double b) { return fabs(a - b) <= 1e-12 * (fabs(b) + 1); }

static void compute_sleep(void) {
  CHECK(near(rt_emu_compute_sleep_s(3.0, 0.01), 0.02)); /* 3x slower: twice the op again */
  CHECK(near(rt_emu_compute_sleep_s(1.5, 0.2), 0.1));
  CHECK(rt_emu_compute_sleep_s(1.0, 0.5) == 0);  /* the fastest device: no sleep */
  CHECK(rt_emu_compute_sleep_s(0.5, 0.5) == 0);  /* never faster than the machine */
  CHECK(rt_emu_compute_sleep_s(3.0, -1.0) == 0); /* a clock that went back */
  CHECK(rt_emu_compute_sleep_s(NAN, 1.0) == 0);
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

int main(void) {
  compute_sleep();
  link_time();
  ring_time();
  return rt_test_finish("test_rt_emulate");
}
