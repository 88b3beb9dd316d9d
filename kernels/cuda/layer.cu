/* One decoder layer (a TP shard of it), forward and backward, composed from
 * the kernels of this folder exactly as kernels/cpu/layer.c composes the CPU
 * ones (same buffers, same order, same all-reduce points):
 *
 *   a = rmsnorm(x, attn_norm); q,k,v = a wq^T, a wk^T, a wv^T; RoPE(q, k);
 *   o = attention(q, k, v); x1 = x + allreduce(o wo^T);
 *   m = rmsnorm(x1, mlp_norm); h = silu(m w_gate^T) * (m w_up^T);
 *   out = x1 + allreduce(h w_down^T)
 *
 * Fewer, larger launches than that list (each step's result as the CPU's
 * within the checks' tolerances; the speed is unmeasured here, no GPU):
 *  - wq, wk, wv lie back to back in the layer's buffer (hxk_layer_bind's
 *    order), as do w_gate and w_up, and so do their gradients: one GEMM
 *    gives [q | k | v] per token (qkv, scratch) and one [gate | up] (gu, kept
 *    for the backward); their backward is one GEMM each too, so the input
 *    gradients da and dm are each one fp32-accumulated sum rounded once,
 *    where three (two) bf16 partial sums were rounded and added before;
 *  - RoPE of q and k and the split of qkv are one kernel, and its transpose
 *    merges dq, dk, dv into dqkv; SwiGLU reads gu and writes dgu;
 *  - the residual x1 = x + attention is fused into the MLP norm, and the
 *    residual path's gradient into each norm's backward (no copies of dout
 *    or dx1); every gradient buffer's first write is a GEMM or kernel that
 *    writes (beta 0) rather than adds into zeros: only dq, dk and dv, which
 *    the attention kernels add into, are still zeroed.
 *
 * Buffers are carved out of caller memory by one cursor routine (slices
 * aligned to 256 bytes, which cuBLASLt and the tensor-core attention like),
 * so the size functions and the users can never disagree. Elements are of
 * ctx->dt except rstd and lse (fp32) and the weight gradients (fp32).
 *
 * Sequence splits (llama_cuda.h, struct hxc_layer_ctx): with positions or a
 * part of the sequence, RoPE rotates by the global positions and attention
 * runs through a hook (the caller's, or the local one at the end of this
 * file) on fp32 device buffers, as kernels/cpu/layer.c does.
 *
 * Sequence parallelism (sp_size > 1): the layer's input, output and the
 * residual stream are this member's rows; the two all-reduces become
 * all-gather (of the normed rows, before the column-parallel products) and
 * reduce-scatter (of the row-parallel partials, into the rows):
 *
 *   a = rmsnorm(x); af = allgather(a); ... x1 = x + reduce_scatter(o wo^T);
 *   m = rmsnorm(x1); mf = allgather(m); ... out = x1 + reduce_scatter(...)
 *
 * and the backward mirrors it (the gradient of an all-gather is a
 * reduce-scatter and the other way round), gathering a and m again, as
 * Megatron does, instead of keeping them whole. */
#include <string.h>

#include "kernels/cuda/common.cuh"

struct layer_shape {
  long n;      /* tokens = nseq * local_len */
  long nseq;
  int dim, hd; /* D, head_dim */
  int nq, nkv; /* local query / kv heads */
  int qw, kvw; /* nq*hd, nkv*hd */
  int nf;      /* local ffn columns */
  int seq_len;
  size_t es;   /* bytes of one dt element */
  /* The rows of the residual stream held here: [row_begin, row_begin +
   * rows) of n with sequence parallelism (sp), else all n. */
  bool sp;
  long row_begin, rows;
  long local_len;       /* tokens per sequence held here */
  const int *positions; /* their global positions (device); NULL: 0.. */
  /* The attention: NULL for the whole-head kernel, else the caller's hook
   * or local_hook; wide: the hook's fp32 copies of bf16 buffers. */
  const struct hxk_attention_hook *hook;
  bool wide;
  struct hxk_attention_hook local_hook;
  struct hxc_attention_local local;
};

/* The caller's hook; else, with positions or a part of the sequence, the
 * local hook (the block kernel); else the whole-head kernel, so that whole
 * sequences keep today's results. The shape must not be copied afterwards
 * (local_hook points into it). */
