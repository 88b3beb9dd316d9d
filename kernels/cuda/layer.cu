/* One decoder layer (a TP shard of it), forward and backward, composed from
 * the kernels of this folder exactly as kernels/cpu/layer.c composes the CPU
 * ones (same buffers, same order, same all-reduce points):
 *
 *   a = rmsnorm(x, attn_norm); q,k,v = a wq^T, a wk^T, a wv^T; RoPE(q, k);
 *   o = attention(q, k, v); x1 = x + allreduce(o wo^T);
 *   m = rmsnorm(x1, mlp_norm); h = silu(m w_gate^T) * (m w_up^T);
 *   out = x1 + allreduce(h w_down^T)
 *
 * Buffers are carved out of caller memory by one cursor routine (slices
 * aligned to 256 bytes, which cuBLASLt and the tensor-core attention like),
 * so the size functions and the users can never disagree. Elements are of
 * ctx->dt except rstd and lse (fp32) and the weight gradients (fp32). */
#include <string.h>

#include "kernels/cuda/common.cuh"

struct layer_shape {
  long n;      /* tokens = nseq * seq_len */
  int dim, hd; /* D, head_dim */
  int nq, nkv; /* local query / kv heads */
  int qw, kvw; /* nq*hd, nkv*hd */
  int nf;      /* local ffn columns */
  int seq_len;
  size_t es;   /* bytes of one dt element */
};

