/* The CUDA transports' sequence-parallel collectives (rt_backend.h's
 * tp_reduce_scatter and tp_allgather) on the host CUDA emulator, over MPI:
 * rtlib/cuda/transport_nccl.c on the test-only NCCL of nccl_shim.c (which
 * reports a call order NCCL would deadlock on) and
 * rtlib/cuda/transport_mpi_staged.c, in one TP group of every rank (3 by
 * emulate_nccl.sh sp), with uneven blocks, an empty block and even ones, in
 * fp32 and bf16. Every value and every sum is a multiple of 1/8 below 64,
 * exact in bf16 and in any order of fp32 sums, so the results must equal
 * the host's exactly: recv holds this member's block summed over the group
 * and nothing past it, and a gathered buffer every member's block.
 *
 *   mpirun -np 3 test_sp_collectives   (exit 0: all agree; 1: a mismatch)
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "rtlib/cuda/cuda_backend.h"
#include "rtlib/rt_init.h"

/* Guard elements after recv: the reduce-scatter must leave them alone. */
enum { GUARD = 4 };
static const float GUARD_VALUE = -7.0f;

/* Member r's element i: a multiple of 1/8 in [0.125, 8). */
static float value_of(int r, long i) { return (float)((r * 13 + i * 5) % 63 + 1) / 8.0f; }

static size_t elem_bytes(enum rt_dtype dt) { return dt == RT_BF16 ? 2 : 4; }

/* n host floats into dt elements on the device, and back. */
static void *to_device(const float *host, long n, enum rt_dtype dt) {
  void *dev = NULL;
  size_t bytes = (size_t)(n > 0 ? n : 1) * elem_bytes(dt);
  if (cudaMalloc(&dev, bytes) != cudaSuccess)
    hx_rt_fatal(HX_RT_EXIT_ERROR, "cudaMalloc of %zu bytes", bytes);
  if (dt == RT_BF16) {
    uint16_t *narrow = hx_rt_calloc((size_t)(n > 0 ? n : 1), sizeof *narrow);
    rt_bf16_from_f32(narrow, host, n);
    cudaMemcpy(dev, narrow, (size_t)n * 2, cudaMemcpyHostToDevice);
    free(narrow);
  } else {
    cudaMemcpy(dev, host, (size_t)n * 4, cudaMemcpyHostToDevice);
  }
  return dev;
}

static float *to_host(const void *dev, long n, enum rt_dtype dt) {
  float *host = hx_rt_calloc((size_t)(n > 0 ? n : 1), sizeof *host);
  if (dt == RT_BF16) {
    uint16_t *narrow = hx_rt_calloc((size_t)(n > 0 ? n : 1), sizeof *narrow);
    cudaMemcpy(narrow, dev, (size_t)n * 2, cudaMemcpyDeviceToHost);
    rt_f32_from_bf16(host, narrow, n);
    free(narrow);
  } else {
    cudaMemcpy(host, dev, (size_t)n * 4, cudaMemcpyDeviceToHost);
  }
  return host;
}

/* Counts as the executor makes them: rows (hxk_sp_rows' rule: the first
 * n % p members one row more) times width; or given outright. */
static void block_counts(long *counts, int p, long rows, long width) {
  for (int r = 0; r < p; r++)
    counts[r] = (rows / p + (r < rows % p ? 1 : 0)) * width;
}

static int check(const char *what, const char *transport, enum rt_dtype dt, const float *got,
                 const float *want, long n) {
  for (long i = 0; i < n; i++)
    if (got[i] != want[i]) {
      printf("FAIL rank %d: %s over %s in %s: element %ld is %g, not %g\n", hx_rt_rank(), what,
             transport, dt == RT_BF16 ? "bf16" : "fp32", i, got[i], want[i]);
      return 1;
    }
  return 0;
}