static void choose_attention(struct layer_shape *sh,
                             const struct hxc_layer_ctx *ctx) {
  sh->hook = ctx->attention;
  if (!sh->hook && (sh->positions || sh->local_len != sh->seq_len)) {
    sh->local.positions = sh->positions;
    sh->local.local_len = sh->local_len;
    sh->local.map = hxc_kv_map_of(ctx->dims, ctx->shard);
    sh->local.nq = sh->nq;
    sh->local.nkv = sh->nkv;
    sh->local.hd = sh->hd;
    sh->local.stream = ctx->stream;
    hxc_attention_hook_local(&sh->local_hook, &sh->local);
    sh->hook = &sh->local_hook;
  }
  sh->wide = sh->hook && ctx->dt != HXC_FP32;
}

static void shape_of(struct layer_shape *out, const struct hxc_layer_ctx *ctx,
                     long nseq) {
  const struct hxk_dims *d = ctx->dims;
  const struct hxk_shard *s = ctx->shard;
  struct layer_shape sh;
  memset(&sh, 0, sizeof sh);
  sh.local_len = ctx->local_len > 0 ? ctx->local_len : d->seq_len;
  sh.positions = ctx->positions;
  sh.nseq = nseq;
  sh.n = nseq * sh.local_len;
  sh.dim = d->dim;
  sh.hd = d->head_dim;
  sh.nq = s->q_end - s->q_begin;
  sh.nkv = s->kv_end - s->kv_begin;
  sh.qw = sh.nq * sh.hd;
  sh.kvw = sh.nkv * sh.hd;
  sh.nf = s->ffn_end - s->ffn_begin;
  sh.seq_len = d->seq_len;
  sh.es = hxc_dtype_bytes(ctx->dt);
  sh.sp = ctx->sp_size > 1;
  sh.rows = sh.n;
  if (sh.sp) {
    if (!ctx->reduce_scatter || !ctx->allgather || ctx->sp_rank < 0 ||
        ctx->sp_rank >= ctx->sp_size)
      hxc_fail("hxc_layer", "sequence parallel without both hooks or with a "
               "rank outside the group", __FILE__, __LINE__);
    long end = 0;
    hxk_sp_rows(sh.n, ctx->sp_size, ctx->sp_rank, &sh.row_begin, &end);
    sh.rows = end - sh.row_begin;
  }
  *out = sh;
  choose_attention(out, ctx);
}

/* Consecutive 256-byte-aligned slices; a NULL base only counts. */
struct cursor {
  char *base;
  size_t used;
};

static void *take(struct cursor *c, size_t bytes) {
  void *at = c->base ? c->base + c->used : NULL;
  c->used += (bytes + 255) / 256 * 256;
  return at;
}

/* Elements of dt, and fp32 floats. */
static void *take_el(struct cursor *c, const struct layer_shape *sh, long n) {
  return take(c, (size_t)n * sh->es);
}
static float *take_f(struct cursor *c, long n) {
  return (float *)take(c, (size_t)n * sizeof(float));
}

/* Everything the backward reads, in forward order; lse is the whole-head
 * kernel's, saved the hook's (one or the other is empty). x, rstd1, a, x1,
 * rstd2 and m are the residual stream's rows (sh->rows); the rest every
 * token's (a TP shard of heads or ffn columns). */
struct layer_acts {
  void *x, *a, *q, *k, *v, *o, *x1, *m, *gu, *h; /* gu: [gate | up] */
  float *rstd1, *lse, *rstd2, *saved;
};

static struct layer_acts carve_acts(struct cursor *c,
                                    const struct layer_shape *sh) {
  struct layer_acts a;
  long n = sh->n, rows = sh->rows;
  a.x = take_el(c, sh, rows * sh->dim);
  a.rstd1 = take_f(c, rows);
  a.a = take_el(c, sh, rows * sh->dim);
  a.q = take_el(c, sh, n * sh->qw);
  a.k = take_el(c, sh, n * sh->kvw);
  a.v = take_el(c, sh, n * sh->kvw);
  a.lse = take_f(c, sh->hook ? 0 : n * sh->nq);
  a.o = take_el(c, sh, n * sh->qw);
  a.x1 = take_el(c, sh, rows * sh->dim);
  a.rstd2 = take_f(c, rows);
  a.m = take_el(c, sh, rows * sh->dim);
  a.gu = take_el(c, sh, n * 2 * sh->nf);
  a.h = take_el(c, sh, n * sh->nf);
  a.saved = take_f(c, sh->hook ? sh->hook->saved_floats(sh->nseq, sh->hook->arg)
                               : 0);
  return a;
}

