/* MPI's int counts and bounded tags (issue 10, item 9): the chunking and the
 * tag of a pipeline message are pure functions, checked here on sizes no
 * test could allocate (a long-context activation of 2^30 floats and more)
 * and on micro-batch counts whose 4*m + kind would pass any tag bound. The
 * mpirun side (chunks and wrapped tags on the wire) runs in tests/exec. */
#include <limits.h>
#include <stdint.h>

#include "rt_test.h"
#include "rtlib/rt_init.h"

/* The chunks of n under max tile [0, n) in order, each 1..max elements. */
static void check_tiling(int64_t n, int64_t max) {
  int64_t nk = hx_rt_chunk_count(n, max), next = 0;
  int bad = 0;
  for (int64_t k = 0; k < nk; k++) {
    int64_t off;
    int count;
    hx_rt_chunk_at(n, max, k, &off, &count);
    bad += off != next || count < 1 || count > max;
    next = off + count;
  }
  CHECK(bad == 0);
  CHECK(next == n);
  CHECK(nk == (n + max - 1) / max);
}

static void test_chunks(void) {
  CHECK(hx_rt_chunk_count(0, INT_MAX) == 0);
  CHECK(hx_rt_chunk_count(1, INT_MAX) == 1);
  CHECK(hx_rt_chunk_count(INT_MAX, INT_MAX) == 1);
  CHECK(hx_rt_chunk_count((int64_t)INT_MAX + 1, INT_MAX) == 2);
  /* 128K tokens x 8192 hidden x 4 sequences: 2^32 floats, past int. */
  int64_t big = INT64_C(131072) * 8192 * 4;
  CHECK(hx_rt_chunk_count(big, INT_MAX) == 3);
  int64_t off;
  int count;
  hx_rt_chunk_at(big, INT_MAX, 2, &off, &count);
  CHECK(off == 2 * (int64_t)INT_MAX && count == (int)(big - 2 * (int64_t)INT_MAX));
  check_tiling(big, INT_MAX);
  check_tiling(INT64_C(1) << 40, INT64_C(1) << 30);
  check_tiling(4096, 1000);
  check_tiling(7, 1);
}

/* Every tag within [1, ub], its kind in the low two bits; consecutive
 * micro-batches apart while the bound leaves room; m and m + span alike. */
static void check_tags(int ub) {
  int64_t span = ((int64_t)ub + 1) / 4;
  const int64_t ms[] = {0, 1, 2, 3, span - 1, span, span + 1, 8191, 1000000000, INT64_C(1) << 40};
  int bad = 0;
  for (size_t i = 0; i < sizeof ms / sizeof ms[0]; i++)
    for (int kind = 1; kind <= 3; kind++) {
      int64_t m = ms[i];
      int tag = hx_rt_message_tag(m, kind, ub);
      bad += tag < 1 || tag > ub || tag % 4 != kind;
      bad += hx_rt_message_tag(m + span, kind, ub) != tag;
      if (span >= 2)
        bad += hx_rt_message_tag(m + 1, kind, ub) == tag;
    }
  CHECK(bad == 0);
}

static void test_tags(void) {
  check_tags(3); /* kind-only tags */
  check_tags(7);
  check_tags(32767); /* the smallest MPI_TAG_UB the standard allows */
  check_tags(INT_MAX);
  CHECK(hx_rt_message_tag(5, 2, INT_MAX) == 22);
}

int main(void) {
  test_chunks();
  test_tags();
  return rt_test_finish("test_rt_limits");
}
