/* cuDNN's fused attention (cuDNN 9's graph API in C), the other
 * implementation of hxc_attention_forward / _backward that a plan compiled
 * with --cuda-attention=cudnn builds in (the generated Makefile's
 * ATTENTION=cudnn: -DHEXIC_ATTENTION_CUDNN, -lcudnn). hexic's own kernel
 * stays the reference the checks hold both to (tests/gpu/check_kernels.cu's
 * cudnn group); which is faster is the bench's to say (gpu_bench's
 * "attention cudnn" rows), so hexic's stays the default.
 *
 * The graphs are the ones cuDNN recognises as its fused flash attention:
 * cudnn-frontend's "composite" SDPA (what it builds for a causal mask before
 * cuDNN 9.21's single SDPA operation), written out in backend descriptors.
 * Per sequence b and query head h (kv head h / (nq / nkv)), scale
 * c = 1/sqrt(hd), causal top-left (key u <= query t):
 *   forward   S = c Q K^T, masked -inf where u > t; M = rowmax S;
 *             E = exp(S - M); Z = rowsum E; stats = M + log Z;
 *             O = (E / Z) V                      (P = E / Z rounded to bf16)
 *   backward  D = rowsum(dO * O); P = exp(c Q K^T - stats) masked;
 *             dV = P^T dO (summed over a kv head's query heads);
 *             dS = c P (dO V^T - D); dK = dS^T Q; dQ = dS K (fp32 accumulator,
 *             then bf16)
 * the math of hxc_attention_* (llama_cuda.h) with its lse as stats. Tensors
 * keep hexic's token-major layout through strides (rt_cudnn_token_view); the
 * stats are cuDNN's head-major [b, nq, T] (the same count of floats as
 * hexic's lse [n, nq]). Plans are built once per shape (a heuristics query,
 * then the first engine configuration that finalizes) and cached; one
 * workspace serves every plan and the backward's two fp32 buffers.
 *
 * Unmeasured: no GPU has run this yet. tests/gpu/run.sh's kernels row runs
 * the cudnn check group against the CPU reference and hexic's kernel, and
 * its throughput row prints cuDNN's TFLOP/s beside hexic's. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "rtlib/cuda/cuda_backend.h"

/* ---- pure rules (no cuDNN, no CUDA) ---- */

bool rt_cudnn_attention_refuses(const struct rt_cudnn_attn_shape *s, char *why, size_t why_size) {
  if (!s->bf16) {
    snprintf(why, why_size, "cuDNN's fused attention takes bf16 only (this run is fp32)");
    return true;
  }
  /* hd and group too: a head dim of 0 or -8 passes the multiple-of-8 test
   * below, and the head map divides by group */
  if (s->nseq <= 0 || s->seq_len <= 0 || s->nq <= 0 || s->nkv <= 0 || s->hd <= 0 ||
      s->group <= 0) {
    snprintf(why, why_size,
             "an empty shape (%ld sequences of %d tokens, %d/%d heads of %d, groups of %d)",
             s->nseq, s->seq_len, s->nq, s->nkv, s->hd, s->group);
    return true;
  }
  if (s->hd % 8 != 0 || s->hd > 128) {
    snprintf(why, why_size,
             "cuDNN's fused attention takes head dims that are multiples of 8 up to 128, not %d",
             s->hd);
    return true;
  }
  if (s->nq % s->nkv != 0) {
    snprintf(why, why_size, "%d query heads over %d kv heads: cuDNN needs a whole group each",
             s->nq, s->nkv);
    return true;
  }
  int per_kv = s->nq / s->nkv;
  for (int i = 0; i < s->nq; i++) {
    int hexic_kv = (s->q_begin + i) / s->group - s->kv_begin;
    if (hexic_kv != i / per_kv) {
      snprintf(why, why_size,
               "query head %d of this shard reads kv head %d, where cuDNN's GQA reads %d (a TP "
               "shard that cuts a group of %d query heads)",
               i, hexic_kv, i / per_kv, s->group);
      return true;
    }
  }
  return false;
}

bool rt_cudnn_version_refuses(long version, const struct rt_cudnn_attn_shape *s, char *why,
                              size_t why_size) {
  if (version < 90000) {
    snprintf(why, why_size, "cuDNN %ld: the graphs are written for cuDNN 9", version);
    return true;
  }
  if (version == 91000 || version == 91001) {
    snprintf(why, why_size,
             "cuDNN %ld.%ld.%ld's attention backward has known bugs (fixed in 9.10.2)",
             version / 10000, version / 100 % 100, version % 100);
    return true;
  }
  if (s->seq_len == 1) {
    snprintf(why, why_size, "sequences of one token (cuDNN takes s_q = s_kv = 1 in no engine)");
    return true;
  }
  if (version <= 91500 && s->seq_len % 128 != 0) {
    snprintf(why, why_size,
             "cuDNN %ld.%ld.%ld's backward needs the sequence length a multiple of 128 without a "
             "padding mask (this graph has none), not %d; 9.15.1 or later takes it",
             version / 10000, version / 100 % 100, version % 100, s->seq_len);
    return true;
  }
  return false;
}

