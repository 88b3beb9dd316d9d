/* Model head: final RMSNorm, LM head and cross-entropy, forward and
 * backward fused by chunks of tokens (kernels/cpu/head.c does the same with
 * chunks of HXK_HEAD_CHUNK tokens): only one chunk's logits, [chunk, V]
 * fp32, exist at a time, and the loss's gradient overwrites them in place
 * before the two products that consume it. The logits of a chunk come out
 * of cuBLASLt in fp32 even from bf16 inputs, so the softmax sees no bf16
 * rounding of the logits; in bf16 mode their gradient is rounded once to
 * feed the bf16 products.
 *
 * Chunking by tokens rather than by vocabulary columns needs no second
 * pass over the LM head (a vocabulary split must finish the log-sum-exp of
 * a row before any of its gradient exists, so it recomputes the logits);
 * the memory bound is the same: chunk * V floats. */
#include "kernels/cuda/common.cuh"

/* Hands out consecutive 256-byte-aligned slices of the caller's scratch;
 * with a NULL base it only measures (hxc_head_scratch_bytes). */
struct carve {
  char *base;
  size_t used;
};

static void *take(struct carve *c, size_t bytes) {
  void *at = c->base ? c->base + c->used : NULL;
  c->used += (bytes + 255) / 256 * 256;
  return at;
}

struct head_scratch {
  void *xn, *dxn;       /* [n, D] dt: normalised input and its gradient */
  float *rstd, *losses; /* [n]: 1/rms and each token's -log p(target) */
  float *logits;        /* [chunk, V] fp32 */
  void *dlogits_lp;     /* [chunk, V] bf16 (bf16 mode only) */
};

static long chunk_rows(long n, long chunk) {
  long c = chunk > 0 ? chunk : HXC_HEAD_CHUNK;
  return c < n ? c : n;
}

static struct head_scratch carve_head(struct carve *c, const struct hxk_dims *d,
                                      long n, long chunk, enum hxc_dtype dt) {
  struct head_scratch s;
  size_t es = hxc_dtype_bytes(dt), nd = (size_t)n * d->dim;
  size_t cv = (size_t)chunk_rows(n, chunk) * d->vocab;
  s.xn = take(c, nd * es);
  s.dxn = take(c, nd * es);
  s.rstd = (float *)take(c, (size_t)n * sizeof(float));
  s.losses = (float *)take(c, (size_t)n * sizeof(float));
  s.logits = (float *)take(c, cv * sizeof(float));
  s.dlogits_lp = dt == HXC_BF16 ? take(c, cv * es) : NULL;
  return s;
}

size_t hxc_head_scratch_bytes(const struct hxk_dims *d, long n, long chunk,
                              enum hxc_dtype dt) {
  struct carve c = {NULL, 0};
  carve_head(&c, d, n, chunk, dt);
  return c.used;
}

/* A block per row of a chunk (rows <= the chunk: far below gridDim.x's
 * limit); one block adds the losses. */
#define CE_THREADS 256
#define SUM_THREADS 1024
static struct hxc_launch_dims ce_launch(long rows) {
  return launch_dims((unsigned long)rows, 1, 1, CE_THREADS, 0, false);
}

/* Per token row of logits (one block per row):
 *   lse = max_j z_j + log sum_j e^(z_j - max);  loss = lse - z_target;
 * and, when `grad`, z_j := scale (e^(z_j - lse) - [j = target]) in place
 * (also rounded into a bf16 copy when grad_lp is not NULL). */
template <bool GRAD>
__global__ void cross_entropy_rows(float *logits, bf16 *grad_lp,
                                   const int32_t *targets, float *losses,
                                   int vocab, float scale) {
  __shared__ float red[32];
  long row = blockIdx.x;
  float *z = logits + row * vocab;
  float peak = -INFINITY;
  for (int j = threadIdx.x; j < vocab; j += blockDim.x)
    peak = max_nan(peak, z[j]);
  peak = block_max(peak, red);
  float sum = 0.0f;
  for (int j = threadIdx.x; j < vocab; j += blockDim.x)
    sum += expf(z[j] - peak);
  sum = block_sum(sum, red);
  float lse = peak + logf(sum);
  int tgt = targets[row];
  if (threadIdx.x == 0)
    losses[row] = lse - z[tgt];
  if (!GRAD)
    return;
  __syncthreads(); /* z[tgt] is read above before anyone overwrites it */
  for (int j = threadIdx.x; j < vocab; j += blockDim.x) {
    float gj = scale * expf(z[j] - lse) - (j == tgt ? scale : 0.0f);
    z[j] = gj;
    if (grad_lp)
      grad_lp[row * vocab + j] = __float2bfloat16_rn(gj);
  }
}