/* The hook's fp32 views of bf16 buffers (sh->wide only). */
struct wide_bufs {
  float *q, *k, *v, *o, *dout, *dq, *dk, *dv;
};

/* Scratch: [full activations when recomputing] + forward and backward
 * temporaries, each its own region (the whole-head kernel's D buffer lives
 * in the hxc_ctx; a hook's scratch is `attn`). */
struct layer_scratch {
  struct layer_acts full;  /* recompute mode only */
  void *partial;           /* [n, D]: a row-parallel output before all-reduce */
  void *gathered;          /* sequence parallel: all-gathered rows (= partial) */
  float *attn;             /* the hook's scratch */
  struct wide_bufs wide;   /* bf16 with a hook */
  void *qkv;               /* [n, qw + 2 kvw]: the fused product, then dqkv */
  void *dx1;               /* [rows, D]: the residual stream's gradient */
  void *dm, *da;           /* [n, D] */
  void *dh;                /* [n, nf] */
  void *dgu;               /* [n, 2 nf]: [dgate | dup] */
  void *dout_attn, *dq;    /* [n, nq*hd] */
  void *dk, *dv;           /* [n, nkv*hd] */
};

static struct wide_bufs carve_wide(struct cursor *c,
                                   const struct layer_shape *sh) {
  struct wide_bufs w;
  memset(&w, 0, sizeof w);
  if (!sh->wide)
    return w;
  long qn = sh->n * sh->qw, kvn = sh->n * sh->kvw;
  w.q = take_f(c, qn);
  w.k = take_f(c, kvn);
  w.v = take_f(c, kvn);
  w.o = take_f(c, qn);
  w.dout = take_f(c, qn);
  w.dq = take_f(c, qn);
  w.dk = take_f(c, kvn);
  w.dv = take_f(c, kvn);
  return w;
}

static struct layer_scratch carve_scratch(struct cursor *c,
                                          const struct hxc_layer_ctx *ctx,
                                          const struct layer_shape *sh) {
  struct layer_scratch s;
  memset(&s.full, 0, sizeof s.full);
  if (ctx->recompute)
    s.full = carve_acts(c, sh);
  long n = sh->n;
  s.partial = take_el(c, sh, n * sh->dim);
  /* The gathered rows share partial's room: on the layer's one stream each
   * gather is read only by the products queued before the next write of
   * partial (the wo or w_down product, or a reduce-scatter's rows), and each
   * reduce-scatter's rows are read before the next gather. */
  s.gathered = sh->sp ? s.partial : NULL;
  s.attn = take_f(c, sh->hook ? sh->hook->scratch_floats(sh->nseq, sh->hook->arg)
                              : 0);
  s.wide = carve_wide(c, sh);
  s.qkv = take_el(c, sh, n * (sh->qw + 2 * sh->kvw));
  s.dx1 = take_el(c, sh, sh->rows * sh->dim);
  s.dm = take_el(c, sh, n * sh->dim);
  s.da = take_el(c, sh, n * sh->dim);
  s.dh = take_el(c, sh, n * sh->nf);
  s.dgu = take_el(c, sh, n * 2 * sh->nf);
  s.dout_attn = take_el(c, sh, n * sh->qw);
  s.dq = take_el(c, sh, n * sh->qw);
  s.dk = take_el(c, sh, n * sh->kvw);
  s.dv = take_el(c, sh, n * sh->kvw);
  return s;
}

size_t hxc_layer_acts_bytes(const struct hxc_layer_ctx *ctx, long nseq) {
  struct layer_shape sh;
  shape_of(&sh, ctx, nseq);
  struct cursor c = {NULL, 0};
  if (ctx->recompute)
    take_el(&c, &sh, sh.rows * sh.dim);
  else
    carve_acts(&c, &sh);
  return c.used;
}

size_t hxc_layer_scratch_bytes(const struct hxc_layer_ctx *ctx, long nseq) {
  struct layer_shape sh;
  shape_of(&sh, ctx, nseq);
  struct cursor c = {NULL, 0};
  carve_scratch(&c, ctx, &sh);
  return c.used;
}