void rt_cudnn_token_view(long nseq, int seq_len, int heads, int hd, bool transposed,
                         int64_t dims[4], int64_t strides[4]) {
  int64_t row = (int64_t)heads * hd; /* one token's elements */
  dims[0] = nseq, strides[0] = (int64_t)seq_len * row;
  dims[1] = heads, strides[1] = hd;
  int s = transposed ? 3 : 2, d = transposed ? 2 : 3;
  dims[s] = seq_len, strides[s] = row;
  dims[d] = hd, strides[d] = 1;
}

void rt_cudnn_stats_view(long nseq, int seq_len, int nq, int64_t dims[4], int64_t strides[4]) {
  dims[0] = nseq, dims[1] = nq, dims[2] = seq_len, dims[3] = 1;
  strides[0] = (int64_t)nq * seq_len, strides[1] = seq_len, strides[2] = 1, strides[3] = 1;
}

bool rt_cudnn_same_plan(const struct rt_cudnn_attn_shape *a, const struct rt_cudnn_attn_shape *b) {
  return a->nseq == b->nseq && a->seq_len == b->seq_len && a->nq == b->nq && a->nkv == b->nkv &&
         a->hd == b->hd && a->q_begin == b->q_begin && a->group == b->group &&
         a->kv_begin == b->kv_begin && a->bf16 == b->bf16;
}

static size_t round256(size_t n) { return (n + 255) / 256 * 256; }

size_t rt_cudnn_backward_extra_bytes(const struct rt_cudnn_attn_shape *s) {
  size_t rows = (size_t)s->nseq * s->nq * s->seq_len;
  return round256(rows * s->hd * sizeof(float)) + round256(rows * sizeof(float));
}

#ifndef HEXIC_ATTENTION_CUDNN

bool rt_cudnn_attention_describe(const struct rt_cudnn_attn_shape *s, int *forward_ops,
                                 int *backward_ops, char *why, size_t why_size) {
  (void)s;
  *forward_ops = *backward_ops = 0;
  snprintf(why, why_size, "built without cuDNN (-DHEXIC_ATTENTION_CUDNN)");
  return false;
}

#else /* HEXIC_ATTENTION_CUDNN */

#include <float.h>
#include <math.h>
#include <stdlib.h>

#include <cuda_runtime_api.h>
#include <cudnn.h>

#include "kernels/cuda/cuda_check.h"

/* ---- checked calls ----
 * Two ways to fail: at run time every failure is fatal (hxc_fail: the
 * kernels' handler, which the runtime turns into its rank's verdict); while
 * describing graphs without a GPU the first failure is returned as text. */
struct failure {
  bool soft; /* record instead of ending the process */
  bool failed;
  char text[1024];
};

static void fail_call(struct failure *f, const char *call, cudnnStatus_t st, const char *file,
                      int line) {
  char detail[256] = "";
  cudnnGetLastErrorString(detail, sizeof detail);
  char error[512];
  snprintf(error, sizeof error, "%s%s%s", cudnnGetErrorString(st), detail[0] ? ": " : "", detail);
  if (f && f->soft) {
    if (!f->failed)
      snprintf(f->text, sizeof f->text, "%s failed: %s", call, error);
    f->failed = true;
    return;
  }
  hxc_fail(call, error, file, line);
}

static bool failed_before(const struct failure *f) { return f && f->failed; }

