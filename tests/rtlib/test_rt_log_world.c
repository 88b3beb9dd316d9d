/* The step line's exact format and the world check's decisions (the MPI side
 * of the world check runs in the mpirun tests). */
#include <stdio.h>
#include <string.h>

#include "rt_test.h"
#include "rtlib/rt_init.h"

static void test_step_line(void) {
  char line[256];
  struct hx_rt_step_stats s = {0, 200, 5.545177444479562, 3e-4, 123.456, 16597.4};
  hx_rt_log_format_step(line, sizeof line, &s);
  CHECK(!strcmp(line, "step 1/200 | loss 5.545177 | lr 3.0000e-04 | 123.5 ms | 16597 tok/s"));
  s = (struct hx_rt_step_stats){199, 200, 0.25, 3e-5, 7.04, 1234567.8};
  hx_rt_log_format_step(line, sizeof line, &s);
  CHECK(!strcmp(line, "step 200/200 | loss 0.250000 | lr 3.0000e-05 | 7.0 ms | 1234568 tok/s"));
}

static void test_world_matches(void) {
  char msg[512] = "";
  const int in_order[3] = {0, 1, 2}, swapped[3] = {0, 2, 1};
  const char *same[3] = {"fp1", "fp1", "fp1"}, *mixed[3] = {"fp1", "fp1", "fp2"};
  CHECK(hx_rt_world_matches(3, 3, in_order, same, msg, sizeof msg));
  CHECK(!hx_rt_world_matches(3, 4, in_order, same, msg, sizeof msg));
  CHECK_CONTAINS(msg, "the plan has 4 ranks but 3 processes were launched");
  CHECK(!hx_rt_world_matches(3, 3, swapped, same, msg, sizeof msg));
  CHECK_CONTAINS(msg, "world rank 1 runs the program of plan rank 2 (rank_0002)");
  CHECK(!hx_rt_world_matches(3, 3, in_order, mixed, msg, sizeof msg));
  CHECK_CONTAINS(msg, "world rank 2 runs a program of another plan (fingerprint 'fp2', rank 0 "
                      "has 'fp1')");
  /* Order is checked before fingerprints, and the lowest rank is named. */
  CHECK(!hx_rt_world_matches(3, 3, swapped, mixed, msg, sizeof msg));
  CHECK_CONTAINS(msg, "world rank 1 runs the program of plan rank 2");
}

int main(void) {
  test_step_line();
  test_world_matches();
  return rt_test_finish("test_rt_log_world");
}