size_t hxc_layer_ctx_scratch_bytes(const struct hxc_layer_ctx *ctx,
                                   long nseq) {
  struct layer_shape sh;
  shape_of(&sh, ctx, nseq);
  size_t norm = hxc_rmsnorm_backward_scratch(sh.rows, sh.dim);
  /* another attention (attention_ops) keeps its own workspace */
  size_t attn = sh.hook || ctx->attention_ops
                    ? 0
                    : hxc_attention_backward_scratch(sh.nseq, sh.seq_len,
                                                     sh.nq);
  return norm > attn ? norm : attn;
}

void hxc_layer_bind(struct hxc_layer_params *p, const void *base,
                    enum hxc_dtype dt, const struct hxk_dims *d,
                    const struct hxk_shard *s) {
  const char *at = (const char *)base;
  const void **slot[HXK_LAYER_NPARAMS] = {
      &p->attn_norm, &p->wq, &p->wk, &p->wv, &p->wo,
      &p->mlp_norm, &p->w_gate, &p->w_up, &p->w_down};
  for (int i = 0; i < HXK_LAYER_NPARAMS; i++) {
    *slot[i] = at;
    at += hxk_layer_param_floats(d, s, (enum hxk_param)i) * hxc_dtype_bytes(dt);
  }
}

void hxc_layer_grads_bind(struct hxc_layer_grads *g, float *base,
                          const struct hxk_dims *d, const struct hxk_shard *s) {
  struct hxk_layer_params p;
  hxk_layer_bind(&p, base, d, s); /* the CPU's layout, on device pointers */
  g->attn_norm = p.attn_norm;
  g->wq = p.wq;
  g->wk = p.wk;
  g->wv = p.wv;
  g->wo = p.wo;
  g->mlp_norm = p.mlp_norm;
  g->w_gate = p.w_gate;
  g->w_up = p.w_up;
  g->w_down = p.w_down;
}

static void allreduce(const struct hxc_layer_ctx *ctx, void *buf, long n) {
  if (ctx->allreduce)
    ctx->allreduce(buf, n, ctx->dt, ctx->stream, ctx->allreduce_arg);
}

/* The [n, D] input of a column-parallel product from this member's rows of
 * it: with sequence parallelism the rows placed at their offset in `full`
 * and all-gathered there; else the rows themselves (every row). */
static const void *gather_rows(const struct hxc_layer_ctx *ctx,
                               const struct layer_shape *sh, void *full,
                               const void *rows) {
  if (!sh->sp)
    return rows;
  size_t row_bytes = (size_t)sh->dim * sh->es;
  HXC_CHECK(cudaMemcpyAsync((char *)full + (size_t)sh->row_begin * row_bytes,
                            rows, (size_t)sh->rows * row_bytes,
                            cudaMemcpyDeviceToDevice, ctx->stream));
  ctx->allgather(full, sh->n, sh->dim, ctx->dt, ctx->stream, ctx->sp_arg);
  return full;
}

/* A row-parallel product's partial [n, D] summed over the TP group, as this
 * member holds the sum: its rows, reduce-scattered into `rows_out` (which
 * must not overlap `partial`), with sequence parallelism; else every row,
 * all-reduced in place. */
static const void *sum_partials(const struct hxc_layer_ctx *ctx,
                                const struct layer_shape *sh, void *partial,
                                void *rows_out) {
  if (!sh->sp) {
    allreduce(ctx, partial, sh->n * sh->dim);
    return partial;
  }
  ctx->reduce_scatter(partial, rows_out, sh->n, sh->dim, ctx->dt, ctx->stream,
                      ctx->sp_arg);
  return rows_out;
}

static void zero(const struct hxc_layer_ctx *ctx, void *buf, size_t bytes) {
  HXC_CHECK(cudaMemsetAsync(buf, 0, bytes, ctx->stream));
}

/* An fp32 view of a dt buffer of n elements for the hook: the buffer itself
 * in fp32, else `wide` filled from it. */
static float *widen(const struct hxc_layer_ctx *ctx, float *wide,
                    const void *buf, long n) {
  if (ctx->dt == HXC_FP32)
    return (float *)buf;
  hxc_convert(wide, HXC_FP32, buf, ctx->dt, n, ctx->stream);
  return wide;
}