/* Runs call unless an earlier one failed softly; checks its status. */
#define DNN(f, call)                                                                               \
  do {                                                                                             \
    if (!failed_before(f)) {                                                                       \
      cudnnStatus_t st_ = (call);                                                                  \
      if (st_ != CUDNN_STATUS_SUCCESS)                                                             \
        fail_call((f), #call, st_, __FILE__, __LINE__);                                            \
    }                                                                                              \
  } while (0)

/* ---- graph building ----
 * A graph owns every descriptor it creates (destroyed together). Tensors
 * are named by unique ids: the fixed ones below are the variant pack's,
 * virtual tensors count up from VIRTUAL_UID. */
enum {
  UID_Q = 1,
  UID_K,
  UID_V,
  UID_O,
  UID_STATS,
  UID_SCALE,
  UID_DO,
  UID_DQ,
  UID_DK,
  UID_DV,
  UID_DQ_ACCUM,
  UID_ROW_SUM,
  UID_NEG_INF,
  UID_ONE,
  VIRTUAL_UID = 100,
  MAX_DESCS = 192,
  MAX_OPS = 48,
};

struct graph {
  struct failure *f;
  cudnnBackendDescriptor_t descs[MAX_DESCS];
  int ndescs;
  cudnnBackendDescriptor_t ops[MAX_OPS];
  int nops;
  int64_t next_uid;
};

static cudnnBackendDescriptor_t create(struct graph *g, cudnnBackendDescriptorType_t type) {
  cudnnBackendDescriptor_t d = NULL;
  if (g->ndescs == MAX_DESCS) {
    /* a bug in this file, not the user's: the graphs are fixed */
    hxc_fail("attention_cudnn: create", "more descriptors than MAX_DESCS", __FILE__, __LINE__);
  }
  DNN(g->f, cudnnBackendCreateDescriptor(type, &d));
  if (d)
    g->descs[g->ndescs++] = d;
  return d;
}

static void set(struct graph *g, cudnnBackendDescriptor_t d, cudnnBackendAttributeName_t name,
                cudnnBackendAttributeType_t type, int64_t count, const void *values) {
  DNN(g->f, cudnnBackendSetAttribute(d, name, type, count, values));
}

static void set_desc(struct graph *g, cudnnBackendDescriptor_t d, cudnnBackendAttributeName_t name,
                     cudnnBackendDescriptor_t value) {
  set(g, d, name, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &value);
}

static void finalize(struct graph *g, cudnnBackendDescriptor_t d) {
  DNN(g->f, cudnnBackendFinalize(d));
}

static void add_op(struct graph *g, cudnnBackendDescriptor_t op) {
  finalize(g, op);
  if (g->nops == MAX_OPS)
    hxc_fail("attention_cudnn: add_op", "more operations than MAX_OPS", __FILE__, __LINE__);
  g->ops[g->nops++] = op;
}

static void graph_free(struct graph *g) {
  for (int i = g->ndescs - 1; i >= 0; i--)
    cudnnBackendDestroyDescriptor(g->descs[i]); /* teardown: nothing to do on failure */
  g->ndescs = g->nops = 0;
}

enum tensor_kind { REAL, VIRTUAL, BY_VALUE };

static cudnnBackendDescriptor_t tensor(struct graph *g, int64_t uid, cudnnDataType_t type,
                                       const int64_t dims[4], const int64_t strides[4],
                                       enum tensor_kind kind) {
  cudnnBackendDescriptor_t t = create(g, CUDNN_BACKEND_TENSOR_DESCRIPTOR);
  int64_t id = kind == VIRTUAL ? g->next_uid++ : uid, alignment = 16;
  set(g, t, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &type);
  set(g, t, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, dims);
  set(g, t, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, strides);
  set(g, t, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &id);
  set(g, t, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &alignment);
  bool yes = true;
  if (kind == VIRTUAL)
    set(g, t, CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, 1, &yes);
  if (kind == BY_VALUE)
    set(g, t, CUDNN_ATTR_TENSOR_IS_BY_VALUE, CUDNN_TYPE_BOOLEAN, 1, &yes);
  finalize(g, t);
  return t;
}

/* A scalar passed by value (its value rides in the variant pack). */
static cudnnBackendDescriptor_t scalar(struct graph *g, int64_t uid) {
  static const int64_t one[4] = {1, 1, 1, 1};
  return tensor(g, uid, CUDNN_DATA_FLOAT, one, one, BY_VALUE);
}

/* The shapes every graph's virtual tensors take. */
struct views {
  int64_t scores[4], scores_st[4]; /* [b, nq, T, T] row-major */
  int64_t scores_t_st[4];          /* the same dims read transposed */
  int64_t rows[4], rows_st[4];     /* [b, nq, T, 1] */
  int64_t q[4], q_st[4];           /* hexic's q, o, dq, dout */
  int64_t kv[4], kv_st[4];         /* hexic's k, v, dk, dv */
  int64_t kv_t[4], kv_t_st[4];     /* their per-head transposes */
  int64_t full[4], full_st[4];     /* [b, nq, T, hd] head-major */
};

static void views_of(const struct rt_cudnn_attn_shape *s, struct views *v) {
  int64_t b = s->nseq, h = s->nq, t = s->seq_len, d = s->hd;
  int64_t sc[4] = {b, h, t, t}, sc_st[4] = {h * t * t, t * t, t, 1},
          sc_t_st[4] = {h * t * t, t * t, 1, t};
  memcpy(v->scores, sc, sizeof sc), memcpy(v->scores_st, sc_st, sizeof sc_st);
  memcpy(v->scores_t_st, sc_t_st, sizeof sc_t_st);
  rt_cudnn_stats_view(s->nseq, s->seq_len, s->nq, v->rows, v->rows_st);
  rt_cudnn_token_view(s->nseq, s->seq_len, s->nq, s->hd, false, v->q, v->q_st);
  rt_cudnn_token_view(s->nseq, s->seq_len, s->nkv, s->hd, false, v->kv, v->kv_st);
  rt_cudnn_token_view(s->nseq, s->seq_len, s->nkv, s->hd, true, v->kv_t, v->kv_t_st);
  int64_t full[4] = {b, h, t, d}, full_st[4] = {h * t * d, t * d, d, 1};
  memcpy(v->full, full, sizeof full), memcpy(v->full_st, full_st, sizeof full_st);
}

/* Virtual fp32 tensors of the two recurring shapes. */
static cudnnBackendDescriptor_t scores(struct graph *g, const struct views *v,
                                       cudnnDataType_t type) {
  return tensor(g, 0, type, v->scores, v->scores_st, VIRTUAL);
}
static cudnnBackendDescriptor_t rows(struct graph *g, const struct views *v) {
  return tensor(g, 0, CUDNN_DATA_FLOAT, v->rows, v->rows_st, VIRTUAL);
}

/* y = mode(x[, b[, t]]), computed in `prec`; gen-index takes an axis. */
static void pointwise(struct graph *g, cudnnPointwiseMode_t mode, cudnnDataType_t prec,
                      cudnnBackendDescriptor_t x, cudnnBackendDescriptor_t b,
                      cudnnBackendDescriptor_t t, cudnnBackendDescriptor_t y, int64_t axis) {
  cudnnBackendDescriptor_t pw = create(g, CUDNN_BACKEND_POINTWISE_DESCRIPTOR);
  set(g, pw, CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &mode);
  set(g, pw, CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &prec);
  if (mode == CUDNN_POINTWISE_GEN_INDEX)
    set(g, pw, CUDNN_ATTR_POINTWISE_AXIS, CUDNN_TYPE_INT64, 1, &axis);
  finalize(g, pw);
  cudnnBackendDescriptor_t op = create(g, CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR);
  set_desc(g, op, CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, pw);
  set_desc(g, op, CUDNN_ATTR_OPERATION_POINTWISE_XDESC, x);
  if (b)
    set_desc(g, op, CUDNN_ATTR_OPERATION_POINTWISE_BDESC, b);
  if (t)
    set_desc(g, op, CUDNN_ATTR_OPERATION_POINTWISE_TDESC, t);
  set_desc(g, op, CUDNN_ATTR_OPERATION_POINTWISE_YDESC, y);
  float one = 1.0f;
  set(g, op, CUDNN_ATTR_OPERATION_POINTWISE_ALPHA1, CUDNN_TYPE_FLOAT, 1, &one);
  set(g, op, CUDNN_ATTR_OPERATION_POINTWISE_ALPHA2, CUDNN_TYPE_FLOAT, 1, &one);
  add_op(g, op);
}

static void unary(struct graph *g, cudnnPointwiseMode_t mode, cudnnBackendDescriptor_t x,
                  cudnnBackendDescriptor_t y) {
  pointwise(g, mode, CUDNN_DATA_FLOAT, x, NULL, NULL, y, 0);
}
static void binary(struct graph *g, cudnnPointwiseMode_t mode, cudnnBackendDescriptor_t x,
                   cudnnBackendDescriptor_t b, cudnnBackendDescriptor_t y) {
  pointwise(g, mode, CUDNN_DATA_FLOAT, x, b, NULL, y, 0);
}

/* c = a b over the last two dims (batch dims broadcast: GQA's kv heads),
 * fp32 accumulation. */
static void matmul(struct graph *g, cudnnBackendDescriptor_t a, cudnnBackendDescriptor_t b,
                   cudnnBackendDescriptor_t c) {
  cudnnBackendDescriptor_t mm = create(g, CUDNN_BACKEND_MATMUL_DESCRIPTOR);
  cudnnDataType_t comp = CUDNN_DATA_FLOAT;
  set(g, mm, CUDNN_ATTR_MATMUL_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &comp);
  finalize(g, mm);
  cudnnBackendDescriptor_t op = create(g, CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR);
  set_desc(g, op, CUDNN_ATTR_OPERATION_MATMUL_ADESC, a);
  set_desc(g, op, CUDNN_ATTR_OPERATION_MATMUL_BDESC, b);
  set_desc(g, op, CUDNN_ATTR_OPERATION_MATMUL_CDESC, c);
  set_desc(g, op, CUDNN_ATTR_OPERATION_MATMUL_DESC, mm);
  add_op(g, op);
}

/* y = reduce(x) over the dims where y has 1 (or, for GQA's kv heads, fewer). */
static void reduction(struct graph *g, cudnnReduceTensorOp_t how, cudnnBackendDescriptor_t x,
                      cudnnBackendDescriptor_t y) {
  cudnnBackendDescriptor_t red = create(g, CUDNN_BACKEND_REDUCTION_DESCRIPTOR);
  cudnnDataType_t comp = CUDNN_DATA_FLOAT;
  set(g, red, CUDNN_ATTR_REDUCTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &comp);
  set(g, red, CUDNN_ATTR_REDUCTION_OPERATOR, CUDNN_TYPE_REDUCTION_OPERATOR_TYPE, 1, &how);
  finalize(g, red);
  cudnnBackendDescriptor_t op = create(g, CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR);
  set_desc(g, op, CUDNN_ATTR_OPERATION_REDUCTION_XDESC, x);
  set_desc(g, op, CUDNN_ATTR_OPERATION_REDUCTION_YDESC, y);
  set_desc(g, op, CUDNN_ATTR_OPERATION_REDUCTION_DESC, red);
  add_op(g, op);
}

/* y: x's elements seen through y's dims and strides (a transpose). */
static void reshape(struct graph *g, cudnnBackendDescriptor_t x, cudnnBackendDescriptor_t y) {
  cudnnBackendDescriptor_t op = create(g, CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR);
  set_desc(g, op, CUDNN_ATTR_OPERATION_RESHAPE_XDESC, x);
  set_desc(g, op, CUDNN_ATTR_OPERATION_RESHAPE_YDESC, y);
  add_op(g, op);
}

/* The causal mask on the scores x: y = (row >= column) ? x : -inf, as
 * cudnn-frontend's top-left diagonal band with right bound 0. */
static cudnnBackendDescriptor_t causal_mask(struct graph *g, const struct views *v,
                                            cudnnBackendDescriptor_t x,
                                            cudnnBackendDescriptor_t neg_inf) {
  cudnnBackendDescriptor_t row = scores(g, v, CUDNN_DATA_INT32);
  cudnnBackendDescriptor_t col = scores(g, v, CUDNN_DATA_INT32);
  cudnnBackendDescriptor_t keep = scores(g, v, CUDNN_DATA_BOOLEAN);
  cudnnBackendDescriptor_t y = scores(g, v, CUDNN_DATA_FLOAT);
  pointwise(g, CUDNN_POINTWISE_GEN_INDEX, CUDNN_DATA_FLOAT, x, NULL, NULL, row, 2);
  pointwise(g, CUDNN_POINTWISE_GEN_INDEX, CUDNN_DATA_FLOAT, x, NULL, NULL, col, 3);
  pointwise(g, CUDNN_POINTWISE_CMP_GE, CUDNN_DATA_BOOLEAN, row, col, NULL, keep, 0);
  pointwise(g, CUDNN_POINTWISE_BINARY_SELECT, CUDNN_DATA_FLOAT, x, neg_inf, keep, y, 0);
  return y;
}

/* The forward: Q, K^T, V, O, stats, with the scale and -inf by value. */
static void build_forward(struct graph *g, const struct rt_cudnn_attn_shape *s) {
  struct views v;
  views_of(s, &v);
  cudnnDataType_t io = CUDNN_DATA_BFLOAT16;
  cudnnBackendDescriptor_t q = tensor(g, UID_Q, io, v.q, v.q_st, REAL);
  cudnnBackendDescriptor_t kt = tensor(g, UID_K, io, v.kv_t, v.kv_t_st, REAL);
  cudnnBackendDescriptor_t val = tensor(g, UID_V, io, v.kv, v.kv_st, REAL);
  cudnnBackendDescriptor_t o = tensor(g, UID_O, io, v.q, v.q_st, REAL);
  cudnnBackendDescriptor_t stats = tensor(g, UID_STATS, CUDNN_DATA_FLOAT, v.rows, v.rows_st, REAL);
  cudnnBackendDescriptor_t scale = scalar(g, UID_SCALE), neg_inf = scalar(g, UID_NEG_INF);

  cudnnBackendDescriptor_t qk = scores(g, &v, CUDNN_DATA_FLOAT);
  matmul(g, q, kt, qk);
  cudnnBackendDescriptor_t scaled = scores(g, &v, CUDNN_DATA_FLOAT);
  binary(g, CUDNN_POINTWISE_MUL, qk, scale, scaled);
  cudnnBackendDescriptor_t masked = causal_mask(g, &v, scaled, neg_inf);
  /* softmax with its statistics */
  cudnnBackendDescriptor_t max = rows(g, &v);
  reduction(g, CUDNN_REDUCE_TENSOR_MAX, masked, max);
  cudnnBackendDescriptor_t shifted = scores(g, &v, CUDNN_DATA_FLOAT);
  binary(g, CUDNN_POINTWISE_SUB, masked, max, shifted);
  cudnnBackendDescriptor_t e = scores(g, &v, CUDNN_DATA_FLOAT);
  unary(g, CUDNN_POINTWISE_EXP, shifted, e);
  cudnnBackendDescriptor_t z = rows(g, &v);
  reduction(g, CUDNN_REDUCE_TENSOR_ADD, e, z);
  cudnnBackendDescriptor_t log_z = rows(g, &v);
  unary(g, CUDNN_POINTWISE_LOG, z, log_z);
  binary(g, CUDNN_POINTWISE_ADD, max, log_z, stats);
  /* P in the inputs' type, as the second product reads it */
  cudnnBackendDescriptor_t p = scores(g, &v, io);
  binary(g, CUDNN_POINTWISE_DIV, e, z, p);
  matmul(g, p, val, o);
}

/* dK or dV from the transposed scores-shaped a and the head-major b: one
 * product per query head, summed over each kv head's group (GQA). */
static void grad_kv(struct graph *g, const struct rt_cudnn_attn_shape *s, const struct views *v,
                    cudnnBackendDescriptor_t a_t, cudnnBackendDescriptor_t b,
                    cudnnBackendDescriptor_t out) {
  if (s->nq == s->nkv) {
    matmul(g, a_t, b, out);
    return;
  }
  cudnnBackendDescriptor_t per_q = tensor(g, 0, CUDNN_DATA_BFLOAT16, v->full, v->full_st, VIRTUAL);
  matmul(g, a_t, b, per_q);
  reduction(g, CUDNN_REDUCE_TENSOR_ADD, per_q, out);
}

/* The backward: dO, O, stats and the forward's inputs to dQ, dK, dV, with
 * two fp32 buffers of its own (the row sums D and the dQ accumulator). */
static void build_backward(struct graph *g, const struct rt_cudnn_attn_shape *s) {
  struct views v;
  views_of(s, &v);
  cudnnDataType_t io = CUDNN_DATA_BFLOAT16, f32 = CUDNN_DATA_FLOAT;
  cudnnBackendDescriptor_t q = tensor(g, UID_Q, io, v.q, v.q_st, REAL);
  cudnnBackendDescriptor_t kt = tensor(g, UID_K, io, v.kv_t, v.kv_t_st, REAL);
  cudnnBackendDescriptor_t vt = tensor(g, UID_V, io, v.kv_t, v.kv_t_st, REAL);
  cudnnBackendDescriptor_t o = tensor(g, UID_O, io, v.q, v.q_st, REAL);
  cudnnBackendDescriptor_t dout = tensor(g, UID_DO, io, v.q, v.q_st, REAL);
  cudnnBackendDescriptor_t stats = tensor(g, UID_STATS, f32, v.rows, v.rows_st, REAL);
  cudnnBackendDescriptor_t dq = tensor(g, UID_DQ, io, v.q, v.q_st, REAL);
  cudnnBackendDescriptor_t dk = tensor(g, UID_DK, io, v.kv, v.kv_st, REAL);
  cudnnBackendDescriptor_t dv = tensor(g, UID_DV, io, v.kv, v.kv_st, REAL);
  cudnnBackendDescriptor_t row_sum = tensor(g, UID_ROW_SUM, f32, v.rows, v.rows_st, REAL);
  cudnnBackendDescriptor_t dq_accum = tensor(g, UID_DQ_ACCUM, f32, v.full, v.full_st, REAL);
  cudnnBackendDescriptor_t scale = scalar(g, UID_SCALE), neg_inf = scalar(g, UID_NEG_INF),
                           one = scalar(g, UID_ONE);

  /* D = rowsum(dO * O) (times 1: cudnn-frontend's dropout-free graph) */
  cudnnBackendDescriptor_t doo = tensor(g, 0, f32, v.q, v.q_st, VIRTUAL);
  binary(g, CUDNN_POINTWISE_MUL, dout, o, doo);
  cudnnBackendDescriptor_t d_sum = rows(g, &v);
  reduction(g, CUDNN_REDUCE_TENSOR_ADD, doo, d_sum);
  binary(g, CUDNN_POINTWISE_MUL, d_sum, one, row_sum);
  /* P = exp(c Q K^T - stats), masked */
  cudnnBackendDescriptor_t qk = scores(g, &v, f32);
  matmul(g, q, kt, qk);
  cudnnBackendDescriptor_t scaled = scores(g, &v, f32);
  binary(g, CUDNN_POINTWISE_MUL, qk, scale, scaled);
  cudnnBackendDescriptor_t shifted = scores(g, &v, f32);
  binary(g, CUDNN_POINTWISE_SUB, scaled, stats, shifted);
  cudnnBackendDescriptor_t masked = causal_mask(g, &v, shifted, neg_inf);
  cudnnBackendDescriptor_t p = scores(g, &v, f32);
  unary(g, CUDNN_POINTWISE_EXP, masked, p);
  /* dV = P^T dO */
  cudnnBackendDescriptor_t p_t = tensor(g, 0, io, v.scores, v.scores_t_st, VIRTUAL);
  reshape(g, p, p_t);
  grad_kv(g, s, &v, p_t, dout, dv);
  /* dS = c P (dO V^T - D) */
  cudnnBackendDescriptor_t dp = scores(g, &v, f32);
  matmul(g, dout, vt, dp);
  cudnnBackendDescriptor_t dp_d = scores(g, &v, f32);
  binary(g, CUDNN_POINTWISE_SUB, dp, row_sum, dp_d);
  cudnnBackendDescriptor_t ds_unscaled = scores(g, &v, f32);
  binary(g, CUDNN_POINTWISE_MUL, dp_d, p, ds_unscaled);
  cudnnBackendDescriptor_t ds = scores(g, &v, f32);
  binary(g, CUDNN_POINTWISE_MUL, ds_unscaled, scale, ds);
  /* dK = dS^T Q */
  cudnnBackendDescriptor_t ds_t = tensor(g, 0, io, v.scores, v.scores_t_st, VIRTUAL);
  reshape(g, ds, ds_t);
  grad_kv(g, s, &v, ds_t, q, dk);
  /* dQ = dS K, through the fp32 accumulator */
  cudnnBackendDescriptor_t k = tensor(g, 0, io, v.kv, v.kv_st, VIRTUAL);
  reshape(g, kt, k);
  matmul(g, ds, k, dq_accum);
  unary(g, CUDNN_POINTWISE_IDENTITY, dq_accum, dq);
}

bool rt_cudnn_attention_describe(const struct rt_cudnn_attn_shape *s, int *forward_ops,
                                 int *backward_ops, char *why, size_t why_size) {
  *forward_ops = *backward_ops = 0;
  if (rt_cudnn_attention_refuses(s, why, why_size))
    return false;
  struct failure f = {true, false, ""};
  struct graph g = {&f, {0}, 0, {0}, 0, VIRTUAL_UID};
  build_forward(&g, s);
  *forward_ops = g.nops;
  graph_free(&g);
  g.next_uid = VIRTUAL_UID;
  if (!f.failed) {
    build_backward(&g, s);
    *backward_ops = g.nops;
    graph_free(&g);
  }
  if (f.failed)
    snprintf(why, why_size, "%s", f.text);
  return !f.failed;
}

/* ---- plans ---- */

struct plan {
  struct graph g;                /* its descriptors */
  cudnnBackendDescriptor_t exec; /* the execution plan */
  int64_t workspace;             /* cuDNN's own bytes */
};

struct entry {
  struct rt_cudnn_attn_shape shape;
  struct plan forward, backward;
};

enum { MAX_SHAPES = 16 };

struct rt_cudnn_attention {
  cudnnHandle_t handle;
  cudaStream_t stream;
  rt_cudnn_alloc_fn alloc;
  rt_cudnn_release_fn release;
  void *arg;
  struct entry entries[MAX_SHAPES];
  int nentries;
  void *workspace;
  size_t workspace_bytes;
  bool sealed;
  long version;
};

long rt_cudnn_version(void) { return (long)cudnnGetVersion(); }

/* The operation graph on the handle, engine configurations by heuristics
 * (mode A), and the first configuration whose plan finalizes. Fatal when
 * none does: cuDNN has no engine for the graph on this GPU. */
static void make_plan(struct rt_cudnn_attention *a, struct plan *p, bool backward,
                      const struct rt_cudnn_attn_shape *s) {
  p->g = (struct graph){NULL, {0}, 0, {0}, 0, VIRTUAL_UID};
  struct graph *g = &p->g;
  if (backward)
    build_backward(g, s);
  else
    build_forward(g, s);
  cudnnBackendDescriptor_t opgraph = create(g, CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
  set(g, opgraph, CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &a->handle);
  set(g, opgraph, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, g->nops, g->ops);
  finalize(g, opgraph);
  cudnnBackendDescriptor_t heur = create(g, CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR);
  set_desc(g, heur, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, opgraph);
  cudnnBackendHeurMode_t mode = CUDNN_HEUR_MODE_A;
  set(g, heur, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode);
  finalize(g, heur);
  int64_t count = 0;
  DNN(NULL, cudnnBackendGetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                     CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &count, NULL));
  if (count > 16)
    count = 16;
  cudnnBackendDescriptor_t configs[16];
  for (int64_t i = 0; i < count; i++)
    configs[i] = create(g, CUDNN_BACKEND_ENGINECFG_DESCRIPTOR);
  int64_t got = 0;
  if (count > 0)
    DNN(NULL, cudnnBackendGetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                       CUDNN_TYPE_BACKEND_DESCRIPTOR, count, &got, configs));
  char last[512] = "the heuristics returned no engine configuration";
  p->exec = NULL;
  for (int64_t i = 0; i < got && !p->exec; i++) {
    /* a configuration this GPU or build cannot run fails here: try the next */
    cudnnBackendDescriptor_t plan = create(g, CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR);
    set(g, plan, CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &a->handle);
    set_desc(g, plan, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, configs[i]);
    cudnnStatus_t st = cudnnBackendFinalize(plan);
    if (st == CUDNN_STATUS_SUCCESS) {
      p->exec = plan;
    } else {
      char detail[256] = "";
      cudnnGetLastErrorString(detail, sizeof detail);
      snprintf(last, sizeof last, "engine configuration %lld of %lld: %s%s%s", (long long)i + 1,
               (long long)got, cudnnGetErrorString(st), detail[0] ? ": " : "", detail);
    }
  }
  if (!p->exec) {
    char call[160];
    snprintf(call, sizeof call,
             "cudnnBackendFinalize(execution plan) of the %s attention graph (%ld x %d tokens, "
             "%d/%d heads of %d)",
             backward ? "backward" : "forward", s->nseq, s->seq_len, s->nq, s->nkv, s->hd);
    hxc_fail(call, last, __FILE__, __LINE__);
  }
  DNN(NULL, cudnnBackendGetAttribute(p->exec, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE,
                                     CUDNN_TYPE_INT64, 1, &got, &p->workspace));
}

