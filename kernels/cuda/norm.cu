/* RMSNorm and the residual adds, forward and backward (kernels/cpu/ops.c:
 * hxk_rmsnorm_*, hxk_residual_*), and the two fused as a layer uses them. */
#include "kernels/cuda/common.cuh"

/* One element (V false) or eight (V true, 16-byte aligned) in fp32: the
 * two paths of the norm kernels, the same code. */
template <bool V, typename T>
__device__ __forceinline__ void load_n(const T *p, float v[VEC]) {
  if (V)
    load8(p, v);
  else
    v[0] = load_f(p);
}
template <bool V, typename T>
__device__ __forceinline__ void store_n(T *p, const float v[VEC]) {
  if (V)
    store8(p, v);
  else
    store_f(p, v[0]);
}
/* x as a T holds it (the residual's sum is rounded once, as stored). */
__device__ __forceinline__ float as_stored(float x, const float *) { return x; }
__device__ __forceinline__ float as_stored(float x, const bf16 *) {
  return __bfloat162float(__float2bfloat16_rn(x));
}

/* sum_j x_j^2 of a token in double, by a warp (every lane gets it); each
 * lane reads the elements it wrote (the same walk as the kernel's). */
template <bool V, typename T>
__device__ double sumsq_f64(const T *xt, int dim, int lane) {
  const int width = V ? VEC : 1;
  double sum = 0.0;
  for (int i = lane * width; i < dim; i += 32 * width) {
    float v[VEC];
    load_n<V>(xt + i, v);
    for (int k = 0; k < width; k++)
      sum += (double)v[k] * v[k];
  }
  return warp_sum_f64(sum);
}

/* out_i = g_i * (x_i * r),  r = 1/sqrt(mean_j x_j^2 + eps), per token, where
 * x = a, or with b the residual fused in front: x = y = a + b (rounded to
 * T and written to y; y may alias a or b), the norm reading the sum as
 * stored, so the result is the two kernels' bit for bit.
 * One warp per token: each lane sums its share of x_j^2 (8 consecutive
 * elements at a time on the vector path: rows of a multiple of 8, every
 * pointer 16-byte aligned; else one element at a time), a warp reduction
 * adds the 32 partials; r is formed in double like the CPU's.
 * The CPU sums the squares in double: a token whose fp32 sum overflows
 * (|x| around 2e19 at dim 1024, all finite) has a tiny finite r there, so
 * such a token is summed again in double, as the CPU does; summed in fp32
 * its r is 0, the token comes out all zeros and a blown-up run trains on
 * at uniform logits (loss ln V) where the CPU's loss goes NaN. An Inf or
 * NaN in x stays Inf or NaN in double: out is NaN, as on the CPU. Each lane
 * reads back only the elements it wrote: no exchange inside the warp. */
template <typename T, bool V>
__global__ void rmsnorm_forward_kernel(T *y, T *out, float *rstd, const T *a,
                                       const T *b, const T *g, long n,
                                       int dim, float eps) {
  const int width = V ? VEC : 1;
  long warps = blockDim.x / 32;
  int lane = threadIdx.x & 31;
  /* t is uniform in a warp: whole warps leave together */
  for (long t = blockIdx.x * warps + threadIdx.x / 32; t < n;
       t += gridDim.x * warps) {
    const T *at = a + t * dim;
    const T *xt = b ? y + t * dim : at; /* x after the first pass */
    float sumsq = 0.0f;
    for (int i = lane * width; i < dim; i += 32 * width) {
      float v[VEC];
      load_n<V>(at + i, v);
      if (b) {
        float w[VEC];
        load_n<V>(b + t * dim + i, w);
        for (int k = 0; k < width; k++)
          v[k] = as_stored(v[k] + w[k], a);
        store_n<V>(y + t * dim + i, v);
      }
      for (int k = 0; k < width; k++)
        sumsq += v[k] * v[k];
    }
    double mean_sq = (double)warp_sum(sumsq) / dim;
    if (isinf(mean_sq)) /* warp-uniform, rare: fp32 overflowed */
      mean_sq = sumsq_f64<V>(xt, dim, lane) / dim;
    float r = (float)(1.0 / sqrt(mean_sq + (double)eps));
    if (lane == 0)
      rstd[t] = r;
    for (int i = lane * width; i < dim; i += 32 * width) {
      float v[VEC], gv[VEC];
      load_n<V>(xt + i, v); /* reads x_i before writing out_i */
      load_n<V>(g + i, gv);
      for (int k = 0; k < width; k++)
        v[k] = gv[k] * (v[k] * r);
      store_n<V>(out + t * dim + i, v);
    }
  }
}

