/* The executor's parameters: one flat buffer per kind (weights, gradients,
 * AdamW m and v) laid out in the spec's tensor order, initialised by the
 * kernels' sharding-independent init, so any plan starts from the same
 * weights as one device. */
#include <stdlib.h>
#include <string.h>

#include "rt_exec_internal.h"
#include "rt_init.h"

void *rt_calloc(size_t count, size_t size) {
  void *p = calloc(count ? count : 1, size ? size : 1);
  if (!p)
    hx_rt_fatal(HX_RT_EXIT_ERROR, "out of memory (%zu x %zu bytes)", count, size);
  return p;
}

/* tok_emb lives on a first stage, and with tied embeddings also on a last
 * stage (the LM head reads it there). */
static bool holds_tok_emb(const struct hx_rt_rank_config *c) {
  return c->has_embedding || (c->has_head && c->model->tie_embeddings);
}

static void lay_out(struct rt_exec *e) {
  const struct hx_rt_rank_config *c = e->cfg;
  struct rt_params *p = &e->p;
  long vd = (long)e->dims.vocab * e->dims.dim;
  long n = 0;
  p->tok_emb = holds_tok_emb(c) ? n : -1;
  n += holds_tok_emb(c) ? vd : 0;
  p->nlayers = c->layer_end - c->layer_begin;
  p->layer_floats = hxk_layer_floats(&e->dims, &e->shard);
  p->layers = n;
  n += p->nlayers * p->layer_floats;
  p->final_norm = c->has_head ? n : -1;
  n += c->has_head ? e->dims.dim : 0;
  p->lm_head = c->has_head && !c->model->tie_embeddings ? n : -1;
  n += p->lm_head >= 0 ? vd : 0;
  p->n = n;
}

static void bind(struct rt_exec *e) {
  struct rt_params *p = &e->p;
  p->lw = rt_calloc((size_t)p->nlayers, sizeof *p->lw);
  p->lg = rt_calloc((size_t)p->nlayers, sizeof *p->lg);
  for (int l = 0; l < p->nlayers; l++) {
    long off = p->layers + l * p->layer_floats;
    hxk_layer_bind(&p->lw[l], p->w + off, &e->dims, &e->shard);
    hxk_layer_bind(&p->lg[l], p->g + off, &e->dims, &e->shard);
    hxk_layer_decay_mask(p->decay + off, &e->dims, &e->shard);
  }
  if (p->final_norm < 0)
    return;
  long head = p->lm_head >= 0 ? p->lm_head : p->tok_emb; /* tied: the logits read tok_emb */
  p->hw = (struct hxk_head_params){p->w + p->final_norm, p->w + head};
  p->hg = (struct hxk_head_params){p->g + p->final_norm, p->g + head};
}

static void init_values(struct rt_exec *e) {
  struct rt_params *p = &e->p;
  uint64_t seed = e->cfg->train->seed;
  long vd = (long)e->dims.vocab * e->dims.dim;
  if (p->tok_emb >= 0) {
    hxk_init_param(p->w + p->tok_emb, &e->dims, &e->shard, seed, HXK_TOK_EMB, 0);
    memset(p->decay + p->tok_emb, 1, (size_t)vd);
  }
  for (int l = 0; l < p->nlayers; l++)
    for (int t = 0; t < HXK_LAYER_NPARAMS; t++) {
      struct hxk_layer_params *lw = &p->lw[l];
      float *dst[HXK_LAYER_NPARAMS] = {lw->attn_norm, lw->wq,     lw->wk,   lw->wv,    lw->wo,
                                       lw->mlp_norm,  lw->w_gate, lw->w_up, lw->w_down};
      hxk_init_param(dst[t], &e->dims, &e->shard, seed, (enum hxk_param)t, e->cfg->layer_begin + l);
    }
  if (p->final_norm >= 0)
    hxk_init_param(p->w + p->final_norm, &e->dims, &e->shard, seed, HXK_FINAL_NORM, 0);
  if (p->lm_head >= 0) {
    hxk_init_param(p->w + p->lm_head, &e->dims, &e->shard, seed, HXK_LM_HEAD, 0);
    memset(p->decay + p->lm_head, 1, (size_t)vd);
  }
}

long rt_layer_tensor(const struct rt_exec *e, int l, enum hxk_param t) {
  long off = e->p.layers + (long)l * e->p.layer_floats;
  for (int k = 0; k < (int)t; k++)
    off += hxk_layer_param_floats(&e->dims, &e->shard, (enum hxk_param)k);
  return off;
}

/* Tensors held whole by every TP rank with identical gradients. */
static void list_replicated(struct rt_exec *e) {
  const struct rt_params *p = &e->p;
  struct rt_runs *r = &e->replicated;
  long vd = (long)e->dims.vocab * e->dims.dim;
  if (p->tok_emb >= 0)
    rt_runs_add(r, p->tok_emb, vd);
  for (int l = 0; l < p->nlayers; l++) {
    rt_runs_add(r, rt_layer_tensor(e, l, HXK_ATTN_NORM), e->dims.dim);
    rt_runs_add(r, rt_layer_tensor(e, l, HXK_MLP_NORM), e->dims.dim);
  }
  if (p->final_norm >= 0)
    rt_runs_add(r, p->final_norm, e->dims.dim);
  if (p->lm_head >= 0)
    rt_runs_add(r, p->lm_head, vd);
}

