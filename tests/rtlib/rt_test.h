/* A minimal check harness shared by the rtlib tests: CHECK records a failure
 * with its location and carries on, so one run reports every broken case. */
#ifndef HX_RT_TEST_H
#define HX_RT_TEST_H

#include <stdio.h>
#include <string.h>

static int rt_test_failures;

#define CHECK(cond)                                                                                \
  do {                                                                                             \
    if (!(cond)) {                                                                                 \
      fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);                     \
      rt_test_failures++;                                                                          \
    }                                                                                              \
  } while (0)

/* A substring check that shows the text it searched on failure. */
#define CHECK_CONTAINS(text, needle)                                                               \
  do {                                                                                             \
    if (!strstr((text), (needle))) {                                                               \
      fprintf(stderr, "%s:%d: '%s' not found in '%s'\n", __FILE__, __LINE__, (needle), (text));    \
      rt_test_failures++;                                                                          \
    }                                                                                              \
  } while (0)

static int rt_test_finish(const char *name) {
  if (rt_test_failures) {
    fprintf(stderr, "%s: %d check(s) failed\n", name, rt_test_failures);
    return 1;
  }
  printf("%s: all checks passed\n", name);
  return 0;
}

#endif