static void plan_free(struct plan *p) {
  graph_free(&p->g);
  p->exec = NULL;
}

struct rt_cudnn_attention *rt_cudnn_attention_open(struct CUstream_st *stream,
                                                   rt_cudnn_alloc_fn alloc,
                                                   rt_cudnn_release_fn release, void *arg) {
  struct rt_cudnn_attention *a = calloc(1, sizeof *a);
  if (!a)
    hxc_fail("calloc(struct rt_cudnn_attention)", "out of memory", __FILE__, __LINE__);
  a->stream = stream, a->alloc = alloc, a->release = release, a->arg = arg;
  a->version = rt_cudnn_version();
  /* cuDNN 9 is what the graphs are written for (the -inf mask value, the dQ
   * accumulator cleared by cuDNN itself from 9.6) */
  if (a->version < 90000) {
    char error[96];
    snprintf(error, sizeof error, "cuDNN %ld found at run time; 9.0 or later is needed",
             a->version);
    hxc_fail("cudnnGetVersion()", error, __FILE__, __LINE__);
  }
  DNN(NULL, cudnnCreate(&a->handle));
  DNN(NULL, cudnnSetStream(a->handle, a->stream));
  return a;
}

void rt_cudnn_attention_close(struct rt_cudnn_attention *a) {
  if (!a)
    return;
  for (int i = 0; i < a->nentries; i++) {
    plan_free(&a->entries[i].forward);
    plan_free(&a->entries[i].backward);
  }
  if (a->workspace)
    a->release(a->workspace, a->arg);
  DNN(NULL, cudnnDestroy(a->handle));
  free(a);
}