static void visit_whole(const struct rt_exec *e, enum hxk_param t, long off, rt_piece_fn visit,
                        void *arg) {
  struct rt_piece piece = {t, 0, off, 0, 0, 0, 0};
  hxk_param_shape(&e->dims, t, &piece.r1, &piece.c1);
  visit(arg, &piece);
}

void rt_for_each_owned(const struct rt_exec *e, rt_piece_fn visit, void *arg) {
  const struct hx_rt_rank_config *c = e->cfg;
  const struct rt_params *p = &e->p;
  if (c->pipeline != 0)
    return;
  bool lead = c->tp_rank == 0;
  if (p->tok_emb >= 0 && lead && c->has_embedding)
    visit_whole(e, HXK_TOK_EMB, p->tok_emb, visit, arg);
  /* A replicated kv head belongs to the rank holding its first query head. */
  int group = e->dims.heads / e->dims.kv_heads;
  int kv_first = (e->shard.q_begin + group - 1) / group, kv_end = e->shard.kv_end;
  long hd = e->dims.head_dim;
  for (int l = 0; l < p->nlayers; l++)
    for (int t = 0; t < HXK_LAYER_NPARAMS; t++) {
      struct rt_piece piece = {(enum hxk_param)t,
                               c->layer_begin + l,
                               rt_layer_tensor(e, l, (enum hxk_param)t),
                               0,
                               0,
                               0,
                               0};
      hxk_param_slice(&e->dims, &e->shard, piece.t, &piece.r0, &piece.r1, &piece.c0, &piece.c1);
      if ((t == HXK_ATTN_NORM || t == HXK_MLP_NORM) && !lead)
        continue;
      if (t == HXK_WK || t == HXK_WV) { /* rows are kv heads: keep the owned ones */
        if (kv_end <= kv_first)
          continue;
        piece.off += (kv_first - e->shard.kv_begin) * hd * e->dims.dim;
        piece.r0 = kv_first * hd;
        piece.r1 = kv_end * hd;
      }
      visit(arg, &piece);
    }
  if (p->final_norm >= 0 && lead)
    visit_whole(e, HXK_FINAL_NORM, p->final_norm, visit, arg);
  if (p->lm_head >= 0 && lead)
    visit_whole(e, HXK_LM_HEAD, p->lm_head, visit, arg);
}

static void add_to_norm(void *arg, const struct rt_piece *piece) {
  rt_runs_add(arg, piece->off, (piece->r1 - piece->r0) * (piece->c1 - piece->c0));
}

void rt_params_init(struct rt_exec *e) {
  lay_out(e);
  struct rt_params *p = &e->p;
  p->w = rt_calloc((size_t)p->n, sizeof(float));
  p->g = rt_calloc((size_t)p->n, sizeof(float));
  p->m = rt_calloc((size_t)p->n, sizeof(float));
  p->v = rt_calloc((size_t)p->n, sizeof(float));
  p->decay = rt_calloc((size_t)p->n, 1); /* norm gains stay 0: no decay */
  bind(e);
  init_values(e);
  list_replicated(e);
  rt_for_each_owned(e, add_to_norm, &e->in_norm);
}

double rt_grad_sumsq_for_norm(const struct rt_exec *e) {
  double s = 0.0;
  for (int i = 0; i < e->in_norm.n; i++)
    s += hxk_sum_squares(e->p.g + e->in_norm.items[i].off, e->in_norm.items[i].n);
  return s;
}

static int add_tensor(const struct rt_exec *e, struct hx_rt_ckpt_tensor *out, int i, long off,
                      long n) {
  if (out)
    out[i] = (struct hx_rt_ckpt_tensor){e->p.w + off, e->p.m + off, e->p.v + off, n};
  return i + 1;
}

/* The checkpoint's tensors in the spec's order (one entry per global tensor
 * and per local layer); with out NULL only counts them. */
int rt_ckpt_tensors(const struct rt_exec *e, struct hx_rt_ckpt_tensor *out) {
  const struct rt_params *p = &e->p;
  long vd = (long)e->dims.vocab * e->dims.dim;
  int i = 0;
  if (p->tok_emb >= 0)
    i = add_tensor(e, out, i, p->tok_emb, vd);
  for (int l = 0; l < p->nlayers; l++)
    i = add_tensor(e, out, i, p->layers + l * p->layer_floats, p->layer_floats);
  if (p->final_norm >= 0)
    i = add_tensor(e, out, i, p->final_norm, e->dims.dim);
  if (p->lm_head >= 0)
    i = add_tensor(e, out, i, p->lm_head, vd);
  return i;
}