/* After the hook wrote `view` (fp32), the dt buffer it stands for. */
static void narrow(const struct hxc_layer_ctx *ctx, void *buf,
                   const float *view, long n) {
  if (ctx->dt != HXC_FP32)
    hxc_convert(buf, ctx->dt, view, HXC_FP32, n, ctx->stream);
}

/* o = the hook's attention of the RoPE'd q, k, v (saved into a->saved). */
static void hook_forward(const struct hxc_layer_ctx *ctx,
                         const struct layer_shape *sh, struct layer_acts *a,
                         const struct layer_scratch *s) {
  long qn = sh->n * sh->qw, kvn = sh->n * sh->kvw;
  const struct wide_bufs *w = &s->wide;
  float *q = widen(ctx, w->q, a->q, qn);
  float *k = widen(ctx, w->k, a->k, kvn);
  float *v = widen(ctx, w->v, a->v, kvn);
  float *o = ctx->dt == HXC_FP32 ? (float *)a->o : w->o;
  sh->hook->forward(o, q, k, v, sh->nseq, a->saved, s->attn, sh->hook->arg);
  narrow(ctx, a->o, o, qn);
}

/* dq, dk, dv (zeroed, dt) += the hook's gradients, from dout_attn. */
static void hook_backward(const struct hxc_layer_ctx *ctx,
                          const struct layer_shape *sh,
                          const struct layer_acts *a,
                          const struct layer_scratch *s) {
  long qn = sh->n * sh->qw, kvn = sh->n * sh->kvw;
  const struct wide_bufs *w = &s->wide;
  float *q = widen(ctx, w->q, a->q, qn);
  float *k = widen(ctx, w->k, a->k, kvn);
  float *v = widen(ctx, w->v, a->v, kvn);
  float *o = widen(ctx, w->o, a->o, qn);
  float *dout = widen(ctx, w->dout, s->dout_attn, qn);
  float *dq = widen(ctx, w->dq, s->dq, qn); /* zeros either way */
  float *dk = widen(ctx, w->dk, s->dk, kvn);
  float *dv = widen(ctx, w->dv, s->dv, kvn);
  sh->hook->backward(dq, dk, dv, dout, q, k, v, o, a->saved, sh->nseq,
                     s->attn, sh->hook->arg);
  narrow(ctx, s->dq, dq, qn);
  narrow(ctx, s->dk, dk, kvn);
  narrow(ctx, s->dv, dv, kvn);
}

/* The forward into a full activation set `a` (a->x already holds the input). */
static void forward_full(const struct hxc_layer_ctx *ctx,
                         const struct hxc_layer_params *w,
                         const struct layer_shape *sh, struct layer_acts *a,
                         void *out, const struct layer_scratch *s) {
  const struct hxk_dims *d = ctx->dims;
  enum hxc_dtype dt = ctx->dt;
  cudaStream_t st = ctx->stream;
  struct hxc_ctx *gpu = ctx->gpu;
  long n = sh->n, nseq = sh->nseq, rows = sh->rows, rd = rows * sh->dim;
  /* attention block */
  hxc_rmsnorm_forward(a->a, a->rstd1, a->x, w->attn_norm, rows, sh->dim,
                      d->norm_eps, dt, st);
  const void *af = gather_rows(ctx, sh, s->gathered, a->a);
  /* [q | k | v] = a [wq; wk; wv]^T, then RoPE by the tokens' positions
   * (NULL, local_len = seq_len: whole sequences) as it splits them */
  hxc_linear_forward(gpu, s->qkv, af, w->wq, n, sh->dim,
                     sh->qw + 2 * sh->kvw, 0.0f, dt, st);
  hxc_rope_qkv_split(a->q, a->k, a->v, s->qkv, ctx->rope, n, sh->nq, sh->nkv,
                     sh->hd, sh->positions, sh->local_len, dt, st);
  if (sh->hook)
    hook_forward(ctx, sh, a, s);
  else if (ctx->attention_ops)
    ctx->attention_ops->forward(ctx->attention_ops->arg, a->o, a->lse, a->q,
                                a->k, a->v, hxc_kv_map_of(d, ctx->shard),
                                nseq, sh->seq_len, sh->nq, sh->nkv, sh->hd, dt,
                                st);
  else
    hxc_attention_forward(a->o, a->lse, a->q, a->k, a->v,
                          hxc_kv_map_of(d, ctx->shard), nseq, sh->seq_len,
                          sh->nq, sh->nkv, sh->hd, dt, st);
  hxc_linear_forward(gpu, s->partial, a->o, w->wo, n, sh->qw, sh->dim, 0.0f,
                     dt, st);
  /* row-parallel wo: sum the TP partials (into x1's rows: the residual may
   * alias its operand) */
  const void *attn = sum_partials(ctx, sh, s->partial, a->x1);
  /* x1 = x + attn and the MLP block's norm of it, in one pass */
  hxc_residual_rmsnorm_forward(a->x1, a->m, a->rstd2, a->x, attn,
                               w->mlp_norm, rows, sh->dim, d->norm_eps, dt,
                               st);
  const void *mf = gather_rows(ctx, sh, s->gathered, a->m);
  /* [gate | up] = m [w_gate; w_up]^T */
  hxc_linear_forward(gpu, a->gu, mf, w->w_gate, n, sh->dim, 2 * sh->nf, 0.0f,
                     dt, st);
  hxc_swiglu_gu_forward(a->h, a->gu, n, sh->nf, dt, st);
  hxc_linear_forward(gpu, s->partial, a->h, w->w_down, n, sh->nf, sh->dim,
                     0.0f, dt, st);
  const void *mlp = sum_partials(ctx, sh, s->partial, out); /* row-parallel w_down */
  hxc_residual_forward(out, a->x1, mlp, rd, dt, st);
}