/* The workspace one entry needs: the larger plan's, and the backward's two
 * fp32 buffers after its own. */
static size_t entry_bytes(const struct entry *e) {
  size_t fwd = round256((size_t)e->forward.workspace);
  size_t bwd = round256((size_t)e->backward.workspace) + rt_cudnn_backward_extra_bytes(&e->shape);
  return fwd > bwd ? fwd : bwd;
}

static void refuse_if_needed(const struct rt_cudnn_attention *a,
                             const struct rt_cudnn_attn_shape *s) {
  char why[256];
  if (rt_cudnn_attention_refuses(s, why, sizeof why) ||
      rt_cudnn_version_refuses(a->version, s, why, sizeof why))
    hxc_fail("cuDNN attention (--cuda-attention=cudnn)", why, __FILE__, __LINE__);
}

/* The entry of s's plans; a shape not seen yet is checked (refused with the
 * reason) before its plans are built. The key is the whole shape: a cache
 * hit skips the check, so an fp32 call or another head map must miss. */
static struct entry *entry_of(struct rt_cudnn_attention *a, const struct rt_cudnn_attn_shape *s) {
  for (int i = 0; i < a->nentries; i++)
    if (rt_cudnn_same_plan(&a->entries[i].shape, s))
      return &a->entries[i];
  refuse_if_needed(a, s);
  if (a->nentries == MAX_SHAPES)
    hxc_fail("cuDNN attention: a new shape", "more than 16 shapes cached", __FILE__, __LINE__);
  struct entry *e = &a->entries[a->nentries++];
  e->shape = *s;
  make_plan(a, &e->forward, false, s);
  make_plan(a, &e->backward, true, s);
  size_t need = entry_bytes(e);
  if (need > a->workspace_bytes) {
    if (a->sealed) {
      char error[160];
      snprintf(error, sizeof error, "needs %zu bytes of workspace, %zu were reserved at start",
               need, a->workspace_bytes);
      hxc_fail("cuDNN attention: a shape the runtime did not prepare", error, __FILE__, __LINE__);
    }
    /* tests and tools only (the runtime prepares, then seals): the old
     * workspace may still be read by queued work */
    if (a->workspace) {
      HXC_CHECK(cudaStreamSynchronize(a->stream));
      a->release(a->workspace, a->arg);
    }
    a->workspace = a->alloc(need, a->arg);
    a->workspace_bytes = need;
  }
  return e;
}

