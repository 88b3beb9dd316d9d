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
}

/* The contiguous gradient range a sync group sums on this rank. */
long rt_group_offset(const struct rt_exec *e, const struct hx_rt_group *g, long *count) {
  const struct rt_params *p = &e->p;
  switch (g->tensors) {
  case HX_RT_SYNC_TOK_EMB:
    *count = (long)e->dims.vocab * e->dims.dim;
    return p->tok_emb;
  case HX_RT_SYNC_HEAD:
    *count = e->dims.dim + (p->lm_head >= 0 ? (long)e->dims.vocab * e->dims.dim : 0);
    return p->final_norm;
  case HX_RT_SYNC_LAYERS:
    break;
  }
  *count = (long)(g->layer_end - g->layer_begin) * p->layer_floats;
  return p->layers + (long)(g->layer_begin - e->cfg->layer_begin) * p->layer_floats;
}

/* This rank's share of the global gradient norm's square: every tensor is
 * counted once over the world, from pipeline 0 (counts_in_norm); the tied
 * tok_emb copy on a last stage that is not also the first is a duplicate. */
double rt_grad_sumsq_for_norm(const struct rt_exec *e) {
  const struct rt_params *p = &e->p;
  if (!e->cfg->counts_in_norm)
    return 0.0;
  double s = hxk_sum_squares(p->g, p->n);
  if (p->tok_emb >= 0 && !e->cfg->has_embedding)
    s -= hxk_sum_squares(p->g + p->tok_emb, (long)e->dims.vocab * e->dims.dim);
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
