/* A clock for hexic_slow_clock (tests/sched/clock.sh): every reading is
 * 1000 s after the previous one, as on a machine a thousand times slower
 * than any deadline. Linked before hexic_core, it replaces
 * passes/schedule/sched_clock.c's hx_search_now_s. */
#include "passes/schedule/sched.h"

double hx_search_now_s(void) {
  static double now = 1e6;
  now += 1000;
  return now;
}