size_t rt_cudnn_attention_prepare(struct rt_cudnn_attention *a,
                                  const struct rt_cudnn_attn_shape *s) {
  entry_of(a, s);
  return a->workspace_bytes;
}

void rt_cudnn_attention_seal(struct rt_cudnn_attention *a) { a->sealed = true; }

static void require_aligned(const void *const *ptrs, int count) {
  for (int i = 0; i < count; i++)
    if ((uintptr_t)ptrs[i] % 16 != 0)
      hxc_fail("cuDNN attention", "an operand is not 16-byte aligned", __FILE__, __LINE__);
}

/* One execution: the variant pack of uids and pointers (host pointers for
 * the by-value scalars), the shared workspace. */
static void execute(struct rt_cudnn_attention *a, const struct plan *p, const int64_t *uids,
                    void *const *ptrs, int64_t count) {
  struct graph g = {NULL, {0}, 0, {0}, 0, VIRTUAL_UID};
  cudnnBackendDescriptor_t pack = create(&g, CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR);
  set(&g, pack, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, count, uids);
  set(&g, pack, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, count, ptrs);
  set(&g, pack, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &a->workspace);
  finalize(&g, pack);
  DNN(NULL, cudnnSetStream(a->handle, a->stream));
  DNN(NULL, cudnnBackendExecute(a->handle, p->exec, pack));
  graph_free(&g);
}