/* 8 warps a block, a token a warp, the grid capped (tokens loop). */
#define RMS_FWD_WARPS 8
static struct hxc_launch_dims rms_fwd_launch(long n) {
  return launch_dims(grid_for(n, RMS_FWD_WARPS), 1, 1, RMS_FWD_WARPS * 32, 0,
                     false);
}

static void rmsnorm_forward(void *y, void *out, float *rstd, const void *a,
                            const void *b, const void *g, long n, int dim,
                            float eps, enum hxc_dtype dt, cudaStream_t stream) {
  if (n <= 0)
    return;
  struct hxc_launch_dims l = rms_fwd_launch(n);
  bool v = dim % VEC == 0 && vec8_ok(y, out, a, b) && vec8_ok(g);
  HXC_DISPATCH(dt, T, {
    if (v)
      rmsnorm_forward_kernel<T, true><<<grid_of(l), l.threads, 0, stream>>>(
          (T *)y, (T *)out, rstd, (const T *)a, (const T *)b, (const T *)g, n,
          dim, eps);
    else
      rmsnorm_forward_kernel<T, false><<<grid_of(l), l.threads, 0, stream>>>(
          (T *)y, (T *)out, rstd, (const T *)a, (const T *)b, (const T *)g, n,
          dim, eps);
  });
  HXC_LAUNCHED("rmsnorm_forward_kernel");
}

void hxc_rmsnorm_forward(void *out, float *rstd, const void *x, const void *g,
                         long n, int dim, float eps, enum hxc_dtype dt,
                         cudaStream_t stream) {
  rmsnorm_forward(NULL, out, rstd, x, NULL, g, n, dim, eps, dt, stream);
}

void hxc_residual_rmsnorm_forward(void *y, void *out, float *rstd,
                                  const void *a, const void *b, const void *g,
                                  long n, int dim, float eps,
                                  enum hxc_dtype dt, cudaStream_t stream) {
  rmsnorm_forward(y, out, rstd, a, b, g, n, dim, eps, dt, stream);
}

/* Columns a thread of the backward owns (in registers), at most, and the
 * block: 256 threads while 16 columns each suffice, else just enough warps
 * (1024 at dim 16384). The kernel is bounded at 1024 threads, so ptxas
 * keeps it within 64 registers: any block it is launched with fits the
 * 65536 registers of an SM (tests/gpures checks the cubins). */
#define RMS_MAXC 16
#define RMS_MAX_THREADS 1024
#define RMS_MAX_BLOCKS 512

static int rms_bwd_threads(int dim) {
  int threads = 256;
  if (dim > threads * RMS_MAXC)
    threads = ((dim + RMS_MAXC - 1) / RMS_MAXC + 31) / 32 * 32;
  return threads;
}

/* About 512 blocks: enough for any GPU, few partial rows to add. */
static long rms_bwd_rows_per_block(long n) {
  return (n + RMS_MAX_BLOCKS - 1) / RMS_MAX_BLOCKS;
}

static int rms_bwd_blocks(long n) {
  long rows = rms_bwd_rows_per_block(n);
  return (int)((n + rows - 1) / rows);
}

/* With xh = x r, per token:  dx_i = dres_i + r (g_i dout_i - xh_i *
 * mean_j(g_j dout_j xh_j)), and the token's share of dg_i = sum_t dout_i
 * xh_i. dres is the residual path's gradient, fused in (dres = dx: the
 * plain backward's add into dx; a layer passes the stream's gradient and
 * saves the copy it would need), read before dx_i is written by the same
 * thread. Columns strided by the block: consecutive threads touch
 * consecutive elements (coalesced without vector accesses, which would
 * cost this kernel the registers its 16 sums need).
 * A block takes rows_per_block consecutive tokens; thread c owns columns
 * c, c + blockDim, ... and sums their dg share over its rows in registers
 * (g is re-read from the cache each row: only the sums live in registers),
 * then writes the block's partial row part[block, :]. The partials are
 * added in block order by rmsnorm_dg_kernel: no atomics, fixed order. */
/* sum_i g_i dout_i xh_i of a token in double, by the block (every thread
 * gets it): the CPU's sum, for a token whose fp32 sum overflowed, so that
 * a finite mean there stays finite here. */
