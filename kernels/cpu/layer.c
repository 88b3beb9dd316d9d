/* One decoder layer (a TP shard of it), forward and backward, composed from
 * the single kernels. Buffers are carved out of caller memory by one cursor
 * routine, so the size functions and the users can never disagree. */
#include <string.h>

#include "llama.h"

/* Shapes of one call: tokens and the shard's widths. */
struct layer_shape {
  long n;       /* tokens = nseq * local_len */
  /* Sequence parallelism: the rows [row0, row0 + rows) of the n held here
   * (what the norms and residuals run on); off: 0 and n. */
  bool sp;
  long row0, rows;
  long nseq;
  int dim, hd;  /* D, head_dim */
  int nq, nkv;  /* local query / kv heads */
  int qw, kvw;  /* nq*hd, nkv*hd */
  int nf;       /* local ffn columns */
  int seq_len;
  long local_len;          /* tokens per sequence held here */
  const int *positions;    /* their global positions; NULL: 0..local_len-1 */
  /* The attention: NULL for the whole-head kernel (all seq_len tokens, short
   * sequences, today's path), else the caller's hook or `local_hook`. */
  const struct hxk_attention_hook *hook;
  struct hxk_attention_hook local_hook;
  struct hxk_attention_local local;
};

/* Picks the attention of a call: the caller's hook; else, with positions
 * or a part of the sequence, the local hook (the tiled block kernel);
 * else the whole-head kernel. Whole sequences keep that kernel even when
 * long: the tiled one agrees only within ~5e-6 element-wise (at T = 1024,
 * kernels_layer_seq), not bit for bit, so a caller asks for it by passing
 * positions (0..T-1 will do). The shape must not be copied afterwards
 * (local_hook points into it). */
static void choose_attention(struct layer_shape *sh,
                             const struct hxk_layer_ctx *ctx,
                             const int *kv_of) {
  sh->hook = ctx->attention;
  if (sh->hook || (!sh->positions && sh->local_len == sh->seq_len))
    return;
  sh->local = (struct hxk_attention_local){sh->positions, sh->local_len,
                                           kv_of, sh->nq, sh->nkv, sh->hd};
  hxk_attention_hook_local(&sh->local_hook, &sh->local);
  sh->hook = &sh->local_hook;
}

static void shape_of(struct layer_shape *out, const struct hxk_layer_ctx *ctx,
                     long nseq) {
  const struct hxk_dims *d = ctx->dims;
  const struct hxk_shard *s = ctx->shard;
  struct layer_shape sh;
  sh.local_len = ctx->local_len > 0 ? ctx->local_len : d->seq_len;
  sh.positions = ctx->positions;
  sh.nseq = nseq;
  sh.n = nseq * sh.local_len;
  sh.sp = ctx->sp_size > 1;
  sh.row0 = 0;
  sh.rows = sh.n;
  if (sh.sp) {
    long end = 0;
    hxk_sp_rows(sh.n, ctx->sp_size, ctx->sp_rank, &sh.row0, &end);
    sh.rows = end - sh.row0;
  }
  sh.dim = d->dim;
  sh.hd = d->head_dim;
  sh.nq = s->q_end - s->q_begin;
  sh.nkv = s->kv_end - s->kv_begin;
  sh.qw = sh.nq * sh.hd;
  sh.kvw = sh.nkv * sh.hd;
  sh.nf = s->ffn_end - s->ffn_begin;
  sh.seq_len = d->seq_len;
  *out = sh;
  choose_attention(out, ctx, ctx->kv_of);
}

/* Hands out consecutive slices of a buffer; with a NULL base it only counts,
 * which is how the *_floats() functions measure. */
struct cursor {
  float *base;
  long used;
};

static float *take(struct cursor *c, long n) {
  float *at = c->base ? c->base + c->used : NULL;
  c->used += n;
  return at;
}

/* Everything the backward reads, in forward order; lse is the whole-head
 * kernel's, `saved` the hook's (one or the other is empty). Under sequence
 * parallelism x, rstd1, a, x1, rstd2 and m hold this member's rows only (a
 * and m are all-gathered again in the backward, as Megatron does). */
struct layer_acts {
  float *x, *rstd1, *a, *q, *k, *v, *lse, *o;
  float *x1, *rstd2, *m, *gate, *up, *h;
  float *saved;
};

