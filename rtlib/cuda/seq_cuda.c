/* rtlib/seq's kernel table on the GPU (struct rt_seq_kernels): the HexiSeq
 * hook's exchanges are planned and run by rtlib/seq/rt_seq_attn.c, one code
 * path for every backend; this file supplies what it does to the buffers,
 * on device memory and the device's stream (handed in by device_cuda.c, so
 * this file never calls back into it): the block
 * kernels of kernels/cuda/attention_block.cu (fp32 in and out: the hook's
 * buffers are fp32), strided copies and sums (hxc_copy_rows), and the
 * positions uploaded once. The transports order their messages after the
 * work queued on that stream, so nothing here synchronises. */
#include <cuda_runtime_api.h>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/llama_cuda.h"
#include "rtlib/cuda/cuda_backend.h"
#include "rtlib/seq/rt_seq.h"

static cudaStream_t seq_stream; /* the rank's one stream, from rt_cuda_seq_kernels */
static cudaStream_t stream(void) { return seq_stream; }

static struct hxc_kv_map map_of(const struct rt_seq_heads *h) {
  return (struct hxc_kv_map){h->q0, h->per_kv, h->kv0};
}

static long no_scratch(long nq_tok, long nk_tok, int nq, int hd) {
  (void)nq_tok, (void)nk_tok, (void)nq, (void)hd;
  return 0; /* the CUDA block kernels keep their tiles in shared memory */
}

static void block_forward(float *o, float *lse, const float *q, const int *q_pos, long nq_tok,
                          const float *k, const float *v, const int *k_pos, long nk_tok,
                          const struct rt_seq_heads *h, bool first, float *scratch) {
  (void)scratch;
  hxc_attention_block_forward(o, lse, q, q_pos, nq_tok, k, v, k_pos, nk_tok, map_of(h), 1, h->nq,
                              h->nkv, h->hd, first, HXC_FP32, stream());
}

static void block_delta(float *delta, const float *dout, const float *o, long n, int nq, int hd) {
  hxc_attention_block_delta(delta, dout, o, n, nq, hd, HXC_FP32, stream());
}

static void block_backward(float *dq, float *dk, float *dv, const float *dout, const float *q,
                           const int *q_pos, long nq_tok, const float *k, const float *v,
                           const int *k_pos, long nk_tok, const float *lse, const float *delta,
                           const struct rt_seq_heads *h, float *scratch) {
  (void)scratch;
  hxc_attention_block_backward(dq, dk, dv, dout, q, q_pos, nq_tok, k, v, k_pos, nk_tok, lse, delta,
                               map_of(h), 1, h->nq, h->nkv, h->hd, HXC_FP32, stream());
}

static void copy_rows(float *dst, long dst_pitch, const float *src, long src_pitch, long width,
                      long rows, bool add) {
  hxc_copy_rows(dst, dst_pitch, src, src_pitch, width, rows, add, stream());
}

static void zero(float *p, long n) {
  if (n > 0)
    HXC_CHECK(cudaMemsetAsync(p, 0, sizeof(float) * (size_t)n, stream()));
}

/* The positions on the device, once per rt_seq (at the device's setup),
 * counted as workspace (rt_backend.h's kinds; the plan prices them). */
static int *ints(const int *host, long n) {
  void *p = NULL;
  size_t bytes = sizeof(int) * (size_t)(n > 0 ? n : 1);
  HXC_CHECK(cudaMalloc(&p, bytes));
  rt_mem_count(p, bytes, RT_MEM_WORKSPACE);
  if (n > 0)
    HXC_CHECK(cudaMemcpy(p, host, sizeof(int) * (size_t)n, cudaMemcpyHostToDevice));
  return p;
}

static void free_ints(int *p) {
  rt_mem_uncount(p);
  HXC_CHECK(cudaFree(p));
}

const struct rt_seq_kernels *rt_cuda_seq_kernels(struct CUstream_st *stream_of_rank) {
  seq_stream = stream_of_rank;
  /* 64 floats: every slice of the hook's scratch starts 256-byte aligned,
   * as the layer's own buffers do. */
  static const struct rt_seq_kernels cuda = {
      "cuda",         64,        no_scratch, block_forward, block_delta,
      block_backward, copy_rows, zero,       ints,          free_ints};
  return &cuda;
}