/* The mask's value: -inf from cuDNN 9.10, the lowest float before (what
 * cudnn-frontend passes each). */
static float neg_inf_of(const struct rt_cudnn_attention *a) {
  return a->version >= 91000 ? -INFINITY : -FLT_MAX;
}

void rt_cudnn_attention_forward(struct rt_cudnn_attention *a, const struct rt_cudnn_attn_shape *s,
                                void *o, float *stats, const void *q, const void *k,
                                const void *v) {
  struct entry *e = entry_of(a, s);
  const void *all[] = {o, stats, q, k, v};
  require_aligned(all, 5);
  float scale = 1.0f / sqrtf((float)s->hd), neg_inf = neg_inf_of(a);
  int64_t uids[] = {UID_Q, UID_K, UID_V, UID_O, UID_STATS, UID_SCALE, UID_NEG_INF};
  void *ptrs[] = {(void *)q, (void *)k, (void *)v, o, stats, &scale, &neg_inf};
  execute(a, &e->forward, uids, ptrs, 7);
}

void rt_cudnn_attention_backward(struct rt_cudnn_attention *a, const struct rt_cudnn_attn_shape *s,
                                 void *dq, void *dk, void *dv, const void *dout, const void *q,
                                 const void *k, const void *v, const void *o, const float *stats) {
  struct entry *e = entry_of(a, s);
  const void *all[] = {dq, dk, dv, dout, q, k, v, o, stats};
  require_aligned(all, 9);
  /* the two fp32 buffers after cuDNN's own workspace */
  char *extra = (char *)a->workspace + round256((size_t)e->backward.workspace);
  size_t rows = (size_t)s->nseq * s->nq * s->seq_len;
  void *dq_accum = extra, *row_sum = extra + round256(rows * s->hd * sizeof(float));
  if (a->version < 90600) /* cuDNN clears its accumulator itself from 9.6 */
    HXC_CHECK(cudaMemsetAsync(dq_accum, 0, rows * s->hd * sizeof(float), a->stream));
  float scale = 1.0f / sqrtf((float)s->hd), neg_inf = neg_inf_of(a), one = 1.0f;
  int64_t uids[] = {UID_Q,  UID_K,  UID_V,        UID_O,       UID_DO,    UID_STATS,   UID_DQ,
                    UID_DK, UID_DV, UID_DQ_ACCUM, UID_ROW_SUM, UID_SCALE, UID_NEG_INF, UID_ONE};
  void *ptrs[] = {(void *)q, (void *)k, (void *)v, (void *)o, (void *)dout, (void *)stats, dq,
                  dk,        dv,        dq_accum,  row_sum,   &scale,       &neg_inf,      &one};
  execute(a, &e->backward, uids, ptrs, 14);
}

#endif /* HEXIC_ATTENTION_CUDNN */
