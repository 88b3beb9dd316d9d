/* In-process mutation test of the front end: every example model paired with
 * a cluster (and every example cluster with the tiny model) must check clean;
 * then deterministic random mutations of those inputs — byte flips,
 * deletions, truncations, duplications, NUL bytes, huge lines — run through
 * hx_check_buffer. None may crash or trip a sanitizer, and every mutant that
 * reports errors must report at least one located `file:line:col: error:`. */
#include <regex.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ir/diag.h"
#include "passes/frontend.h"

static const char *const models[] = {"llama2-7b", "llama2-13b", "llama-30b", "llama2-70b", "long-context-13b", "tiny"};
static const char *const clusters[] = {"case-study", "hetero-32", "hetero-64", "hetero-128", "large-256",
                                       "large-1024", "four-4090", "cpu8", "cpu1"};
enum { MUTANTS_PER_INPUT = 40 };

struct buf {
  char *data;
  size_t len;
};

static void *xmalloc(size_t n) {
  void *p = malloc(n);
  if (!p) {
    fprintf(stderr, "FAIL: out of memory allocating %zu bytes\n", n);
    exit(1);
  }
  return p;
}

enum { EXAMPLE_MAX = 1 << 20 };

static struct buf read_example(const char *dir, const char *name) {
  char path[512];
  snprintf(path, sizeof path, "%s/examples/%s/%s.hx", HEXIC_SOURCE_DIR, dir, name);
  FILE *f = fopen(path, "rb");
  if (!f) {
    perror(path);
    exit(1);
  }
  struct buf b = {xmalloc(EXAMPLE_MAX + 1), 0};
  b.len = fread(b.data, 1, EXAMPLE_MAX + 1, f);
  fclose(f);
  if (b.len > EXAMPLE_MAX) { /* a truncated example would still "pass" */
    fprintf(stderr, "FAIL: %s is larger than %d bytes\n", path, EXAMPLE_MAX);
    exit(1);
  }
  return b;
}

static struct buf concat(struct buf a, struct buf b) {
  struct buf c = {xmalloc(a.len + b.len + 1), a.len + b.len};
  memcpy(c.data, a.data, a.len);
  memcpy(c.data + a.len, b.data, b.len);
  return c;
}

static uint64_t rng_state = 0x9E3779B97F4A7C15u;
static uint64_t next_random(void) { /* xorshift64: deterministic across runs */
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return rng_state;
}
static size_t pick(size_t n) { return n ? (size_t)(next_random() % n) : 0; }

/* Returns a malloc'd mutant of in. */
static struct buf mutate(struct buf in, int kind) {
  size_t extra = kind == 5 ? (size_t)(1 << 20) + 16 : in.len + 16;
  struct buf out = {xmalloc(in.len + extra), in.len};
  memcpy(out.data, in.data, in.len);
  size_t at = pick(in.len);
  switch (kind) {
  case 0: /* flip a few bytes */
    for (int i = 0; i < 1 + (int)pick(4); i++)
      out.data[pick(in.len)] ^= (char)(1 << pick(8));
    break;
  case 1: { /* delete a span */
    size_t n = 1 + pick(16);
    if (at + n > in.len)
      n = in.len - at;
    memmove(out.data + at, out.data + at + n, in.len - at - n);
    out.len -= n;
    break;
  }
  case 2: /* truncate */
    out.len = at;
    break;
  case 3: { /* duplicate a span */
    size_t n = 1 + pick(64);
    if (at + n > in.len)
      n = in.len - at;
    memmove(out.data + at + n, out.data + at, in.len - at);
    out.len += n;
    break;
  }
  case 4: /* insert NUL bytes */
    memmove(out.data + at + 3, out.data + at, in.len - at);
    memset(out.data + at, 0, 3);
    out.len += 3;
    break;
  case 5: /* a 1 MB line of one character from the file */
    memmove(out.data + at + (1 << 20), out.data + at, in.len - at);
    memset(out.data + at, in.data[pick(in.len)], 1 << 20);
    out.len += 1 << 20;
    break;
  default: /* replace a byte with a random one */
    out.data[at] = (char)pick(256);
    break;
  }
  return out;
}

static regex_t located_error;

/* Runs one input; returns 0 when it behaved. */
static int check_one(const char *name, struct buf b, FILE *diag, bool must_pass) {
  rewind(diag);
  if (ftruncate(fileno(diag), 0) != 0)
    return 1;
  int errors = hx_check_buffer(name, b.data, b.len);
  fflush(diag);
  if (must_pass && errors) {
    fprintf(stderr, "FAIL: %s: %d errors in an unmutated input\n", name, errors);
    return 1;
  }
  if (!errors)
    return 0;
  rewind(diag);
  char line[4096];
  while (fgets(line, sizeof line, diag))
    if (!regexec(&located_error, line, 0, NULL, 0))
      return 0;
  fprintf(stderr, "FAIL: %s: %d errors but no 'file:line:col: error:' line\n", name, errors);
  return 1;
}

/* first and second concatenated, then its mutants. */
static int run_input(const char *name, struct buf first, struct buf second, FILE *diag, int *mutants,
                     int *rejected) {
  struct buf input = concat(first, second);
  int failed = check_one(name, input, diag, true);
  for (int m = 0; m < MUTANTS_PER_INPUT; m++) {
    int kind = m < 7 ? m : (int)pick(7);
    if (kind == 5 && m >= 7)
      kind = 0; /* one huge line per input keeps the test fast */
    struct buf mut = mutate(input, kind);
    char mname[256];
    snprintf(mname, sizeof mname, "%s~%d", name, m);
    int before = failed;
    failed += check_one(mname, mut, diag, false);
    (*mutants)++;
    *rejected += hx_error_count() > 0;
    if (failed > before)
      fprintf(stderr, "  (mutation kind %d)\n", kind);
    free(mut.data);
  }
  free(input.data);
  return failed;
}

int main(void) {
  if (regcomp(&located_error, "^[^ ]+:[0-9]+:[0-9]+: error: ", REG_EXTENDED | REG_NOSUB))
    return 1;
  FILE *diag = tmpfile();
  if (!diag)
    return 1;
  hx_diag_set_stream(diag);
  int failed = 0, mutants = 0, rejected = 0;
  struct buf tiny = read_example("models", "tiny"), cpu8 = read_example("clusters", "cpu8");
  for (size_t i = 0; i < sizeof models / sizeof models[0]; i++) {
    struct buf m = read_example("models", models[i]);
    failed += run_input(models[i], m, cpu8, diag, &mutants, &rejected);
    free(m.data);
  }
  for (size_t i = 0; i < sizeof clusters / sizeof clusters[0]; i++) {
    struct buf c = read_example("clusters", clusters[i]);
    failed += run_input(clusters[i], tiny, c, diag, &mutants, &rejected);
    free(c.data);
  }
  free(tiny.data);
  free(cpu8.data);
  hx_diag_set_stream(NULL);
  fclose(diag);
  regfree(&located_error);
  if (rejected == 0) { /* the mutations must reach the checks at all */
    fprintf(stderr, "FAIL: no mutant was rejected\n");
    failed++;
  }
  printf("%d mutants, %d rejected with located errors, %d failures\n", mutants, rejected, failed);
  return failed ? 1 : 0;
}
