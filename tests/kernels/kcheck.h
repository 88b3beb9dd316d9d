/* Small helpers shared by the kernel tests: a failure counter, a fixed
 * pseudo-random fill (so every run sees the same data) and array compares. */
#ifndef HX_TESTS_KCHECK_H
#define HX_TESTS_KCHECK_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int kc_failures;

#define KC_CHECK(cond, ...)                                                    \
  do {                                                                         \
    if (!(cond)) {                                                             \
      kc_failures++;                                                           \
      fprintf(stderr, "%s:%d: check failed: %s: ", __FILE__, __LINE__, #cond); \
      fprintf(stderr, __VA_ARGS__);                                            \
      fputc('\n', stderr);                                                     \
    }                                                                          \
  } while (0)

static inline int kc_finish(const char *name) {
  if (kc_failures) {
    fprintf(stderr, "%s: %d failure(s)\n", name, kc_failures);
    return 1;
  }
  printf("%s: ok\n", name);
  return 0;
}

static inline void *kc_alloc(long nfloats) {
  void *p = calloc((size_t)(nfloats > 0 ? nfloats : 1), sizeof(float));
  if (!p) {
    perror("calloc");
    exit(2);
  }
  return p;
}

/* Uniform in [-scale, scale) from a 64-bit LCG: deterministic test data. */
static uint64_t kc_state = 0x243F6A8885A308D3ull;
static inline float kc_uniform(float scale) {
  kc_state = kc_state * 6364136223846793005ull + 1442695040888963407ull;
  double u = (double)(kc_state >> 11) * 0x1p-53;
  return (float)((2.0 * u - 1.0) * scale);
}
static inline void kc_fill(float *buf, long n, float scale) {
  for (long i = 0; i < n; i++)
    buf[i] = kc_uniform(scale);
}

/* max_i |a_i - b_i| / max(1, |b_i|): an error relative to the reference's
 * magnitude, absolute below 1. */
static inline double kc_max_err(const float *a, const float *b, long n) {
  double worst = 0.0;
  for (long i = 0; i < n; i++) {
    double ref = fabs((double)b[i]);
    double err = fabs((double)a[i] - b[i]) / (ref > 1.0 ? ref : 1.0);
    worst = err > worst ? err : worst;
  }
  return worst;
}

#endif