/* *loss += scale * sum_t losses[t], in double and a fixed order. */
__global__ void sum_losses(double *loss, const float *losses, long n,
                           double scale) {
  __shared__ double shared[SUM_THREADS];
  double sum = 0.0;
  for (long i = threadIdx.x; i < n; i += blockDim.x)
    sum += losses[i];
  shared[threadIdx.x] = sum;
  __syncthreads();
  for (unsigned half = blockDim.x / 2; half > 0; half >>= 1) {
    if (threadIdx.x < half)
      shared[threadIdx.x] += shared[threadIdx.x + half];
    __syncthreads();
  }
  if (threadIdx.x == 0)
    *loss += scale * shared[0];
}

void hxc_head_forward_backward(struct hxc_ctx *ctx, const struct hxk_dims *d,
                               const struct hxc_head_params *w,
                               const struct hxc_head_grads *g, const void *x,
                               const int32_t *targets, long n, double scale,
                               void *dx, double *loss, void *scratch,
                               long chunk, enum hxc_dtype dt,
                               cudaStream_t stream) {
  if (n <= 0)
    return;
  int D = d->dim, V = d->vocab;
  bool backward = g != NULL && dx != NULL;
  struct carve c = {(char *)scratch, 0};
  struct head_scratch s = carve_head(&c, d, n, chunk, dt);
  size_t es = hxc_dtype_bytes(dt);
  long rows_max = chunk_rows(n, chunk);
  hxc_rmsnorm_forward(s.xn, s.rstd, x, w->final_norm, n, D, d->norm_eps, dt,
                      stream);
  if (backward)
    HXC_CHECK(cudaMemsetAsync(s.dxn, 0, (size_t)n * D * es, stream));
  for (long t0 = 0; t0 < n; t0 += rows_max) {
    long rows = n - t0 < rows_max ? n - t0 : rows_max;
    const char *xc = (const char *)s.xn + (size_t)t0 * D * es;
    /* logits^T [V, rows] = W [V, D] (read transposed) x xn_c^T, fp32 out */
    struct hxc_gemm fwd = {true, false, V, rows, D, D, D, V, dt, HXC_FP32};
    hxc_gemm_run(ctx, &fwd, 1.0f, w->lm_head, xc, 0.0f, s.logits, stream);
    bf16 *lp = dt == HXC_BF16 ? (bf16 *)s.dlogits_lp : NULL;
    struct hxc_launch_dims lc = ce_launch(rows);
    if (backward)
      cross_entropy_rows<true><<<grid_of(lc), lc.threads, 0, stream>>>(
          s.logits, lp, targets + t0, s.losses + t0, V, (float)scale);
    else
      cross_entropy_rows<false><<<grid_of(lc), lc.threads, 0, stream>>>(
          s.logits, nullptr, targets + t0, s.losses + t0, V, (float)scale);
    HXC_LAUNCHED("cross_entropy_rows");
    if (!backward)
      continue;
    const void *dlogits = lp ? (const void *)lp : (const void *)s.logits;
    /* dxn_c += dlogits W;  dW += dlogits^T xn_c */
    hxc_linear_backward(ctx, (char *)s.dxn + (size_t)t0 * D * es, g->lm_head,
                        dlogits, xc, w->lm_head, rows, D, V, dt, stream);
  }
  sum_losses<<<1, SUM_THREADS, 0, stream>>>(loss, s.losses, n, scale);
  HXC_LAUNCHED("sum_losses");
  if (backward)
    hxc_rmsnorm_backward(ctx, dx, g->final_norm, s.dxn, x, w->final_norm,
                         s.rstd, n, D, dt, stream);
}

size_t hxc_head_ctx_scratch_bytes(const struct hxk_dims *d, long n) {
  return hxc_rmsnorm_backward_scratch(n, d->dim);
}

HXC_LAUNCHES(hxc_head_launches) {
  struct hxc_launch_dims c = ce_launch(chunk_rows(s->nseq * s->seq_len, 0));
  struct hxc_launch_dims l = launch_dims(1, 1, 1, SUM_THREADS, 0, false);
  fn(arg, "cross_entropy_rows", &c);
  fn(arg, "sum_losses", &l);
}
