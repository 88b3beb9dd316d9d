/* AdamW with global-norm clipping, fp32 (kernels/cpu/optim.c): multi-tensor
 * kernels over a group of tensors uploaded once, and the single-buffer
 * pieces the CPU has. The master weights, gradients and moments are fp32;
 * a bf16 copy of each weight is refreshed in the same pass when asked. */
#include <math.h>
#include <stdlib.h>

#include "kernels/cuda/common.cuh"

/* A tensor as the kernels see it. */
struct tensor_desc {
  float *w;
  const float *g;
  float *m, *v;
  bf16 *w_bf16;
  long n;
  int decay;
};

/* Elements per chunk: a block's share of a tensor. Tensors are cut into
 * chunks so one launch covers a whole group of any sizes. */
#define CHUNK 65536L
#define CHUNK_THREADS 256
#define REDUCE_THREADS 1024

struct hxc_adamw_group {
  int count, nchunks;
  struct tensor_desc *tensors; /* device: count */
  int *chunk_tensor;           /* device: nchunks, the tensor of a chunk */
  long *chunk_start;           /* device: nchunks, its first element */
  double *partials;            /* device: nchunks sums of squares */
};

/* ---------------------------------------------------------------------------
 * Sum of squares, sum_i g_i^2 in double, in a fixed order: per chunk a
 * block sums in double (strided per thread, then a tree over the block),
 * then one block adds the chunk partials (strided, then a tree) into *out.
 * ------------------------------------------------------------------------- */
__device__ double block_sum_double(double x, double *shared) {
  shared[threadIdx.x] = x;
  __syncthreads();
  for (unsigned half = blockDim.x / 2; half > 0; half >>= 1) {
    if (threadIdx.x < half)
      shared[threadIdx.x] += shared[threadIdx.x + half];
    __syncthreads();
  }
  return shared[0];
}

__global__ void group_sumsq_kernel(double *partials,
                                   const struct tensor_desc *tensors,
                                   const int *chunk_tensor,
                                   const long *chunk_start, int nchunks) {
  __shared__ double shared[CHUNK_THREADS];
  for (int c = blockIdx.x; c < nchunks; c += gridDim.x) {
    const struct tensor_desc t = tensors[chunk_tensor[c]];
    long begin = chunk_start[c];
    long end = begin + CHUNK < t.n ? begin + CHUNK : t.n;
    double sum = 0.0;
    for (long i = begin + threadIdx.x; i < end; i += blockDim.x)
      sum += (double)t.g[i] * t.g[i];
    sum = block_sum_double(sum, shared);
    if (threadIdx.x == 0)
      partials[c] = sum;
    __syncthreads(); /* shared is reused by the next chunk */
  }
}

/* *out += sum of partials[0..n), one block of REDUCE_THREADS threads. */
__global__ void sum_partials_kernel(double *out, const double *partials,
                                    int n) {
  __shared__ double shared[REDUCE_THREADS];
  double sum = 0.0;
  for (int i = threadIdx.x; i < n; i += blockDim.x)
    sum += partials[i];
  sum = block_sum_double(sum, shared);
  if (threadIdx.x == 0)
    *out += sum;
}

static unsigned chunk_blocks(int nchunks) {
  return (unsigned)(nchunks < 65535 ? nchunks : 65535);
}