static struct layer_acts carve_acts(struct cursor *c,
                                    const struct layer_shape *sh) {
  struct layer_acts a;
  long n = sh->n, nr = sh->rows;
  a.x = take(c, nr * sh->dim);
  a.rstd1 = take(c, nr);
  a.a = take(c, nr * sh->dim);
  a.q = take(c, n * sh->qw);
  a.k = take(c, n * sh->kvw);
  a.v = take(c, n * sh->kvw);
  a.lse = take(c, sh->hook ? 0 : n * sh->nq);
  a.o = take(c, n * sh->qw);
  a.x1 = take(c, nr * sh->dim);
  a.rstd2 = take(c, nr);
  a.m = take(c, nr * sh->dim);
  a.gate = take(c, n * sh->nf);
  a.up = take(c, n * sh->nf);
  a.h = take(c, n * sh->nf);
  a.saved = take(c, sh->hook ? sh->hook->saved_floats(sh->nseq, sh->hook->arg)
                             : 0);
  return a;
}

/* Scratch: [full activations when recomputing] + forward temporaries +
 * backward temporaries, each its own region so a recomputing backward can
 * run the forward without clobbering its own buffers. */
struct layer_scratch {
  struct layer_acts full;  /* recompute mode only */
  float *partial;          /* [n, D]: a row-parallel output before all-reduce;
                              SP backward: the gathered output gradient */
  float *gathered;         /* SP: [n, D], the all-gathered a or m; else empty */
  float *attn;             /* the attention's (kernel's or hook's) */
  float *dx1;              /* [rows, D] */
  float *dm, *da;          /* [n, D] */
  float *drows;            /* SP: [rows, D], dm or da reduce-scattered */
  float *dh, *dgate, *dup; /* [n, nf] */
  float *dout_attn, *dq;   /* [n, nq*hd] */
  float *dk, *dv;          /* [n, nkv*hd] */
};

static struct layer_scratch carve_scratch(struct cursor *c,
                                          const struct hxk_layer_ctx *ctx,
                                          const struct layer_shape *sh) {
  struct layer_scratch s;
  memset(&s.full, 0, sizeof s.full);
  if (ctx->recompute)
    s.full = carve_acts(c, sh);
  long n = sh->n, nr = sh->rows;
  s.partial = take(c, n * sh->dim);
  s.gathered = take(c, sh->sp ? n * sh->dim : 0);
  s.attn = take(c, sh->hook ? sh->hook->scratch_floats(sh->nseq, sh->hook->arg)
                            : hxk_attention_scratch_floats(sh->seq_len));
  s.dx1 = take(c, nr * sh->dim);
  s.dm = take(c, n * sh->dim);
  s.da = take(c, n * sh->dim);
  s.drows = take(c, sh->sp ? nr * sh->dim : 0);
  s.dh = take(c, n * sh->nf);
  s.dgate = take(c, n * sh->nf);
  s.dup = take(c, n * sh->nf);
  s.dout_attn = take(c, n * sh->qw);
  s.dq = take(c, n * sh->qw);
  s.dk = take(c, n * sh->kvw);
  s.dv = take(c, n * sh->kvw);
  return s;
}

long hxk_layer_acts_floats(const struct hxk_layer_ctx *ctx, long nseq) {
  struct layer_shape sh;
  shape_of(&sh, ctx, nseq);
  if (ctx->recompute)
    return sh.rows * sh.dim;
  struct cursor c = {NULL, 0};
  carve_acts(&c, &sh);
  return c.used;
}

long hxk_layer_scratch_floats(const struct hxk_layer_ctx *ctx, long nseq) {
  struct layer_shape sh;
  shape_of(&sh, ctx, nseq);
  struct cursor c = {NULL, 0};
  carve_scratch(&c, ctx, &sh);
  return c.used;
}

static void allreduce(const struct hxk_layer_ctx *ctx, float *buf, long n) {
  if (ctx->allreduce)
    ctx->allreduce(buf, n, ctx->allreduce_arg);
}

static void zero(float *buf, long n) { memset(buf, 0, (size_t)n * sizeof *buf); }

/* SP: full[n, D] from every member's rows, this member's copied from rows
 * to their offset first; returns full. Off: rows themselves (already the
 * whole [n, D]). */
static const float *gather_rows(const struct hxk_layer_ctx *ctx, const struct layer_shape *sh,
                                float *full, const float *rows) {
  if (!sh->sp)
    return rows;
  memcpy(full + sh->row0 * sh->dim, rows, (size_t)(sh->rows * sh->dim) * sizeof *rows);
  ctx->allgather(full, sh->n, sh->dim, ctx->sp_arg);
  return full;
}

/* A row-parallel output partial[n, D] summed over the TP group: in place
 * (all-reduce), or (SP) this member's rows into rows_out; returns where the
 * sum of this member's rows is. */
static const float *sum_partials(const struct hxk_layer_ctx *ctx, const struct layer_shape *sh,
                                 float *partial, float *rows_out) {
  if (!sh->sp) {
    allreduce(ctx, partial, sh->n * sh->dim);
    return partial;
  }
  ctx->reduce_scatter(partial, rows_out, sh->n, sh->dim, ctx->sp_arg);
  return rows_out;
}