/* The fused products read wq, wk, wv (w_gate, w_up) and write their
 * gradients as one matrix each: they must lie back to back, as
 * hxc_layer_bind and hxc_layer_grads_bind lay them. */
static void require_fused_layout(const struct layer_shape *sh,
                                 const struct hxc_layer_params *w,
                                 const struct hxc_layer_grads *g) {
  size_t qb = (size_t)sh->qw * sh->dim, kvb = (size_t)sh->kvw * sh->dim;
  size_t fb = (size_t)sh->nf * sh->dim;
  const char *wq = (const char *)w->wq, *wg = (const char *)w->w_gate;
  HXC_REQUIRE((const char *)w->wk == wq + qb * sh->es &&
                  (const char *)w->wv == wq + (qb + kvb) * sh->es &&
                  (const char *)w->w_up == wg + fb * sh->es,
              "layer weights: wq, wk, wv and w_gate, w_up back to back "
              "(hxc_layer_bind's layout)");
  HXC_REQUIRE(!g || (g->wk == g->wq + qb && g->wv == g->wq + qb + kvb &&
                     g->w_up == g->w_gate + fb),
              "layer gradients: wq, wk, wv and w_gate, w_up back to back "
              "(hxc_layer_grads_bind's layout)");
}

void hxc_layer_forward(const struct hxc_layer_ctx *ctx,
                       const struct hxc_layer_params *w, const void *x,
                       void *out, void *acts, void *scratch, long nseq) {
  struct layer_shape sh;
  shape_of(&sh, ctx, nseq);
  require_fused_layout(&sh, w, NULL);
  struct cursor sc = {(char *)scratch, 0};
  struct layer_scratch s = carve_scratch(&sc, ctx, &sh);
  struct layer_acts a;
  size_t xbytes = (size_t)sh.rows * sh.dim * sh.es;
  if (ctx->recompute) {
    a = s.full; /* kept: the input only; the rest is thrown away */
    HXC_CHECK(cudaMemcpyAsync(acts, x, xbytes, cudaMemcpyDeviceToDevice,
                              ctx->stream));
  } else {
    struct cursor ac = {(char *)acts, 0};
    a = carve_acts(&ac, &sh);
  }
  HXC_CHECK(cudaMemcpyAsync(a.x, x, xbytes, cudaMemcpyDeviceToDevice,
                            ctx->stream));
  forward_full(ctx, w, &sh, &a, out, &s);
}

/* MLP half of the backward: dx1 = dout + d(mlp)/dx1 (written). With
 * sequence parallelism dout is the rows: all-gathered for the products (the
 * reduce-scatter's gradient), and m gathered again into the same buffer
 * once that gradient's last reader is queued. */