struct hxc_adamw_group *hxc_adamw_group_create(const struct hxc_adamw_tensor *t,
                                               int count) {
  struct hxc_adamw_group *grp =
      (struct hxc_adamw_group *)calloc(1, sizeof *grp);
  struct tensor_desc *desc =
      (struct tensor_desc *)calloc((size_t)(count > 0 ? count : 1), sizeof *desc);
  if (!grp || !desc)
    hxc_fail("calloc(adamw group)", "out of host memory", __FILE__, __LINE__);
  long nchunks = 0;
  for (int i = 0; i < count; i++) {
    desc[i].w = t[i].w;
    desc[i].g = t[i].g;
    desc[i].m = t[i].m;
    desc[i].v = t[i].v;
    desc[i].w_bf16 = (bf16 *)t[i].w_bf16;
    desc[i].n = t[i].n;
    desc[i].decay = t[i].decay ? 1 : 0;
    nchunks += (t[i].n + CHUNK - 1) / CHUNK;
  }
  HXC_REQUIRE(nchunks < (1L << 30), "adamw group: at most 2^30 chunks");
  int *chunk_tensor = (int *)calloc((size_t)(nchunks > 0 ? nchunks : 1), sizeof(int));
  long *chunk_start = (long *)calloc((size_t)(nchunks > 0 ? nchunks : 1), sizeof(long));
  if (!chunk_tensor || !chunk_start)
    hxc_fail("calloc(adamw chunks)", "out of host memory", __FILE__, __LINE__);
  long c = 0;
  for (int i = 0; i < count; i++)
    for (long start = 0; start < t[i].n; start += CHUNK, c++) {
      chunk_tensor[c] = i;
      chunk_start[c] = start;
    }
  grp->count = count;
  grp->nchunks = (int)nchunks;
  size_t nc = (size_t)(nchunks > 0 ? nchunks : 1);
  HXC_CHECK(cudaMalloc(&grp->tensors, (size_t)(count > 0 ? count : 1) * sizeof *desc));
  HXC_CHECK(cudaMalloc(&grp->chunk_tensor, nc * sizeof(int)));
  HXC_CHECK(cudaMalloc(&grp->chunk_start, nc * sizeof(long)));
  HXC_CHECK(cudaMalloc(&grp->partials, nc * sizeof(double)));
  HXC_CHECK(cudaMemcpy(grp->tensors, desc, (size_t)count * sizeof *desc,
                       cudaMemcpyHostToDevice));
  HXC_CHECK(cudaMemcpy(grp->chunk_tensor, chunk_tensor, nc * sizeof(int),
                       cudaMemcpyHostToDevice));
  HXC_CHECK(cudaMemcpy(grp->chunk_start, chunk_start, nc * sizeof(long),
                       cudaMemcpyHostToDevice));
  free(desc);
  free(chunk_tensor);
  free(chunk_start);
  return grp;
}

void hxc_adamw_group_destroy(struct hxc_adamw_group *grp) {
  if (!grp)
    return;
  HXC_CHECK(cudaFree(grp->tensors));
  HXC_CHECK(cudaFree(grp->chunk_tensor));
  HXC_CHECK(cudaFree(grp->chunk_start));
  HXC_CHECK(cudaFree(grp->partials));
  free(grp);
}

void hxc_adamw_group_sumsq(struct hxc_adamw_group *grp, double *sumsq,
                           cudaStream_t stream) {
  if (grp->nchunks == 0)
    return;
  group_sumsq_kernel<<<chunk_blocks(grp->nchunks), CHUNK_THREADS, 0,
                       stream>>>(grp->partials, grp->tensors,
                                 grp->chunk_tensor, grp->chunk_start,
                                 grp->nchunks);
  HXC_LAUNCHED("group_sumsq_kernel");
  sum_partials_kernel<<<1, REDUCE_THREADS, 0, stream>>>(sumsq, grp->partials,
                                                        grp->nchunks);
  HXC_LAUNCHED("sum_partials_kernel");
}

/* ---------------------------------------------------------------------------
 * AdamW, t = step + 1, per element (as hxk_adamw_step, in fp32):
 *   g' = g * clip;  m = b1 m + (1-b1) g';  v = b2 v + (1-b2) g'^2;
 *   w -= lr (m / (1-b1^t) / (sqrt(v / (1-b2^t)) + eps) + lambda w),
 * lambda = weight_decay for decayed tensors, else 0. The bias corrections
 * are formed on the host in double, like the CPU's.
 * clip = grad_clip / sqrt(sumsq) when grad_clip > 0 and the norm exceeds
 * it, else 1 (hxk_clip_factor), computed on the device from the global sum
 * of squares so that no host round trip sits between norm and step.
 * ------------------------------------------------------------------------- */
