/* The rtlib tests' checks: tests/check.h's CHECK (a failure is recorded
 * with its location and the test carries on, so one run reports every broken
 * case), a substring check and the closing summary. */
#ifndef HX_RT_TEST_H
#define HX_RT_TEST_H

#include <stdio.h>
#include <string.h>

#include "tests/check.h"

/* A substring check that shows the text it searched on failure. */
#define CHECK_CONTAINS(text, needle)                                                               \
  do {                                                                                             \
    if (!strstr((text), (needle))) {                                                               \
      fprintf(stderr, "%s:%d: '%s' not found in '%s'\n", __FILE__, __LINE__, (needle), (text));    \
      failures++;                                                                                  \
    }                                                                                              \
  } while (0)

static int rt_test_finish(const char *name) {
  if (failures) {
    fprintf(stderr, "%s: %d check(s) failed\n", name, failures);
    return 1;
  }
  printf("%s: all checks passed\n", name);
  return 0;
}

#endif
