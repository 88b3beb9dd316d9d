/* The check macros of the C unit tests: a failed check prints where and what,
 * counts, and the test goes on so one run shows every failure; main returns
 * `failures != 0`. Include once per test program. */
#ifndef HX_TESTS_CHECK_H
#define HX_TESTS_CHECK_H

#include <math.h>
#include <stdio.h>

static int failures;

#define CHECK(cond)                                                                                \
  do {                                                                                             \
    if (!(cond)) {                                                                                 \
      fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);                     \
      failures++;                                                                                  \
    }                                                                                              \
  } while (0)

static inline void check_near(const char *file, int line, const char *what, double got, double want,
                              double rel) {
  if (!(fabs(got - want) <= rel * fabs(want) + 1e-15)) {
    fprintf(stderr, "%s:%d: %s = %.17g, want %.17g\n", file, line, what, got, want);
    failures++;
  }
}

/* got within 1e-12 relative of want: for closed forms computed two ways. */
#define NEAR(got, want) check_near(__FILE__, __LINE__, #got, (got), (want), 1e-12)

#endif