/* This member's block of every member's send, summed; nothing past it. */
static int check_reduce_scatter(const struct rt_transport *t, const long *counts, int p, int me,
                                enum rt_dtype dt) {
  long total = 0, at = 0;
  for (int r = 0; r < p; r++) {
    at += r < me ? counts[r] : 0;
    total += counts[r];
  }
  long own = counts[me];
  float *send = hx_rt_calloc((size_t)total + 1, sizeof *send);
  float *want = hx_rt_calloc((size_t)own + GUARD, sizeof *want);
  for (long i = 0; i < total; i++)
    send[i] = value_of(me, i);
  for (long j = 0; j < own + GUARD; j++) {
    want[j] = j < own ? 0.0f : GUARD_VALUE;
    for (int r = 0; j < own && r < p; r++)
      want[j] += value_of(r, at + j);
  }
  float *guard = hx_rt_calloc((size_t)own + GUARD, sizeof *guard);
  for (long j = own; j < own + GUARD; j++)
    guard[j] = GUARD_VALUE;
  void *dsend = to_device(send, total, dt), *drecv = to_device(guard, own + GUARD, dt);
  t->tp_reduce_scatter(dsend, drecv, counts, dt, "test reduce-scatter");
  float *got = to_host(drecv, own + GUARD, dt);
  int bad = check("reduce-scatter", t->name, dt, got, want, own + GUARD);
  cudaFree(dsend), cudaFree(drecv);
  free(send), free(want), free(guard), free(got);
  return bad;
}

/* In place: this member's block set, the others' garbage before the call. */
static int check_allgather(const struct rt_transport *t, const long *counts, int p, int me,
                           enum rt_dtype dt) {
  long total = 0;
  for (int r = 0; r < p; r++)
    total += counts[r];
  float *buf = hx_rt_calloc((size_t)total + 1, sizeof *buf);
  float *want = hx_rt_calloc((size_t)total + 1, sizeof *want);
  for (long i = 0, at = 0; at < total; at += counts[i], i++)
    for (long j = at; j < at + counts[i]; j++) {
      want[j] = value_of((int)i, j);
      buf[j] = (int)i == me ? want[j] : GUARD_VALUE;
    }
  void *dbuf = to_device(buf, total, dt);
  t->tp_allgather(dbuf, counts, dt, "test all-gather");
  float *got = to_host(dbuf, total, dt);
  int bad = check("all-gather", t->name, dt, got, want, total);
  cudaFree(dbuf);
  free(buf), free(want), free(got);
  return bad;
}

int main(int argc, char **argv) {
  hx_rt_init(&argc, &argv);
  int me = hx_rt_rank(), p = hx_rt_world_size();
  int *group = hx_rt_calloc((size_t)p, sizeof *group);
  for (int r = 0; r < p; r++)
    group[r] = r;
  struct hx_rt_rank_config cfg = {.rank = me,
                                  .world_size = p,
                                  .npipelines = 1,
                                  .nstages = 1,
                                  .tp_rank = me,
                                  .tp = p,
                                  .tp_group = group,
                                  .prev_leader = -1,
                                  .next_leader = -1,
                                  .stage_leader = 0};
  const struct rt_transport *transports[2] = {rt_cuda_nccl_open(&cfg, NULL),
                                              rt_cuda_staged_open(&cfg, NULL)};
  long *counts = hx_rt_calloc((size_t)p, sizeof *counts);
  int bad = 0, cases = 0;
  for (int k = 0; k < 2; k++)
    for (int d = 0; d < 2; d++) {
      enum rt_dtype dt = d ? RT_BF16 : RT_FP32;
      /* rows over p: 7 rows of width 3 (uneven), p rows (one each), 2 rows
       * (empty blocks past the second member), 4p rows (even) */
      long shapes[4][2] = {{7, 3}, {p, 5}, {2, 4}, {4L * p, 2}};
      for (int s = 0; s < 4; s++) {
        block_counts(counts, p, shapes[s][0], shapes[s][1]);
        bad += check_reduce_scatter(transports[k], counts, p, me, dt);
        bad += check_allgather(transports[k], counts, p, me, dt);
        cases += 2;
      }
    }
  if (me == 0)
    printf("test_sp_collectives: %d ranks, %d cases per rank over nccl (shim) and mpi-staged: %s\n",
           p, cases, bad ? "FAIL" : "all exact");
  int any = 0;
  MPI_Allreduce(&bad, &any, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  free(group), free(counts);
  fflush(stdout);
  hx_rt_finalize();
  return any ? 1 : 0;
}
