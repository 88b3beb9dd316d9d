/* Linear layers on cuBLASLt (kernels/cpu/ops.c: hxk_linear_*), with the
 * algorithm of each matmul shape chosen once by cublasLtMatmulAlgoGetHeuristic
 * and cached in the context together with its descriptors.
 *
 * cuBLASLt is column-major; a row-major matrix M[r, c] is the column-major
 * M^T with leading dimension c, so a row-major product C = A B is computed
 * as the column-major C^T = B^T A^T (operands swapped). Accumulation and
 * scaling are fp32 (CUBLAS_COMPUTE_32F, never TF32): bf16 inputs give
 * bf16 x bf16 products summed in fp32; fp32 inputs are a plain SGEMM. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "kernels/cuda/common.cuh"

/* One cached shape: the key (the gemm and the operands' alignments, which
 * the heuristic's choice depends on) and what cuBLASLt needs to run it. */
struct hxc_algo_entry {
  struct hxc_gemm key;
  unsigned align_a, align_b, align_c; /* bytes, powers of two up to 256 */
  cublasLtMatmulDesc_t op;
  cublasLtMatrixLayout_t la, lb, lc;
  cublasLtMatmulAlgo_t algo;
};

static cudaDataType_t cuda_type(enum hxc_dtype dt) {
  return dt == HXC_BF16 ? CUDA_R_16BF : CUDA_R_32F;
}

/* Largest power of two, at most 256, dividing the address. */
static unsigned alignment_of(const void *p) {
  uintptr_t a = (uintptr_t)p;
  unsigned align = 256;
  while (align > 1 && a % align != 0)
    align >>= 1;
  return align;
}

static bool same_gemm(const struct hxc_gemm *a, const struct hxc_gemm *b) {
  return a->trans_a == b->trans_a && a->trans_b == b->trans_b &&
         a->m == b->m && a->n == b->n && a->k == b->k && a->lda == b->lda &&
         a->ldb == b->ldb && a->ldc == b->ldc && a->ab == b->ab &&
         a->cd == b->cd;
}

void hxc_algos_free(struct hxc_ctx *ctx) {
  for (int i = 0; i < ctx->nalgos; i++) {
    struct hxc_algo_entry *e = &ctx->algos[i];
    HXC_CHECK(cublasLtMatrixLayoutDestroy(e->la));
    HXC_CHECK(cublasLtMatrixLayoutDestroy(e->lb));
    HXC_CHECK(cublasLtMatrixLayoutDestroy(e->lc));
    HXC_CHECK(cublasLtMatmulDescDestroy(e->op));
  }
  free(ctx->algos);
  ctx->algos = NULL;
  ctx->nalgos = ctx->cap_algos = 0;
}

int hxc_ctx_cached_algos(const struct hxc_ctx *ctx) { return ctx->nalgos; }

