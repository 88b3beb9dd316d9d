/* RMSNorm, forward and backward (kernels/cpu/ops.c: hxk_rmsnorm_*). */
#include "kernels/cuda/common.cuh"

/* out_i = g_i * (x_i * r),  r = 1/sqrt(mean_j x_j^2 + eps), per token.
 * One warp per token: each lane sums its strided share of x_j^2, a warp
 * reduction adds the 32 partials; r is formed in double like the CPU's. */
template <typename T>
__global__ void rmsnorm_forward_kernel(T *out, float *rstd, const T *x,
                                       const T *g, long n, int dim,
                                       float eps) {
  long t = blockIdx.x * (long)(blockDim.x / 32) + threadIdx.x / 32;
  int lane = threadIdx.x & 31;
  if (t >= n) /* whole warps leave together: t is uniform in a warp */
    return;
  const T *xt = x + t * dim;
  float sumsq = 0.0f;
  for (int i = lane; i < dim; i += 32) {
    float v = load_f(xt + i);
    sumsq += v * v;
  }
  sumsq = warp_sum(sumsq);
  float r = (float)(1.0 / sqrt((double)sumsq / dim + (double)eps));
  if (lane == 0)
    rstd[t] = r;
  for (int i = lane; i < dim; i += 32) /* reads x_i before writing out_i */
    store_f(out + t * dim + i, load_f(g + i) * (load_f(xt + i) * r));
}

void hxc_rmsnorm_forward(void *out, float *rstd, const void *x, const void *g,
                         long n, int dim, float eps, enum hxc_dtype dt,
                         cudaStream_t stream) {
  if (n <= 0)
    return;
  const int warps = 8;
  unsigned blocks = (unsigned)((n + warps - 1) / warps);
  HXC_DISPATCH(dt, T,
               rmsnorm_forward_kernel<T><<<blocks, warps * 32, 0, stream>>>(
                   (T *)out, rstd, (const T *)x, (const T *)g, n, dim, eps));
  HXC_LAUNCHED("rmsnorm_forward_kernel");
}

/* Columns a thread of the backward owns (in registers), at most. */
#define RMS_MAXC 16

/* With xh = x r, per token:  dx_i += r (g_i dout_i - xh_i * mean_j(g_j
 * dout_j xh_j)), and the token's share of dg_i = sum_t dout_i xh_i.
 * A block takes rows_per_block consecutive tokens; thread c owns columns
 * c, c + blockDim, ... and sums their dg share over its rows in registers,
 * then writes the block's partial row part[block, :]. The partials are
 * added in block order by rmsnorm_dg_kernel: no atomics, fixed order. */
template <typename T>
__global__ void rmsnorm_backward_kernel(T *dx, float *part, const T *dout,
                                        const T *x, const T *g,
                                        const float *rstd, long n, int dim,
                                        long rows_per_block) {
  __shared__ float red[32];
  float acc[RMS_MAXC], gv[RMS_MAXC];
#pragma unroll
  for (int c = 0; c < RMS_MAXC; c++) {
    int i = threadIdx.x + c * blockDim.x;
    acc[c] = 0.0f;
    gv[c] = i < dim ? load_f(g + i) : 0.0f;
  }
  long r0 = blockIdx.x * rows_per_block;
  long r1 = r0 + rows_per_block < n ? r0 + rows_per_block : n;
  for (long t = r0; t < r1; t++) {
    const T *xt = x + t * dim, *dt = dout + t * dim;
    float r = rstd[t], dot = 0.0f;
#pragma unroll
    for (int c = 0; c < RMS_MAXC; c++) {
      int i = threadIdx.x + c * blockDim.x;
      if (i < dim)
        dot += gv[c] * load_f(dt + i) * (load_f(xt + i) * r);
    }
    float mean_dot = block_sum(dot, red) / dim;
#pragma unroll
    for (int c = 0; c < RMS_MAXC; c++) {
      int i = threadIdx.x + c * blockDim.x;
      if (i < dim) {
        float d = load_f(dt + i), xh = load_f(xt + i) * r;
        acc[c] += d * xh;
        T *dxi = dx + t * dim + i;
        store_f(dxi, load_f(dxi) + r * (gv[c] * d - xh * mean_dot));
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

void hxc_rmsnorm_backward(struct hxc_ctx *ctx, void *dx, float *dg,
                          const void *dout, const void *x, const void *g,
                          const float *rstd, long n, int dim,
                          enum hxc_dtype dt, cudaStream_t stream) {
  if (n <= 0)
    return;
  HXC_REQUIRE(dim <= 1024 * RMS_MAXC, "rmsnorm_backward: dim at most 16384");
  /* 256 threads while 16 columns each suffice, else just enough warps. */
  int threads = 256;
  if (dim > threads * RMS_MAXC)
    threads = ((dim + RMS_MAXC - 1) / RMS_MAXC + 31) / 32 * 32;
  /* About 512 blocks: enough for any GPU, few partial rows to add. */
  long rows_per_block = (n + 511) / 512;
  int blocks = (int)((n + rows_per_block - 1) / rows_per_block);
  float *part = (float *)hxc_ctx_scratch(
      ctx, (size_t)blocks * (size_t)dim * sizeof(float));
  HXC_DISPATCH(dt, T,
               rmsnorm_backward_kernel<T><<<blocks, threads, 0, stream>>>(
                   (T *)dx, part, (const T *)dout, (const T *)x,
                   (const T *)g, rstd, n, dim, rows_per_block));
  HXC_LAUNCHED("rmsnorm_backward_kernel");
  rmsnorm_dg_kernel<<<(dim + 255) / 256, 256, 0, stream>>>(dg, part, blocks,
                                                          dim);
  HXC_LAUNCHED("rmsnorm_dg_kernel");
}