/* The forward into a full activation set `a` (a->x already holds the input). */
static void forward_full(const struct hxk_layer_ctx *ctx,
                         const struct hxk_layer_params *w,
                         const struct layer_shape *sh, struct layer_acts *a,
                         float *out, const struct layer_scratch *s) {
  const struct hxk_dims *d = ctx->dims;
  long n = sh->n, nr = sh->rows, nrd = nr * sh->dim;
  /* attention block */
  hxk_rmsnorm_forward(a->a, a->rstd1, a->x, w->attn_norm, nr, sh->dim,
                      d->norm_eps);
  const float *an = gather_rows(ctx, sh, s->gathered, a->a);
  hxk_linear_forward(a->q, an, w->wq, n, sh->dim, sh->qw, 0.0f);
  hxk_linear_forward(a->k, an, w->wk, n, sh->dim, sh->kvw, 0.0f);
  hxk_linear_forward(a->v, an, w->wv, n, sh->dim, sh->kvw, 0.0f);
  hxk_rope_forward_pos(a->q, ctx->rope, n, sh->nq, sh->hd, sh->positions,
                       sh->local_len);
  hxk_rope_forward_pos(a->k, ctx->rope, n, sh->nkv, sh->hd, sh->positions,
                       sh->local_len);
  if (sh->hook)
    sh->hook->forward(a->o, a->q, a->k, a->v, sh->nseq, a->saved, s->attn,
                      sh->hook->arg);
  else
    hxk_attention_forward(a->o, a->lse, a->q, a->k, a->v, ctx->kv_of,
                          sh->nseq, sh->seq_len, sh->nq, sh->nkv, sh->hd,
                          s->attn);
  hxk_linear_forward(s->partial, a->o, w->wo, n, sh->qw, sh->dim, 0.0f);
  /* row-parallel wo: sum the TP partials */
  const float *attn_out = sum_partials(ctx, sh, s->partial, a->x1);
  hxk_residual_forward(a->x1, a->x, attn_out, nrd);
  /* MLP block */
  hxk_rmsnorm_forward(a->m, a->rstd2, a->x1, w->mlp_norm, nr, sh->dim,
                      d->norm_eps);
  const float *mn = gather_rows(ctx, sh, s->gathered, a->m);
  hxk_linear_forward(a->gate, mn, w->w_gate, n, sh->dim, sh->nf, 0.0f);
  hxk_linear_forward(a->up, mn, w->w_up, n, sh->dim, sh->nf, 0.0f);
  hxk_swiglu_forward(a->h, a->gate, a->up, n * sh->nf);
  hxk_linear_forward(s->partial, a->h, w->w_down, n, sh->nf, sh->dim, 0.0f);
  const float *mlp_out = sum_partials(ctx, sh, s->partial, out); /* row-parallel w_down */
  hxk_residual_forward(out, a->x1, mlp_out, nrd);
}

void hxk_layer_forward(const struct hxk_layer_ctx *ctx,
                       const struct hxk_layer_params *w, const float *x,
                       float *out, float *acts, float *scratch, long nseq) {
  struct layer_shape sh;
  shape_of(&sh, ctx, nseq);
  struct cursor sc = {scratch, 0};
  struct layer_scratch s = carve_scratch(&sc, ctx, &sh);
  struct layer_acts a;
  if (ctx->recompute) {
    a = s.full; /* kept: the input only; the rest is thrown away */
    memcpy(acts, x, (size_t)(sh.rows * sh.dim) * sizeof *x);
  } else {
    struct cursor ac = {acts, 0};
    a = carve_acts(&ac, &sh);
  }
  memcpy(a.x, x, (size_t)(sh.rows * sh.dim) * sizeof *x);
  forward_full(ctx, w, &sh, &a, out, &s);
}

/* MLP half of the backward: from dx1 (= dout) to dx1 += d(mlp)/dx1. */
static void backward_mlp(const struct hxk_layer_ctx *ctx,
                         const struct hxk_layer_params *w,
                         const struct hxk_layer_params *g,
                         const struct layer_shape *sh,
                         const struct layer_acts *a,
                         const struct layer_scratch *s) {
  long n = sh->n, nf_all = n * sh->nf;
  zero(s->dh, nf_all);
  zero(s->dgate, nf_all);
  zero(s->dup, nf_all);
  zero(s->dm, n * sh->dim);
  /* SP: the gradient of the forward's reduce-scatter is an all-gather */
  const float *dy = gather_rows(ctx, sh, s->partial, s->dx1);
  hxk_linear_backward(s->dh, g->w_down, dy, a->h, w->w_down, n, sh->nf,
                      sh->dim);
  hxk_swiglu_backward(s->dgate, s->dup, s->dh, a->gate, a->up, nf_all);
  const float *mn = gather_rows(ctx, sh, s->gathered, a->m);
  hxk_linear_backward(s->dm, g->w_gate, s->dgate, mn, w->w_gate, n, sh->dim,
                      sh->nf);
  hxk_linear_backward(s->dm, g->w_up, s->dup, mn, w->w_up, n, sh->dim,
                      sh->nf);
  /* column-parallel input gradient (SP: of an all-gather, a reduce-scatter) */
  const float *dm = sum_partials(ctx, sh, s->dm, s->drows);
  hxk_rmsnorm_backward(s->dx1, g->mlp_norm, dm, a->x1, w->mlp_norm,
                       a->rstd2, sh->rows, sh->dim);
}

