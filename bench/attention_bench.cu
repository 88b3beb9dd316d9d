/* Causal GQA attention of kernels/cuda/: forward and backward TFLOP/s at a
 * few long-context shapes, for the tensor-core kernel (bf16) and the tiled
 * fp32-arithmetic kernel. Not a test: it prints figures. Exits 77 without a
 * GPU.
 *
 *   cmake --build build --target attention_bench && build/attention_bench
 *
 * FLOPs are the usual attention accounting: forward 4 T^2 hd per head and
 * sequence (Q K^T and P V, 2 T^2 hd each), halved by the causal mask;
 * backward 2.5x the forward (five products of that size). The kernels'
 * own recomputation (the backward recomputes P in both of its passes) is
 * work they do, not FLOPs counted.
 *
 * cuDNN's fused attention is not compared: without cudnn-frontend its graph
 * must be built from backend descriptors (matmuls, scale, causal mask,
 * softmax statistics), which could not be written and checked reliably on a
 * machine without a GPU. The line "cudnn: not measured" says so in the
 * output; comparing against it is open work (issue 12, part 1). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime.h>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/llama_cuda.h"

struct shape {
  int nseq, seq_len, heads, kv_heads, hd;
};

/* Tokens per run fixed at 16384 (one 1.3B micro-batch of 8 x 2048). */
static const struct shape shapes[] = {
    {8, 2048, 16, 16, 128}, /* the 1.3B model's attention */
    {8, 2048, 32, 8, 64},   {4, 4096, 16, 4, 128}, {4, 4096, 32, 8, 64},
    {2, 8192, 16, 4, 128},  {2, 8192, 32, 8, 64},
};

/* Dense bf16 peak of a few GPUs (TFLOP/s), to put the figures in context. */
static double peak_tflops(const char *name) {
  if (strstr(name, "H100") || strstr(name, "H200") || strstr(name, "GH200"))
    return 989.0;
  if (strstr(name, "A100") || strstr(name, "A800"))
    return 312.0;
  if (strstr(name, "4090"))
    return 165.2;
  return 0.0;
}

static double forward_flops(const struct shape *s) {
  return 2.0 * s->nseq * s->heads * (double)s->seq_len * s->seq_len * s->hd;
}

/* Milliseconds per call of fn, after two warm-up calls, over `iters`. */
template <class F> static float time_ms(F fn, int iters) {
  cudaEvent_t start, stop;
  HXC_CHECK(cudaEventCreate(&start));
  HXC_CHECK(cudaEventCreate(&stop));
  fn();
  fn();
  HXC_CHECK(cudaEventRecord(start, 0));
  for (int i = 0; i < iters; i++)
    fn();
  HXC_CHECK(cudaEventRecord(stop, 0));
  HXC_CHECK(cudaEventSynchronize(stop));
  float ms = 0.0f;
  HXC_CHECK(cudaEventElapsedTime(&ms, start, stop));
  HXC_CHECK(cudaEventDestroy(start));
  HXC_CHECK(cudaEventDestroy(stop));
  return ms / iters;
}

static void *filled(size_t bytes) {
  void *p = NULL;
  HXC_CHECK(cudaMalloc(&p, bytes));
  /* 0x3c3c: bf16 0.0115, a harmless value for every element */
  HXC_CHECK(cudaMemset(p, 0x3c, bytes));
  return p;
}

static void bench_shape(struct hxc_ctx *ctx, const struct shape *s,
                        enum hxc_attention_impl impl, double peak) {
  if (!hxc_attention_supported(s->hd, HXC_BF16, impl))
    return;
  hxc_attention_set_impl(impl);
  long n = (long)s->nseq * s->seq_len;
  size_t qb = (size_t)n * s->heads * s->hd * 2, kvb = (size_t)n * s->kv_heads * s->hd * 2;
  void *q = filled(qb), *k = filled(kvb), *v = filled(kvb), *o = filled(qb);
  void *dout = filled(qb), *dq = filled(qb), *dk = filled(kvb), *dv = filled(kvb);
  float *lse = (float *)filled((size_t)n * s->heads * sizeof(float));
  struct hxc_kv_map map = {0, s->heads / s->kv_heads, 0};
  int iters = impl == HXC_ATTN_TILED ? 2 : 10;
  float fwd = time_ms([&] {
    hxc_attention_forward(o, lse, q, k, v, map, s->nseq, s->seq_len, s->heads,
                          s->kv_heads, s->hd, HXC_BF16, 0);
  }, iters);
  float bwd = time_ms([&] {
    hxc_attention_backward(ctx, dq, dk, dv, dout, q, k, v, o, lse, map,
                           s->nseq, s->seq_len, s->heads, s->kv_heads, s->hd,
                           HXC_BF16, 0);
  }, iters);
  double ff = forward_flops(s), tf = ff / (fwd * 1e-3) / 1e12,
         tb = 2.5 * ff / (bwd * 1e-3) / 1e12;
  printf("%-5s  T %5d  nseq %d  heads %2d/%2d  hd %3d   fwd %7.3f ms %6.1f TFLOP/s",
         impl == HXC_ATTN_TILED ? "tiled" : "tc", s->seq_len, s->nseq,
         s->heads, s->kv_heads, s->hd, fwd, tf);
  printf("   bwd %7.3f ms %6.1f TFLOP/s", bwd, tb);
  if (peak > 0)
    printf("   (%.0f%% / %.0f%% of bf16 peak)", 100 * tf / peak, 100 * tb / peak);
  printf("\n");
  fflush(stdout);
  void *bufs[] = {q, k, v, o, dout, dq, dk, dv, lse};
  for (void *b : bufs)
    HXC_CHECK(cudaFree(b));
}

int main(int argc, char **argv) {
  int count = 0;
  cudaError_t st = cudaGetDeviceCount(&count);
  if (st != cudaSuccess || count == 0) {
    printf("attention_bench: no GPU (%s)\n",
           st != cudaSuccess ? cudaGetErrorString(st) : "none found");
    return 77;
  }
  bool with_tiled = argc > 1 && strcmp(argv[1], "--tiled") == 0;
  struct cudaDeviceProp prop;
  HXC_CHECK(cudaGetDeviceProperties(&prop, 0));
  double peak = peak_tflops(prop.name);
  printf("attention_bench: %s (sm_%d%d), causal, bf16 in, fp32 accumulation\n",
         prop.name, prop.major, prop.minor);
  printf("FLOPs: forward 2 nseq heads T^2 hd (causal half of 4 T^2 hd), "
         "backward 2.5x forward\n");
  struct hxc_ctx *ctx = hxc_ctx_create(0);
  for (const auto &s : shapes) {
    bench_shape(ctx, &s, HXC_ATTN_TENSOR_CORE, peak);
    if (with_tiled && s.seq_len <= 4096)
      bench_shape(ctx, &s, HXC_ATTN_TILED, peak);
  }
  printf("cudnn: not measured (needs cudnn-frontend or a backend-API graph; "
         "open work)\n");
  hxc_ctx_destroy(ctx);
  return 0;
}
