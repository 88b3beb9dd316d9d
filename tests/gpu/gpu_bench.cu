/* The CUDA kernels' speed on this GPU, for bench/gpu_throughput.sh (which
 * prints it beside the 1.3B model's tokens/s and MFU). Not a test: it
 * prints figures, never asserts them. Exits 77 without a GPU.
 *
 *   gpu_bench [--quick]       (--quick: fewer repetitions, T 8192 skipped)
 *
 * Lines (one a measurement, fields by name so the script can pick them):
 *   kernel NAME ms X tflops Y gbs Z        the 1.3B layer's kernels at its
 *       shapes (8 x 2048 tokens, hidden 2048, ffn 5504, 16 heads of 128):
 *       TFLOP/s of the products, GB/s of bytes read + written by the
 *       element-wise ones (each byte counted once: the floor of the traffic)
 *   attention IMPL hd H T T nseq N heads Q fwd_ms X fwd_tflops Y bwd_ms X
 *       bwd_tflops Y      causal, bf16, 16384 tokens a call (IMPL tc: hexic's
 *       tensor-core kernel; cudnn: cuDNN's fused attention, in gpu_bench_cudnn:
 *       this file built with -DHEXIC_ATTENTION_CUDNN and linked with libcudnn,
 *       whose --cudnn-only prints those rows alone)
 * FLOPs of attention are the usual accounting: forward 4 T^2 hd a head and
 * sequence (Q K^T and P V), halved by the causal mask; backward 2.5x that
 * (five products). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime.h>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/llama_cuda.h"
#ifdef HEXIC_ATTENTION_CUDNN
#include "rtlib/cuda/cuda_backend.h"
#endif

static int iters = 10;

/* Milliseconds a call of fn, after two warm-up calls, over `iters`. */
template <class F> static float time_ms(F fn) {
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

/* Device buffers, freed together at the end of a measurement. */
struct pool {
  void *bufs[32];
  int count;
};
static void *filled(struct pool *p, size_t bytes) {
  void *d = NULL;
  HXC_CHECK(cudaMalloc(&d, bytes));
  /* 0x3c3c: bf16 0.0115 (fp32 ~0.0115 too), harmless for every kernel */
  HXC_CHECK(cudaMemset(d, 0x3c, bytes));
  if (p->count < 32)
    p->bufs[p->count++] = d;
  return d;
}
static void drain(struct pool *p) {
  for (int i = 0; i < p->count; i++)
    HXC_CHECK(cudaFree(p->bufs[i]));
  p->count = 0;
}

static void report(const char *name, float ms, double flops, double bytes) {
  printf("kernel %-28s ms %8.3f tflops %7.1f gbs %7.0f\n", name, ms,
         flops / (ms * 1e-3) / 1e12, bytes / (ms * 1e-3) / 1e9);
  fflush(stdout);
}

/* The 1.3B model's layer (examples in tests/gpu/prepare.sh). */
enum { N = 8 * 2048, D = 2048, F = 5504, H = 16, HD = 128, T = 2048 };

static void bench_linear(struct hxc_ctx *ctx, const char *name, int in,
                         int out) {
  struct pool p = {{0}, 0};
  void *x = filled(&p, (size_t)N * in * 2), *w = filled(&p, (size_t)out * in * 2);
  void *y = filled(&p, (size_t)N * out * 2), *dx = filled(&p, (size_t)N * in * 2);
  float *dw = (float *)filled(&p, (size_t)out * in * 4);
  double flops = 2.0 * N * in * out;
  double bytes = 2.0 * ((double)N * in + (double)out * in + (double)N * out);
  char label[64];
  snprintf(label, sizeof label, "linear_fwd.%s", name);
  report(label, time_ms([&] {
           hxc_linear_forward(ctx, y, x, w, N, in, out, 0.0f, HXC_BF16, 0);
         }),
         flops, bytes);
  snprintf(label, sizeof label, "linear_bwd.%s", name);
  report(label, time_ms([&] {
           hxc_linear_backward(ctx, dx, dw, y, x, w, N, in, out, HXC_BF16, 0);
         }),
         2 * flops, bytes + 2.0 * N * in + 8.0 * out * in);
  drain(&p);
}

static void bench_elementwise(struct hxc_ctx *ctx) {
  struct pool p = {{0}, 0};
  size_t act = (size_t)N * D * 2, ffn = (size_t)N * F * 2;
  void *a = filled(&p, act), *b = filled(&p, act), *y = filled(&p, act);
  void *g = filled(&p, (size_t)D * 2);
  float *rstd = (float *)filled(&p, (size_t)N * 4);
  float *dg = (float *)filled(&p, (size_t)D * 4);
  report("rmsnorm_fwd", time_ms([&] {
           hxc_rmsnorm_forward(y, rstd, a, g, N, D, 1e-5f, HXC_BF16, 0);
         }),
         0, 2.0 * act);
  report("rmsnorm_bwd", time_ms([&] {
           hxc_rmsnorm_backward(ctx, b, dg, y, a, g, rstd, N, D, HXC_BF16, 0);
         }),
         0, 4.0 * act);
  report("residual_fwd", time_ms([&] {
           hxc_residual_forward(y, a, b, (long)N * D, HXC_BF16, 0);
         }),
         0, 3.0 * act);
  void *gg = filled(&p, ffn), *uu = filled(&p, ffn), *hh = filled(&p, ffn);
  void *dgg = filled(&p, ffn), *duu = filled(&p, ffn);
  report("swiglu_fwd", time_ms([&] {
           hxc_swiglu_forward(hh, gg, uu, (long)N * F, HXC_BF16, 0);
         }),
         0, 3.0 * ffn);
  report("swiglu_bwd", time_ms([&] {
           hxc_swiglu_backward(dgg, duu, hh, gg, uu, (long)N * F, HXC_BF16, 0);
         }),
         0, 7.0 * ffn);
  float *tab = (float *)filled(&p, (size_t)T * HD * 4);
  report("rope_fwd.q", time_ms([&] {
           hxc_rope_forward(y, tab, N, H, HD, T, HXC_BF16, 0);
         }),
         0, 2.0 * act);
  drain(&p);
}

/* Attention at nseq x T = 16384 tokens, heads x hd = 2048 (the 1.3B's
 * width at hd 128; 32 heads at hd 64). */
static void bench_attention(struct hxc_ctx *ctx, int hd, int seq_len) {
  int nseq = 16384 / seq_len, heads = 2048 / hd;
  struct pool p = {{0}, 0};
  long n = (long)nseq * seq_len;
  size_t qb = (size_t)n * heads * hd * 2;
  void *q = filled(&p, qb), *k = filled(&p, qb), *v = filled(&p, qb);
  void *o = filled(&p, qb), *dout = filled(&p, qb), *dq = filled(&p, qb);
  void *dk = filled(&p, qb), *dv = filled(&p, qb);
  float *lse = (float *)filled(&p, (size_t)n * heads * 4);
  struct hxc_kv_map map = {0, 1, 0};
  hxc_attention_set_impl(HXC_ATTN_TENSOR_CORE);
  float fwd = time_ms([&] {
    hxc_attention_forward(o, lse, q, k, v, map, nseq, seq_len, heads, heads,
                          hd, HXC_BF16, 0);
  });
  float bwd = time_ms([&] {
    hxc_attention_backward(ctx, dq, dk, dv, dout, q, k, v, o, lse, map, nseq,
                           seq_len, heads, heads, hd, HXC_BF16, 0);
  });
  double ff = 2.0 * nseq * heads * (double)seq_len * seq_len * hd;
  printf("attention tc hd %d T %d nseq %d heads %d fwd_ms %.3f fwd_tflops "
         "%.1f bwd_ms %.3f bwd_tflops %.1f\n",
         hd, seq_len, nseq, heads, fwd, ff / (fwd * 1e-3) / 1e12, bwd,
         2.5 * ff / (bwd * 1e-3) / 1e12);
  fflush(stdout);
  drain(&p);
}

#ifdef HEXIC_ATTENTION_CUDNN
static void *cudnn_alloc(size_t bytes, void *arg) {
  (void)arg;
  void *d = NULL;
  HXC_CHECK(cudaMalloc(&d, bytes));
  return d;
}
static void cudnn_release(void *p, void *arg) {
  (void)arg;
  HXC_CHECK(cudaFree(p));
}

/* The same shapes and accounting as bench_attention, on cuDNN (plans built
 * before the timing: time_ms's two warm-up calls). */
static void bench_attention_cudnn(struct rt_cudnn_attention *a, int hd,
                                  int seq_len) {
  int nseq = 16384 / seq_len, heads = 2048 / hd;
  struct pool p = {{0}, 0};
  long n = (long)nseq * seq_len;
  size_t qb = (size_t)n * heads * hd * 2;
  void *q = filled(&p, qb), *k = filled(&p, qb), *v = filled(&p, qb);
  void *o = filled(&p, qb), *dout = filled(&p, qb), *dq = filled(&p, qb);
  void *dk = filled(&p, qb), *dv = filled(&p, qb);
  float *lse = (float *)filled(&p, (size_t)n * heads * 4);
  struct rt_cudnn_attn_shape s = {nseq, seq_len, heads, heads, hd,
                                  0,    1,       0,     true};
  rt_cudnn_attention_prepare(a, &s);
  float fwd = time_ms(
      [&] { rt_cudnn_attention_forward(a, &s, o, lse, q, k, v); });
  float bwd = time_ms([&] {
    rt_cudnn_attention_backward(a, &s, dq, dk, dv, dout, q, k, v, o, lse);
  });
  double ff = 2.0 * nseq * heads * (double)seq_len * seq_len * hd;
  printf("attention cudnn hd %d T %d nseq %d heads %d fwd_ms %.3f fwd_tflops "
         "%.1f bwd_ms %.3f bwd_tflops %.1f\n",
         hd, seq_len, nseq, heads, fwd, ff / (fwd * 1e-3) / 1e12, bwd,
         2.5 * ff / (bwd * 1e-3) / 1e12);
  fflush(stdout);
  drain(&p);
}
#endif

int main(int argc, char **argv) {
  int count = 0;
  cudaError_t st = cudaGetDeviceCount(&count);
  if (st != cudaSuccess || count == 0) {
    printf("gpu_bench: no GPU (%s)\n",
           st != cudaSuccess ? cudaGetErrorString(st) : "none found");
    return 77;
  }
  bool quick = false, cudnn_only = false;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--quick") == 0)
      quick = true;
#ifdef HEXIC_ATTENTION_CUDNN
    else if (strcmp(argv[i], "--cudnn-only") == 0)
      cudnn_only = true;
#endif
    else {
      fprintf(stderr, "gpu_bench: unknown argument '%s'\n", argv[i]);
      return 1;
    }
  }
  if (quick)
    iters = 3;
  struct cudaDeviceProp prop;
  HXC_CHECK(cudaGetDeviceProperties(&prop, 0));
  printf("gpu_bench: %s (sm_%d%d), bf16 in, fp32 accumulation\n", prop.name,
         prop.major, prop.minor);
  struct hxc_ctx *ctx = hxc_ctx_create(0);
  const int hds[] = {64, 128}, seqs[] = {2048, 8192};
  if (!cudnn_only) {
    bench_linear(ctx, "qkv", D, 3 * D);
    bench_linear(ctx, "wo", D, D);
    bench_linear(ctx, "gate_up", D, 2 * F);
    bench_linear(ctx, "down", F, D);
    bench_elementwise(ctx);
    for (int hd : hds)
      for (int t : seqs)
        if (!quick || t == 2048)
          bench_attention(ctx, hd, t);
  }
#ifdef HEXIC_ATTENTION_CUDNN
  printf("gpu_bench: cuDNN %ld\n", rt_cudnn_version());
  struct rt_cudnn_attention *a =
      rt_cudnn_attention_open(NULL, cudnn_alloc, cudnn_release, NULL);
  for (int hd : hds)
    for (int t : seqs)
      if (!quick || t == 2048)
        bench_attention_cudnn(a, hd, t);
  rt_cudnn_attention_close(a);
#endif
  hxc_ctx_destroy(ctx);
  return 0;
}