static void make_descriptors(struct hxc_algo_entry *e) {
  const struct hxc_gemm *g = &e->key;
  HXC_CHECK(cublasLtMatmulDescCreate(&e->op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  cublasOperation_t ta = g->trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  cublasOperation_t tb = g->trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  HXC_CHECK(cublasLtMatmulDescSetAttribute(e->op, CUBLASLT_MATMUL_DESC_TRANSA,
                                           &ta, sizeof ta));
  HXC_CHECK(cublasLtMatmulDescSetAttribute(e->op, CUBLASLT_MATMUL_DESC_TRANSB,
                                           &tb, sizeof tb));
  /* Layouts describe the operands as stored (before op()). */
  uint64_t a_rows = g->trans_a ? g->k : g->m, a_cols = g->trans_a ? g->m : g->k;
  uint64_t b_rows = g->trans_b ? g->n : g->k, b_cols = g->trans_b ? g->k : g->n;
  HXC_CHECK(cublasLtMatrixLayoutCreate(&e->la, cuda_type(g->ab), a_rows,
                                       a_cols, g->lda));
  HXC_CHECK(cublasLtMatrixLayoutCreate(&e->lb, cuda_type(g->ab), b_rows,
                                       b_cols, g->ldb));
  HXC_CHECK(cublasLtMatrixLayoutCreate(&e->lc, cuda_type(g->cd),
                                       (uint64_t)g->m, (uint64_t)g->n, g->ldc));
}

/* The heuristic's best algorithm within the context's workspace and the
 * operands' alignments (false when it has none). With `fp32_sums`, split-K
 * algorithms that keep their partial sums in the output type are left out:
 * for a bf16 output those would round every partial to bf16. */
static bool heuristic(struct hxc_ctx *ctx, struct hxc_algo_entry *e,
                      bool fp32_sums, cublasLtMatmulHeuristicResult_t *result) {
  cublasLtMatmulPreference_t pref;
  HXC_CHECK(cublasLtMatmulPreferenceCreate(&pref));
  uint64_t ws = ctx->workspace_bytes;
  uint32_t al[3] = {e->align_a, e->align_b, e->align_c};
  uint32_t schemes = CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE;
  if (fp32_sums)
    HXC_CHECK(cublasLtMatmulPreferenceSetAttribute(
        pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, &schemes,
        sizeof schemes));
  HXC_CHECK(cublasLtMatmulPreferenceSetAttribute(
      pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws));
  HXC_CHECK(cublasLtMatmulPreferenceSetAttribute(
      pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &al[0], sizeof al[0]));
  HXC_CHECK(cublasLtMatmulPreferenceSetAttribute(
      pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &al[1], sizeof al[1]));
  HXC_CHECK(cublasLtMatmulPreferenceSetAttribute(
      pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &al[2], sizeof al[2]));
  HXC_CHECK(cublasLtMatmulPreferenceSetAttribute(
      pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &al[2], sizeof al[2]));
  int found = 0;
  HXC_CHECK(cublasLtMatmulAlgoGetHeuristic(ctx->lt, e->op, e->la, e->lb,
                                           e->lc, e->lc, pref, 1, result,
                                           &found));
  HXC_CHECK(cublasLtMatmulPreferenceDestroy(pref));
  return found >= 1 && result->state == CUBLAS_STATUS_SUCCESS;
}

/* The algorithm of a new cache entry: fp32 partial sums when the output is
 * bf16 and such an algorithm exists; a shape with none is a fatal error. */
static void choose_algorithm(struct hxc_ctx *ctx, struct hxc_algo_entry *e) {
  cublasLtMatmulHeuristicResult_t result;
  bool ok = (e->key.cd == HXC_BF16 && heuristic(ctx, e, true, &result)) ||
            heuristic(ctx, e, false, &result);
  if (!ok) {
    char what[256];
    const struct hxc_gemm *g = &e->key;
    snprintf(what, sizeof what,
             "no algorithm for m=%ld n=%ld k=%ld op(A)=%c op(B)=%c %s",
             g->m, g->n, g->k, g->trans_a ? 'T' : 'N', g->trans_b ? 'T' : 'N',
             g->ab == HXC_BF16 ? "bf16" : "fp32");
    hxc_fail("cublasLtMatmulAlgoGetHeuristic", what, __FILE__, __LINE__);
  }
  e->algo = result.algo;
}

/* The cached entry of this shape and alignment, made on first use. */
static struct hxc_algo_entry *lookup(struct hxc_ctx *ctx,
                                     const struct hxc_gemm *g, unsigned aa,
                                     unsigned ab, unsigned ac) {
  for (int i = 0; i < ctx->nalgos; i++) {
    struct hxc_algo_entry *e = &ctx->algos[i];
    if (same_gemm(&e->key, g) && e->align_a == aa && e->align_b == ab &&
        e->align_c == ac)
      return e;
  }
  if (ctx->nalgos == ctx->cap_algos) {
    int cap = ctx->cap_algos ? 2 * ctx->cap_algos : 16;
    void *grown = realloc(ctx->algos, (size_t)cap * sizeof *ctx->algos);
    if (!grown)
      hxc_fail("realloc(algorithm cache)", "out of host memory", __FILE__,
               __LINE__);
    ctx->algos = (struct hxc_algo_entry *)grown;
    ctx->cap_algos = cap;
  }
  struct hxc_algo_entry *e = &ctx->algos[ctx->nalgos];
  e->key = *g;
  e->align_a = aa;
  e->align_b = ab;
  e->align_c = ac;
  make_descriptors(e);
  choose_algorithm(ctx, e);
  ctx->nalgos++; /* only once complete: a failure above never leaves half an entry */
  return e;
}

void hxc_gemm_run(struct hxc_ctx *ctx, const struct hxc_gemm *g, float alpha,
                  const void *a, const void *b, float beta, void *c,
                  cudaStream_t stream) {
  if (g->m <= 0 || g->n <= 0)
    return;
  struct hxc_algo_entry *e =
      lookup(ctx, g, alignment_of(a), alignment_of(b), alignment_of(c));
  HXC_CHECK(cublasLtMatmul(ctx->lt, e->op, &alpha, a, e->la, b, e->lb, &beta,
                           c, e->lc, c, e->lc, &e->algo, ctx->workspace,
                           ctx->workspace_bytes, stream));
}

/* y[n, out] = x[n, in] W^T + beta y:  y^T = op_T(W^T) x^T, i.e. m = out,
 * n = tokens, k = in; W read transposed from its row-major [out, in]. */
void hxc_linear_forward(struct hxc_ctx *ctx, void *y, const void *x,
                        const void *w, long n, int in, int out, float beta,
                        enum hxc_dtype dt, cudaStream_t stream) {
  struct hxc_gemm g = {true, false, out, n, in, in, in, out, dt, dt};
  hxc_gemm_run(ctx, &g, 1.0f, w, x, beta, y, stream);
}

/* dx[n, in] += dy[n, out] W[out, in]:  dx^T = W^T dy^T (m = in, k = out).
 * dW[out, in] += dy^T x:  dW^T = x^T dy (m = in, n = out, k = tokens), dy
 * read transposed; the result is fp32 whatever the inputs. */
void hxc_linear_backward(struct hxc_ctx *ctx, void *dx, float *dw,
                         const void *dy, const void *x, const void *w, long n,
                         int in, int out, enum hxc_dtype dt,
                         cudaStream_t stream) {
  hxc_linear_backward_beta(ctx, dx, 1.0f, dw, dy, x, w, n, in, out, dt,
                           stream);
}

/* The same with dx = dy W + dx_beta dx: 0 for a buffer's first write, which
 * then needs no zeroing (and reads nothing of dx). */
void hxc_linear_backward_beta(struct hxc_ctx *ctx, void *dx, float dx_beta,
                              float *dw, const void *dy, const void *x,
                              const void *w, long n, int in, int out,
                              enum hxc_dtype dt, cudaStream_t stream) {
  if (dx) {
    struct hxc_gemm gx = {false, false, in, n, out, in, out, in, dt, dt};
    hxc_gemm_run(ctx, &gx, 1.0f, w, dy, dx_beta, dx, stream);
  }
  if (n <= 0)
    return;
  struct hxc_gemm gw = {false, true, in, out, n, in, out, in, dt, HXC_FP32};
  hxc_gemm_run(ctx, &gw, 1.0f, x, dy, 1.0f, dw, stream);
}
