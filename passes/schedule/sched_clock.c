/* The one clock the plan searches may read (CLOCK_MONOTONIC seconds), in a
 * file of its own: tests/sched/slow_clock.c links hexic against a clock that
 * runs 1000 s per reading instead, to show that the plans do not depend on
 * it (only an explicit --search-budget reads it for the search; the
 * progress lines on stderr read it too). */
#include <time.h>

#include "sched.h"

double hx_search_now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}