static struct layer_shape shape_of(const struct hxc_layer_ctx *ctx, long nseq) {
  const struct hxk_dims *d = ctx->dims;
  const struct hxk_shard *s = ctx->shard;
  struct layer_shape sh;
  sh.n = nseq * d->seq_len;
  sh.dim = d->dim;
  sh.hd = d->head_dim;
  sh.nq = s->q_end - s->q_begin;
  sh.nkv = s->kv_end - s->kv_begin;
  sh.qw = sh.nq * sh.hd;
  sh.kvw = sh.nkv * sh.hd;
  sh.nf = s->ffn_end - s->ffn_begin;
  sh.seq_len = d->seq_len;
  sh.es = hxc_dtype_bytes(ctx->dt);
  return sh;
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

/* Everything the backward reads, in forward order. */
struct layer_acts {
  void *x, *a, *q, *k, *v, *o, *x1, *m, *gate, *up, *h;
  float *rstd1, *lse, *rstd2;
};

static struct layer_acts carve_acts(struct cursor *c,
                                    const struct layer_shape *sh) {
  struct layer_acts a;
  long n = sh->n;
  a.x = take_el(c, sh, n * sh->dim);
  a.rstd1 = take_f(c, n);
  a.a = take_el(c, sh, n * sh->dim);
  a.q = take_el(c, sh, n * sh->qw);
  a.k = take_el(c, sh, n * sh->kvw);
  a.v = take_el(c, sh, n * sh->kvw);
  a.lse = take_f(c, n * sh->nq);
  a.o = take_el(c, sh, n * sh->qw);
  a.x1 = take_el(c, sh, n * sh->dim);
  a.rstd2 = take_f(c, n);
  a.m = take_el(c, sh, n * sh->dim);
  a.gate = take_el(c, sh, n * sh->nf);
  a.up = take_el(c, sh, n * sh->nf);
  a.h = take_el(c, sh, n * sh->nf);
  return a;
}

/* Scratch: [full activations when recomputing] + forward and backward
 * temporaries, each its own region (the attention's D buffer lives in the
 * hxc_ctx). */
struct layer_scratch {
  struct layer_acts full;  /* recompute mode only */
  void *partial;           /* [n, D]: a row-parallel output before all-reduce */
  void *dx1, *dm, *da;     /* [n, D] */
  void *dh, *dgate, *dup;  /* [n, nf] */
  void *dout_attn, *dq;    /* [n, nq*hd] */
  void *dk, *dv;           /* [n, nkv*hd] */
};

static struct layer_scratch carve_scratch(struct cursor *c,
                                          const struct hxc_layer_ctx *ctx,
                                          const struct layer_shape *sh) {
  struct layer_scratch s;
  memset(&s.full, 0, sizeof s.full);
  if (ctx->recompute)
    s.full = carve_acts(c, sh);
  long n = sh->n;
  s.partial = take_el(c, sh, n * sh->dim);
  s.dx1 = take_el(c, sh, n * sh->dim);
  s.dm = take_el(c, sh, n * sh->dim);
  s.da = take_el(c, sh, n * sh->dim);
  s.dh = take_el(c, sh, n * sh->nf);
  s.dgate = take_el(c, sh, n * sh->nf);
  s.dup = take_el(c, sh, n * sh->nf);
  s.dout_attn = take_el(c, sh, n * sh->qw);
  s.dq = take_el(c, sh, n * sh->qw);
  s.dk = take_el(c, sh, n * sh->kvw);
  s.dv = take_el(c, sh, n * sh->kvw);
  return s;
}

size_t hxc_layer_acts_bytes(const struct hxc_layer_ctx *ctx, long nseq) {
  struct layer_shape sh = shape_of(ctx, nseq);
  struct cursor c = {NULL, 0};
  if (ctx->recompute)
    take_el(&c, &sh, sh.n * sh.dim);
  else
    carve_acts(&c, &sh);
  return c.used;
}

size_t hxc_layer_scratch_bytes(const struct hxc_layer_ctx *ctx, long nseq) {
  struct layer_shape sh = shape_of(ctx, nseq);
  struct cursor c = {NULL, 0};
  carve_scratch(&c, ctx, &sh);
  return c.used;
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

static void zero(const struct hxc_layer_ctx *ctx, void *buf, size_t bytes) {
  HXC_CHECK(cudaMemsetAsync(buf, 0, bytes, ctx->stream));
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
  long n = sh->n, nd = n * sh->dim, nseq = n / sh->seq_len;
  /* attention block */
  hxc_rmsnorm_forward(a->a, a->rstd1, a->x, w->attn_norm, n, sh->dim,
                      d->norm_eps, dt, st);
  hxc_linear_forward(gpu, a->q, a->a, w->wq, n, sh->dim, sh->qw, 0.0f, dt, st);
  hxc_linear_forward(gpu, a->k, a->a, w->wk, n, sh->dim, sh->kvw, 0.0f, dt, st);
  hxc_linear_forward(gpu, a->v, a->a, w->wv, n, sh->dim, sh->kvw, 0.0f, dt, st);
  hxc_rope_forward(a->q, ctx->rope, n, sh->nq, sh->hd, sh->seq_len, dt, st);
  hxc_rope_forward(a->k, ctx->rope, n, sh->nkv, sh->hd, sh->seq_len, dt, st);
  hxc_attention_forward(a->o, a->lse, a->q, a->k, a->v,
                        hxc_kv_map_of(d, ctx->shard), nseq, sh->seq_len,
                        sh->nq, sh->nkv, sh->hd, dt, st);
  hxc_linear_forward(gpu, s->partial, a->o, w->wo, n, sh->qw, sh->dim, 0.0f,
                     dt, st);
  allreduce(ctx, s->partial, nd); /* row-parallel wo: sum the TP partials */
  hxc_residual_forward(a->x1, a->x, s->partial, nd, dt, st);
  /* MLP block */
  hxc_rmsnorm_forward(a->m, a->rstd2, a->x1, w->mlp_norm, n, sh->dim,
                      d->norm_eps, dt, st);
  hxc_linear_forward(gpu, a->gate, a->m, w->w_gate, n, sh->dim, sh->nf, 0.0f,
                     dt, st);
  hxc_linear_forward(gpu, a->up, a->m, w->w_up, n, sh->dim, sh->nf, 0.0f, dt,
                     st);
  hxc_swiglu_forward(a->h, a->gate, a->up, n * sh->nf, dt, st);
  hxc_linear_forward(gpu, s->partial, a->h, w->w_down, n, sh->nf, sh->dim,
                     0.0f, dt, st);
  allreduce(ctx, s->partial, nd); /* row-parallel w_down */
  hxc_residual_forward(out, a->x1, s->partial, nd, dt, st);
}

void hxc_layer_forward(const struct hxc_layer_ctx *ctx,
                       const struct hxc_layer_params *w, const void *x,
                       void *out, void *acts, void *scratch, long nseq) {
  struct layer_shape sh = shape_of(ctx, nseq);
  struct cursor sc = {(char *)scratch, 0};
  struct layer_scratch s = carve_scratch(&sc, ctx, &sh);
  struct layer_acts a;
  size_t xbytes = (size_t)sh.n * sh.dim * sh.es;
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

/* MLP half of the backward: from dx1 (= dout) to dx1 += d(mlp)/dx1. */
static void backward_mlp(const struct hxc_layer_ctx *ctx,
                         const struct hxc_layer_params *w,
                         const struct hxc_layer_grads *g,
                         const struct layer_shape *sh,
                         const struct layer_acts *a,
                         const struct layer_scratch *s) {
  enum hxc_dtype dt = ctx->dt;
  cudaStream_t st = ctx->stream;
  struct hxc_ctx *gpu = ctx->gpu;
  long n = sh->n, nf_all = n * sh->nf;
  zero(ctx, s->dh, (size_t)nf_all * sh->es);
  zero(ctx, s->dgate, (size_t)nf_all * sh->es);
  zero(ctx, s->dup, (size_t)nf_all * sh->es);
  zero(ctx, s->dm, (size_t)n * sh->dim * sh->es);
  hxc_linear_backward(gpu, s->dh, g->w_down, s->dx1, a->h, w->w_down, n,
                      sh->nf, sh->dim, dt, st);
  hxc_swiglu_backward(s->dgate, s->dup, s->dh, a->gate, a->up, nf_all, dt, st);
  hxc_linear_backward(gpu, s->dm, g->w_gate, s->dgate, a->m, w->w_gate, n,
                      sh->dim, sh->nf, dt, st);
  hxc_linear_backward(gpu, s->dm, g->w_up, s->dup, a->m, w->w_up, n, sh->dim,
                      sh->nf, dt, st);
  allreduce(ctx, s->dm, n * sh->dim); /* column-parallel input gradient */
  hxc_rmsnorm_backward(gpu, s->dx1, g->mlp_norm, s->dm, a->x1, w->mlp_norm,
                       a->rstd2, n, sh->dim, dt, st);
}

/* Attention half: from dx1 to dx (written). */
static void backward_attention(const struct hxc_layer_ctx *ctx,
                               const struct hxc_layer_params *w,
                               const struct hxc_layer_grads *g,
                               const struct layer_shape *sh,
                               const struct layer_acts *a,
                               const struct layer_scratch *s, void *dx) {
  enum hxc_dtype dt = ctx->dt;
  cudaStream_t st = ctx->stream;
  struct hxc_ctx *gpu = ctx->gpu;
  long n = sh->n, nd = n * sh->dim, nseq = n / sh->seq_len;
  zero(ctx, s->dout_attn, (size_t)n * sh->qw * sh->es);
  zero(ctx, s->dq, (size_t)n * sh->qw * sh->es);
  zero(ctx, s->dk, (size_t)n * sh->kvw * sh->es);
  zero(ctx, s->dv, (size_t)n * sh->kvw * sh->es);
  zero(ctx, s->da, (size_t)nd * sh->es);
  hxc_linear_backward(gpu, s->dout_attn, g->wo, s->dx1, a->o, w->wo, n,
                      sh->qw, sh->dim, dt, st);
  hxc_attention_backward(gpu, s->dq, s->dk, s->dv, s->dout_attn, a->q, a->k,
                         a->v, a->o, a->lse,
                         hxc_kv_map_of(ctx->dims, ctx->shard), nseq,
                         sh->seq_len, sh->nq, sh->nkv, sh->hd, dt, st);
  hxc_rope_backward_inplace(s->dq, ctx->rope, n, sh->nq, sh->hd, sh->seq_len,
                            dt, st);
  hxc_rope_backward_inplace(s->dk, ctx->rope, n, sh->nkv, sh->hd, sh->seq_len,
                            dt, st);
  hxc_linear_backward(gpu, s->da, g->wq, s->dq, a->a, w->wq, n, sh->dim,
                      sh->qw, dt, st);
  hxc_linear_backward(gpu, s->da, g->wk, s->dk, a->a, w->wk, n, sh->dim,
                      sh->kvw, dt, st);
  hxc_linear_backward(gpu, s->da, g->wv, s->dv, a->a, w->wv, n, sh->dim,
                      sh->kvw, dt, st);
  allreduce(ctx, s->da, nd); /* column-parallel input gradient */
  HXC_CHECK(cudaMemcpyAsync(dx, s->dx1, (size_t)nd * sh->es,
                            cudaMemcpyDeviceToDevice, st)); /* residual path */
  hxc_rmsnorm_backward(gpu, dx, g->attn_norm, s->da, a->x, w->attn_norm,
                       a->rstd1, n, sh->dim, dt, st);
}

void hxc_layer_backward(const struct hxc_layer_ctx *ctx,
                        const struct hxc_layer_params *w,
                        const struct hxc_layer_grads *g, const void *dout,
                        void *dx, const void *acts, void *scratch, long nseq) {
  struct layer_shape sh = shape_of(ctx, nseq);
  struct cursor sc = {(char *)scratch, 0};
  struct layer_scratch s = carve_scratch(&sc, ctx, &sh);
  struct layer_acts a;
  size_t xbytes = (size_t)sh.n * sh.dim * sh.es;
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
  HXC_CHECK(cudaMemcpyAsync(s.dx1, dout, xbytes, cudaMemcpyDeviceToDevice,
                            ctx->stream));
  backward_mlp(ctx, w, g, &sh, &a, &s);
  backward_attention(ctx, w, g, &sh, &a, &s, dx);
}