struct adamw_consts {
  float b1, b2, eps, lr, decay, inv_bc1, inv_bc2;
  double grad_clip;
};

static struct adamw_consts adamw_consts_of(const struct hxk_adamw *hp,
                                           long step, double lr,
                                           double grad_clip) {
  double t = (double)step + 1.0;
  struct adamw_consts k;
  k.b1 = (float)hp->beta1;
  k.b2 = (float)hp->beta2;
  k.eps = (float)hp->eps;
  k.lr = (float)lr;
  k.decay = (float)hp->weight_decay;
  k.inv_bc1 = (float)(1.0 / (1.0 - pow(hp->beta1, t)));
  k.inv_bc2 = (float)(1.0 / (1.0 - pow(hp->beta2, t)));
  k.grad_clip = grad_clip;
  return k;
}

__device__ __forceinline__ float clip_factor(const double *global_sumsq,
                                             double grad_clip) {
  if (global_sumsq == NULL)
    return 1.0f;
  double norm = sqrt(*global_sumsq);
  if (grad_clip > 0 && norm > grad_clip)
    return (float)(grad_clip / norm);
  return 1.0f;
}

/* One element's update; returns the new weight. */
__device__ __forceinline__ float adamw_update(float *w, float g, float *m,
                                              float *v, bool decay,
                                              const struct adamw_consts &k) {
  float mi = k.b1 * *m + (1.0f - k.b1) * g;
  float vi = k.b2 * *v + (1.0f - k.b2) * g * g;
  *m = mi;
  *v = vi;
  float m_hat = mi * k.inv_bc1, v_hat = vi * k.inv_bc2;
  float lambda = decay ? k.decay : 0.0f;
  float wi = *w;
  wi -= k.lr * (m_hat / (sqrtf(v_hat) + k.eps) + lambda * wi);
  *w = wi;
  return wi;
}

__global__ void group_adamw_kernel(const struct tensor_desc *tensors,
                                   const int *chunk_tensor,
                                   const long *chunk_start, int nchunks,
                                   const double *global_sumsq,
                                   struct adamw_consts k) {
  float clip = clip_factor(global_sumsq, k.grad_clip);
  for (int c = blockIdx.x; c < nchunks; c += gridDim.x) {
    const struct tensor_desc t = tensors[chunk_tensor[c]];
    long begin = chunk_start[c];
    long end = begin + CHUNK < t.n ? begin + CHUNK : t.n;
    for (long i = begin + threadIdx.x; i < end; i += blockDim.x) {
      float wi = adamw_update(t.w + i, t.g[i] * clip, t.m + i, t.v + i,
                              t.decay != 0, k);
      if (t.w_bf16)
        t.w_bf16[i] = __float2bfloat16_rn(wi);
    }
  }
}

void hxc_adamw_group_step(struct hxc_adamw_group *grp,
                          const double *global_sumsq, double grad_clip,
                          const struct hxk_adamw *hp, long step, double lr,
                          cudaStream_t stream) {
  if (grp->nchunks == 0)
    return;
  struct adamw_consts k = adamw_consts_of(hp, step, lr, grad_clip);
  group_adamw_kernel<<<chunk_blocks(grp->nchunks), CHUNK_THREADS, 0,
                       stream>>>(grp->tensors, grp->chunk_tensor,
                                 grp->chunk_start, grp->nchunks, global_sumsq,
                                 k);
  HXC_LAUNCHED("group_adamw_kernel");
}

/* ---------------------------------------------------------------------------
 * Single-buffer pieces.
 * ------------------------------------------------------------------------- */