static void backward_mlp(const struct hxc_layer_ctx *ctx,
                         const struct hxc_layer_params *w,
                         const struct hxc_layer_grads *g,
                         const struct layer_shape *sh,
                         const struct layer_acts *a,
                         const struct layer_scratch *s, const void *dout) {
  enum hxc_dtype dt = ctx->dt;
  cudaStream_t st = ctx->stream;
  struct hxc_ctx *gpu = ctx->gpu;
  long n = sh->n;
  const void *dy = gather_rows(ctx, sh, s->gathered, dout);
  hxc_linear_backward_beta(gpu, s->dh, 0.0f, g->w_down, dy, a->h, w->w_down,
                           n, sh->nf, sh->dim, dt, st);
  hxc_swiglu_gu_backward(s->dgu, s->dh, a->gu, n, sh->nf, dt, st);
  const void *mf = gather_rows(ctx, sh, s->gathered, a->m);
  /* dm = [dgate | dup] [w_gate; w_up], one fp32 sum; the gradients of
   * w_gate and w_up, back to back, in one product too */
  hxc_linear_backward_beta(gpu, s->dm, 0.0f, g->w_gate, s->dgu, mf, w->w_gate,
                           n, sh->dim, 2 * sh->nf, dt, st);
  /* column-parallel input gradient (the free partial buffer takes the rows) */
  const void *dm = sum_partials(ctx, sh, s->dm, s->partial);
  hxc_rmsnorm_backward_residual(gpu, s->dx1, g->mlp_norm, dout, dm, a->x1,
                                w->mlp_norm, a->rstd2, sh->rows, sh->dim, dt,
                                st);
}

/* Attention half: from dx1 to dx = dx1 + d(attention)/dx (written). */
static void backward_attention(const struct hxc_layer_ctx *ctx,
                               const struct hxc_layer_params *w,
                               const struct hxc_layer_grads *g,
                               const struct layer_shape *sh,
                               const struct layer_acts *a,
                               const struct layer_scratch *s, void *dx) {
  enum hxc_dtype dt = ctx->dt;
  cudaStream_t st = ctx->stream;
  struct hxc_ctx *gpu = ctx->gpu;
  long n = sh->n, nseq = sh->nseq;
  /* the attention kernels and hooks add into dq, dk and dv */
  zero(ctx, s->dq, (size_t)n * sh->qw * sh->es);
  zero(ctx, s->dk, (size_t)n * sh->kvw * sh->es);
  zero(ctx, s->dv, (size_t)n * sh->kvw * sh->es);
  const void *dy = gather_rows(ctx, sh, s->gathered, s->dx1);
  hxc_linear_backward_beta(gpu, s->dout_attn, 0.0f, g->wo, dy, a->o, w->wo,
                           n, sh->qw, sh->dim, dt, st);
  if (sh->hook)
    hook_backward(ctx, sh, a, s);
  else if (ctx->attention_ops) /* writes dq, dk, dv: zero above, so alike */
    ctx->attention_ops->backward(
        ctx->attention_ops->arg, s->dq, s->dk, s->dv, s->dout_attn, a->q, a->k,
        a->v, a->o, a->lse, hxc_kv_map_of(ctx->dims, ctx->shard), nseq,
        sh->seq_len, sh->nq, sh->nkv, sh->hd, dt, st);
  else
    hxc_attention_backward(gpu, s->dq, s->dk, s->dv, s->dout_attn, a->q, a->k,
                           a->v, a->o, a->lse,
                           hxc_kv_map_of(ctx->dims, ctx->shard), nseq,
                           sh->seq_len, sh->nq, sh->nkv, sh->hd, dt, st);
  /* dqkv = [R^T dq | R^T dk | dv] in the product's layout */
  hxc_rope_qkv_merge(s->qkv, s->dq, s->dk, s->dv, ctx->rope, n, sh->nq,
                     sh->nkv, sh->hd, sh->positions, sh->local_len, dt, st);
  const void *af = gather_rows(ctx, sh, s->gathered, a->a);
  /* da = dqkv [wq; wk; wv], one fp32 sum; wq, wk, wv's gradients at once */
  hxc_linear_backward_beta(gpu, s->da, 0.0f, g->wq, s->qkv, af, w->wq, n,
                           sh->dim, sh->qw + 2 * sh->kvw, dt, st);
  /* column-parallel input gradient */
  const void *da = sum_partials(ctx, sh, s->da, s->partial);
  hxc_rmsnorm_backward_residual(gpu, dx, g->attn_norm, s->dx1, da, a->x,
                                w->attn_norm, a->rstd1, sh->rows, sh->dim,
                                dt, st);
}