template <typename T>
__device__ double dot_f64(const T *dt, const T *xt, const T *g, float r,
                          int dim, double *red) {
  double dot = 0.0;
  for (int c = 0; c < RMS_MAXC; c++) {
    int i = threadIdx.x + c * blockDim.x;
    if (i < dim)
      dot += (double)load_f(g + i) * load_f(dt + i) * (load_f(xt + i) * r);
  }
  return block_sum_f64(dot, red);
}

template <typename T>
__global__ void __launch_bounds__(RMS_MAX_THREADS)
rmsnorm_backward_kernel(T *dx, float *part, const T *dres, const T *dout,
                        const T *x, const T *g, const float *rstd, long n,
                        int dim, long rows_per_block) {
  __shared__ float red[32];
  __shared__ double red_f64[32];
  float acc[RMS_MAXC];
#pragma unroll
  for (int c = 0; c < RMS_MAXC; c++)
    acc[c] = 0.0f;
  long r0 = blockIdx.x * rows_per_block;
  long r1 = r0 + rows_per_block < n ? r0 + rows_per_block : n;
  for (long t = r0; t < r1; t++) {
    const T *xt = x + t * dim, *dt = dout + t * dim;
    float r = rstd[t], dot = 0.0f;
#pragma unroll
    for (int c = 0; c < RMS_MAXC; c++) {
      int i = threadIdx.x + c * blockDim.x;
      if (i < dim)
        dot += load_f(g + i) * load_f(dt + i) * (load_f(xt + i) * r);
    }
    float mean_dot = block_sum(dot, red) / dim;
    if (isinf(mean_dot)) /* block-uniform, rare: fp32 overflowed */
      mean_dot = (float)(dot_f64(dt, xt, g, r, dim, red_f64) / dim);
#pragma unroll
    for (int c = 0; c < RMS_MAXC; c++) {
      int i = threadIdx.x + c * blockDim.x;
      if (i < dim) {
        float d = load_f(dt + i), xh = load_f(xt + i) * r;
        acc[c] += d * xh;
        float base = load_f(dres + t * dim + i);
        store_f(dx + t * dim + i, base + r * (load_f(g + i) * d - xh * mean_dot));
      }
    }
  }
#pragma unroll
  for (int c = 0; c < RMS_MAXC; c++) {
    int i = threadIdx.x + c * blockDim.x;
    if (i < dim)
      part[blockIdx.x * (long)dim + i] = acc[c];
  }
}

/* dg_i += sum_b part[b, i], b in order. */
#define RMS_DG_THREADS 256
__global__ void rmsnorm_dg_kernel(float *dg, const float *part, int nparts,
                                  int dim) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= dim)
    return;
  float sum = 0.0f;
  for (int b = 0; b < nparts; b++)
    sum += part[(long)b * dim + i];
  dg[i] += sum;
}

/* The partial rows of n tokens: n of them up to 512, then at most 512
 * (not monotone in n: 512 tokens take 512 rows, 513 take 257): the bound
 * for every n' <= n. */
size_t hxc_rmsnorm_backward_scratch(long n, int dim) {
  if (n <= 0 || dim <= 0)
    return 0;
  long rows = n < RMS_MAX_BLOCKS ? n : RMS_MAX_BLOCKS;
  return (size_t)rows * (size_t)dim * sizeof(float);
}

static struct hxc_launch_dims rms_bwd_launch(long n, int dim) {
  return launch_dims((unsigned long)rms_bwd_blocks(n), 1, 1,
                     rms_bwd_threads(dim), 0, false);
}
static struct hxc_launch_dims rms_dg_launch(int dim) {
  return launch_dims((unsigned long)(dim + RMS_DG_THREADS - 1) / RMS_DG_THREADS,
                     1, 1, RMS_DG_THREADS, 0, false);
}

static void rmsnorm_backward(struct hxc_ctx *ctx, void *dx, float *dg,
                             const void *dres, const void *dout,
                             const void *x, const void *g, const float *rstd,
                             long n, int dim, enum hxc_dtype dt,
                             cudaStream_t stream) {
  if (n <= 0)
    return;
  HXC_REQUIRE(dim <= RMS_MAX_THREADS * RMS_MAXC,
              "rmsnorm_backward: dim at most 16384");
  struct hxc_launch_dims l = rms_bwd_launch(n, dim), ld = rms_dg_launch(dim);
  long rows_per_block = rms_bwd_rows_per_block(n);
  int blocks = (int)l.gx;
  float *part =
      (float *)hxc_ctx_scratch(ctx, hxc_rmsnorm_backward_scratch(n, dim));
  HXC_DISPATCH(dt, T,
               rmsnorm_backward_kernel<T><<<grid_of(l), l.threads, 0, stream>>>(
                   (T *)dx, part, (const T *)dres, (const T *)dout,
                   (const T *)x, (const T *)g, rstd, n, dim, rows_per_block));
  HXC_LAUNCHED("rmsnorm_backward_kernel");
  rmsnorm_dg_kernel<<<grid_of(ld), ld.threads, 0, stream>>>(dg, part, blocks,
                                                            dim);
  HXC_LAUNCHED("rmsnorm_dg_kernel");
}