/* The block count depends on n only, so the order of the sum does too. */
static int sumsq_blocks(long n) {
  long want = (n + CHUNK_THREADS * 8 - 1) / (CHUNK_THREADS * 8);
  return (int)(want < 1024 ? want : 1024);
}

size_t hxc_sum_squares_scratch(long n) {
  return n > 0 ? (size_t)sumsq_blocks(n) * sizeof(double) : 0;
}

/* partials[b] = sum of g^2 over block b's strided share (double). */
__global__ void sumsq_kernel(double *partials, const float *buf, long n) {
  __shared__ double shared[CHUNK_THREADS];
  double sum = 0.0;
  for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n;
       i += (long)gridDim.x * blockDim.x)
    sum += (double)buf[i] * buf[i];
  sum = block_sum_double(sum, shared);
  if (threadIdx.x == 0)
    partials[blockIdx.x] = sum;
}

void hxc_sum_squares(struct hxc_ctx *ctx, const float *buf, long n,
                     double *sumsq, cudaStream_t stream) {
  if (n <= 0)
    return;
  int blocks = sumsq_blocks(n);
  double *partials =
      (double *)hxc_ctx_scratch(ctx, hxc_sum_squares_scratch(n));
  sumsq_kernel<<<blocks, CHUNK_THREADS, 0, stream>>>(partials, buf, n);
  HXC_LAUNCHED("sumsq_kernel");
  sum_partials_kernel<<<1, REDUCE_THREADS, 0, stream>>>(sumsq, partials,
                                                        blocks);
  HXC_LAUNCHED("sum_partials_kernel");
}

/* buf[i] *= factor. */
__global__ void scale_kernel(float *buf, long n, float factor) {
  for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n;
       i += (long)gridDim.x * blockDim.x)
    buf[i] *= factor;
}

void hxc_scale(float *buf, long n, float factor, cudaStream_t stream) {
  if (n <= 0)
    return;
  scale_kernel<<<grid_for(n, EW_THREADS), EW_THREADS, 0, stream>>>(buf, n, factor);
  HXC_LAUNCHED("scale_kernel");
}

__global__ void adamw_kernel(float *w, const float *g, float *m, float *v,
                             const uint8_t *decay_mask, long n,
                             struct adamw_consts k) {
  for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n;
       i += (long)gridDim.x * blockDim.x)
    adamw_update(w + i, g[i], m + i, v + i,
                 decay_mask == NULL || decay_mask[i] != 0, k);
}

void hxc_adamw_step(float *w, const float *g, float *m, float *v,
                    const uint8_t *decay_mask, long n,
                    const struct hxk_adamw *hp, long step, double lr,
                    cudaStream_t stream) {
  if (n <= 0)
    return;
  struct adamw_consts k = adamw_consts_of(hp, step, lr, 0.0);
  adamw_kernel<<<grid_for(n, EW_THREADS), EW_THREADS, 0, stream>>>(w, g, m, v, decay_mask,
                                                     n, k);
  HXC_LAUNCHED("adamw_kernel");
}

HXC_LAUNCHES(hxc_optim_launches) {
  struct hxc_launch_dims c = launch_dims(
      chunk_blocks((int)(s->group_chunks < (1L << 30) ? s->group_chunks : 0)),
      1, 1, CHUNK_THREADS, 0, false);
  struct hxc_launch_dims r = launch_dims(1, 1, 1, REDUCE_THREADS, 0, false);
  struct hxc_launch_dims q = launch_dims(
      (unsigned long)sumsq_blocks(s->group_elems), 1, 1, CHUNK_THREADS, 0,
      false);
  struct hxc_launch_dims e = ew_launch(s->group_elems);
  fn(arg, "group_sumsq_kernel", &c);
  fn(arg, "group_adamw_kernel", &c);
  fn(arg, "sum_partials_kernel", &r);
  fn(arg, "sumsq_kernel", &q);
  fn(arg, "scale_kernel", &e);
  fn(arg, "adamw_kernel", &e);
}