void hxc_layer_backward(const struct hxc_layer_ctx *ctx,
                        const struct hxc_layer_params *w,
                        const struct hxc_layer_grads *g, const void *dout,
                        void *dx, const void *acts, void *scratch, long nseq) {
  struct layer_shape sh;
  shape_of(&sh, ctx, nseq);
  require_fused_layout(&sh, w, g);
  struct cursor sc = {(char *)scratch, 0};
  struct layer_scratch s = carve_scratch(&sc, ctx, &sh);
  struct layer_acts a;
  size_t xbytes = (size_t)sh.rows * sh.dim * sh.es;
  if (ctx->recompute) {
    a = s.full;
    HXC_CHECK(cudaMemcpyAsync(a.x, acts, xbytes, cudaMemcpyDeviceToDevice,
                              ctx->stream));
    /* The recomputed output is not needed: park it in dx, written below. */
    forward_full(ctx, w, &sh, &a, dx, &s);
  } else {
    /* The activations are only read; the cast lets one carve serve both. */
    struct cursor ac = {(char *)acts, 0};
    a = carve_acts(&ac, &sh);
  }
  backward_mlp(ctx, w, g, &sh, &a, &s, dout);
  backward_attention(ctx, w, g, &sh, &a, &s, dx);
}

/* ---- the local hook (hxc_attention_hook_local) ---- */

static long local_floats(long nseq, void *arg) {
  const struct hxc_attention_local *l = (const struct hxc_attention_local *)arg;
  return nseq * l->local_len * l->nq; /* lse (saved) or delta (scratch) */
}

static void local_forward(float *o, const float *q, const float *k,
                          const float *v, long nseq, float *saved,
                          float *scratch, void *arg) {
  (void)scratch;
  const struct hxc_attention_local *l = (const struct hxc_attention_local *)arg;
  hxc_attention_block_forward(o, saved, q, l->positions, l->local_len, k, v,
                              l->positions, l->local_len, l->map, nseq, l->nq,
                              l->nkv, l->hd, true, HXC_FP32, l->stream);
}

static void local_backward(float *dq, float *dk, float *dv, const float *dout,
                           const float *q, const float *k, const float *v,
                           const float *o, const float *saved, long nseq,
                           float *scratch, void *arg) {
  const struct hxc_attention_local *l = (const struct hxc_attention_local *)arg;
  float *delta = scratch;
  hxc_attention_block_delta(delta, dout, o, nseq * l->local_len, l->nq, l->hd,
                            HXC_FP32, l->stream);
  hxc_attention_block_backward(dq, dk, dv, dout, q, l->positions,
                               l->local_len, k, v, l->positions, l->local_len,
                               saved, delta, l->map, nseq, l->nq, l->nkv,
                               l->hd, HXC_FP32, l->stream);
}

void hxc_attention_hook_local(struct hxk_attention_hook *hook,
                              struct hxc_attention_local *local) {
  hook->saved_floats = local_floats;
  hook->scratch_floats = local_floats;
  hook->forward = local_forward;
  hook->backward = local_backward;
  hook->arg = local;
}

/* ---- hxc_copy_rows ---- */

/* One thread per element of the rows, row-major: consecutive threads take
 * consecutive columns of a row (coalesced on both sides). */
__global__ void copy_rows_kernel(float *dst, long dst_pitch, const float *src,
                                 long src_pitch, long width, long total,
                                 bool add) {
  for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < total;
       i += (long)gridDim.x * blockDim.x) {
    long r = i / width, c = i - r * width;
    float x = src[r * src_pitch + c];
    float *to = dst + r * dst_pitch + c;
    *to = add ? *to + x : x;
  }
}

void hxc_copy_rows(float *dst, long dst_pitch, const float *src,
                   long src_pitch, long width, long rows, bool add,
                   cudaStream_t stream) {
  long total = width * rows;
  if (width <= 0 || rows <= 0)
    return;
  copy_rows_kernel<<<grid_for(total, EW_THREADS), EW_THREADS, 0, stream>>>(
      dst, dst_pitch, src, src_pitch, width, total, add);
  HXC_LAUNCHED("copy_rows_kernel");
}

/* The hooks' copies: rows of a layer's width. */
HXC_LAUNCHES(hxc_layer_launches) {
  struct hxc_launch_dims l = ew_launch(s->nseq * s->seq_len * s->hidden);
  fn(arg, "copy_rows_kernel", &l);
}