/* Attention half: from dx1 to dx (written). */
static void backward_attention(const struct hxk_layer_ctx *ctx,
                               const struct hxk_layer_params *w,
                               const struct hxk_layer_params *g,
                               const struct layer_shape *sh,
                               const struct layer_acts *a,
                               const struct layer_scratch *s, float *dx) {
  long n = sh->n, nd = n * sh->dim;
  zero(s->dout_attn, n * sh->qw);
  zero(s->dq, n * sh->qw);
  zero(s->dk, n * sh->kvw);
  zero(s->dv, n * sh->kvw);
  zero(s->da, nd);
  const float *dy = gather_rows(ctx, sh, s->partial, s->dx1);
  hxk_linear_backward(s->dout_attn, g->wo, dy, a->o, w->wo, n, sh->qw,
                      sh->dim);
  if (sh->hook)
    sh->hook->backward(s->dq, s->dk, s->dv, s->dout_attn, a->q, a->k, a->v,
                       a->o, a->saved, sh->nseq, s->attn, sh->hook->arg);
  else
    hxk_attention_backward(s->dq, s->dk, s->dv, s->dout_attn, a->q, a->k,
                           a->v, a->lse, ctx->kv_of, sh->nseq, sh->seq_len,
                           sh->nq, sh->nkv, sh->hd, s->attn);
  hxk_rope_backward_pos_inplace(s->dq, ctx->rope, n, sh->nq, sh->hd,
                                sh->positions, sh->local_len);
  hxk_rope_backward_pos_inplace(s->dk, ctx->rope, n, sh->nkv, sh->hd,
                                sh->positions, sh->local_len);
  const float *an = gather_rows(ctx, sh, s->gathered, a->a);
  hxk_linear_backward(s->da, g->wq, s->dq, an, w->wq, n, sh->dim, sh->qw);
  hxk_linear_backward(s->da, g->wk, s->dk, an, w->wk, n, sh->dim, sh->kvw);
  hxk_linear_backward(s->da, g->wv, s->dv, an, w->wv, n, sh->dim, sh->kvw);
  /* column-parallel input gradient */
  const float *da = sum_partials(ctx, sh, s->da, s->drows);
  long nrd = sh->rows * sh->dim;
  memcpy(dx, s->dx1, (size_t)nrd * sizeof *dx); /* residual path */
  hxk_rmsnorm_backward(dx, g->attn_norm, da, a->x, w->attn_norm, a->rstd1,
                       sh->rows, sh->dim);
}

void hxk_layer_backward(const struct hxk_layer_ctx *ctx,
                        const struct hxk_layer_params *w,
                        const struct hxk_layer_params *g, const float *dout,
                        float *dx, const float *acts, float *scratch,
                        long nseq) {
  struct layer_shape sh;
  shape_of(&sh, ctx, nseq);
  struct cursor sc = {scratch, 0};
  struct layer_scratch s = carve_scratch(&sc, ctx, &sh);
  struct layer_acts a;
  if (ctx->recompute) {
    a = s.full;
    memcpy(a.x, acts, (size_t)(sh.rows * sh.dim) * sizeof *acts);
    /* The recomputed output is not needed: park it in dx, written below. */
    forward_full(ctx, w, &sh, &a, dx, &s);
  } else {
    /* The activations are only read; the cast lets one carve serve both. */
    struct cursor ac = {(float *)acts, 0};
    a = carve_acts(&ac, &sh);
  }
  memcpy(s.dx1, dout, (size_t)(sh.rows * sh.dim) * sizeof *dout);
  backward_mlp(ctx, w, g, &sh, &a, &s);
  backward_attention(ctx, w, g, &sh, &a, &s, dx);
}

void hxk_sp_rows(long n, int p, int r, long *begin, long *end) {
  long base = n / p, extra = n % p;
  *begin = r * base + (r < extra ? r : extra);
  *end = *begin + base + (r < extra ? 1 : 0);
}
