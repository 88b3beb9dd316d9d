/* The rtlib tests' checks: tests/check.h's CHECK (a failure is recorded
 * with its location and the test carries on, so one run reports every broken
 * case), a substring check and the closing summary. */
#ifndef HX_RT_TEST_H
#define HX_RT_TEST_H

#include <stdio.h>
#include <stdlib.h>
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

/* Removes a test's scratch directory (made by mkdtemp under /tmp). */
static inline void rt_test_remove_dir(const char *dir) {
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  if (system(cmd) != 0)
    fprintf(stderr, "could not remove %s\n", dir);
}

static inline int rt_test_finish(const char *name) {
  if (failures) {
    fprintf(stderr, "%s: %d check(s) failed\n", name, failures);
    return 1;
  }
  printf("%s: all checks passed\n", name);
  return 0;
}

#endif
