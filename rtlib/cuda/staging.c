/* The pure part of moving device buffers over MPI through host memory
 * (transport_mpi_staged.c) and of packing gradient ranges (device_cuda.c):
 * piece sizes, bf16 on the host, and runs grouped into 2-D copies. */
#include <limits.h>
#include <string.h>

#include "rtlib/cuda/cuda_backend.h"

int64_t rt_stage_piece_elems(int64_t stage_bytes, int64_t bytes_per_elem) {
  if (bytes_per_elem < 1)
    bytes_per_elem = 1;
  int64_t elems = stage_bytes / bytes_per_elem;
  if (elems < 1)
    return 1;
  return elems > INT_MAX ? INT_MAX : elems;
}

void rt_f32_from_bf16(float *dst, const uint16_t *src, int64_t n) {
  for (int64_t i = 0; i < n; i++) {
    uint32_t bits = (uint32_t)src[i] << 16;
    memcpy(&dst[i], &bits, sizeof bits);
  }
}

/* Round to nearest, ties to even: add 0x7fff plus the lowest kept bit, then
 * drop the low half; a carry into the exponent is the right rounding up
 * (to infinity past the largest bf16). A NaN stays a (quiet) NaN: rounding
 * could carry its payload into infinity. */
static uint16_t bf16_of(float f) {
  uint32_t bits;
  memcpy(&bits, &f, sizeof bits);
  if ((bits & 0x7fffffffu) > 0x7f800000u)
    return (uint16_t)((bits >> 16) | 0x0040u);
  return (uint16_t)((bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16);
}

void rt_bf16_from_f32(uint16_t *dst, const float *src, int64_t n) {
  for (int64_t i = 0; i < n; i++)
    dst[i] = bf16_of(src[i]);
}

int rt_runs_block(const struct rt_run *runs, int nruns, int k, long packed, struct rt_block *b) {
  *b = (struct rt_block){runs[k].off, runs[k].n, runs[k].n, 1, packed};
  if (k + 1 >= nruns || runs[k + 1].n != b->width)
    return k + 1;
  long stride = runs[k + 1].off - runs[k].off;
  if (stride < b->width) /* overlapping or backwards: not a 2-D copy */
    return k + 1;
  b->stride = stride;
  int j = k + 1;
  while (j < nruns && runs[j].n == b->width && runs[j].off - runs[j - 1].off == stride)
    j++;
  b->rows = j - k;
  return j;
}
