/* Compares two --dump-weights files (raw little-endian float32, the full
 * model in the spec's order) element by element:
 *
 *   weights_cmp A B [TOL]
 *
 * Prints the element count, the largest absolute difference and where it is,
 * and exits 0 when every |a - b| <= TOL * max(1, |a|) (TOL default 1e-5),
 * 1 when some element is further apart, 2 when the files cannot be compared
 * (unreadable, different sizes, empty, or a NaN). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

static float *read_floats(const char *path, long *n) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    fprintf(stderr, "weights_cmp: cannot read %s\n", path);
    return NULL;
  }
  long cap = 1 << 16, len = 0;
  float *v = malloc((size_t)cap * sizeof *v);
  size_t got;
  while (v && (got = fread(v + len, sizeof *v, (size_t)(cap - len), f)) > 0) {
    len += (long)got;
    if (len == cap) {
      cap *= 2;
      float *bigger = realloc(v, (size_t)cap * sizeof *v);
      if (!bigger)
        free(v);
      v = bigger;
    }
  }
  fclose(f);
  if (!v)
    fprintf(stderr, "weights_cmp: out of memory reading %s\n", path);
  *n = len;
  return v;
}

int main(int argc, char **argv) {
  if (argc < 3 || argc > 4) {
    fprintf(stderr, "usage: weights_cmp A B [TOL]\n");
    return 2;
  }
  double tol = argc == 4 ? strtod(argv[3], NULL) : 1e-5;
  long na, nb;
  float *a = read_floats(argv[1], &na), *b = read_floats(argv[2], &nb);
  if (!a || !b)
    return 2;
  if (na != nb || na == 0) {
    fprintf(stderr, "weights_cmp: %s has %ld floats, %s has %ld\n", argv[1], na, argv[2], nb);
    return 2;
  }
  long worst = 0, bad = 0;
  double worst_diff = 0;
  for (long i = 0; i < na; i++) {
    if (isnan(a[i]) || isnan(b[i])) {
      fprintf(stderr, "weights_cmp: NaN at element %ld\n", i);
      return 2;
    }
    double diff = fabs((double)a[i] - (double)b[i]);
    if (diff > worst_diff)
      worst_diff = diff, worst = i;
    bad += diff > tol * fmax(1.0, fabs((double)a[i]));
  }
  printf("weights_cmp: %ld floats, max |a-b| %.3g at element %ld (%.9g vs %.9g), %ld beyond %g\n",
         na, worst_diff, worst, (double)a[worst], (double)b[worst], bad, tol);
  free(a);
  free(b);
  return bad ? 1 : 0;
}