void hxc_rmsnorm_backward(struct hxc_ctx *ctx, void *dx, float *dg,
                          const void *dout, const void *x, const void *g,
                          const float *rstd, long n, int dim,
                          enum hxc_dtype dt, cudaStream_t stream) {
  rmsnorm_backward(ctx, dx, dg, dx, dout, x, g, rstd, n, dim, dt, stream);
}

void hxc_rmsnorm_backward_residual(struct hxc_ctx *ctx, void *dx, float *dg,
                                   const void *dres, const void *dout,
                                   const void *x, const void *g,
                                   const float *rstd, long n, int dim,
                                   enum hxc_dtype dt, cudaStream_t stream) {
  rmsnorm_backward(ctx, dx, dg, dres, dout, x, g, rstd, n, dim, dt, stream);
}

/* Layers, the head and the final norm: n = nseq * seq_len tokens of
 * hidden. */
HXC_LAUNCHES(hxc_rmsnorm_launches) {
  long n = s->nseq * s->seq_len;
  struct hxc_launch_dims f = rms_fwd_launch(n), b = rms_bwd_launch(n, s->hidden),
                         d = rms_dg_launch(s->hidden);
  fn(arg, "rmsnorm_forward_kernel", &f);
  fn(arg, "rmsnorm_backward_kernel", &b);
  fn(arg, "rmsnorm_dg_kernel", &d);
}

/* ---- residual adds ---- */

/* y = a + b (y may alias a or b: each element is read before it is written,
 * by the same thread). The first nvec * 8 elements eight at a time (16-byte
 * accesses: nvec is 0 unless every pointer is aligned), the tail one by
 * one. */
template <typename T>
__global__ void residual_forward_kernel(T *y, const T *a, const T *b, long n,
                                        long nvec) {
  long tid = blockIdx.x * (long)blockDim.x + threadIdx.x;
  long stride = (long)gridDim.x * blockDim.x;
  for (long j = tid; j < nvec; j += stride) {
    float va[VEC], vb[VEC];
    load8(a + j * VEC, va);
    load8(b + j * VEC, vb);
    for (int k = 0; k < VEC; k++)
      va[k] += vb[k];
    store8(y + j * VEC, va);
  }
  for (long i = nvec * VEC + tid; i < n; i += stride)
    store_f(y + i, load_f(a + i) + load_f(b + i));
}

void hxc_residual_forward(void *y, const void *a, const void *b, long n,
                          enum hxc_dtype dt, cudaStream_t stream) {
  if (n <= 0)
    return;
  long nvec = vec8_ok(y, a, b) ? n / VEC : 0;
  struct hxc_launch_dims l = vec_launch(n, nvec);
  HXC_DISPATCH(dt, T,
               residual_forward_kernel<T>
               <<<grid_of(l), l.threads, 0, stream>>>(
                   (T *)y, (const T *)a, (const T *)b, n, nvec));
  HXC_LAUNCHED("residual_forward_kernel");
}

/* da += dy, db += dy. */
template <typename T>
__global__ void residual_backward_kernel(T *da, T *db, const T *dy, long n) {
  for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n;
       i += (long)gridDim.x * blockDim.x) {
    float d = load_f(dy + i);
    store_f(da + i, load_f(da + i) + d);
    store_f(db + i, load_f(db + i) + d);
  }
}

void hxc_residual_backward(void *da, void *db, const void *dy, long n,
                           enum hxc_dtype dt, cudaStream_t stream) {
  if (n <= 0)
    return;
  HXC_DISPATCH(dt, T,
               residual_backward_kernel<T>
               <<<grid_for(n, EW_THREADS), EW_THREADS, 0, stream>>>(
                   (T *)da, (T *)db, (const T *)dy, n));
  HXC_LAUNCHED("residual_backward_kernel");
}

HXC_LAUNCHES(hxc_residual_launches) {
  struct hxc_launch_dims l = ew_launch(s->nseq * s->seq_len * s->hidden);
  fn(arg, "residual_forward_kernel", &l);
  fn(arg, "residual_backward_kernel", &l);
}
