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
  rt_params_lists(e);
}

long rt_layer_tensor(const struct rt_exec *e, int l, enum hxk_param t) {
  long off = e->p.layers + (long)l * e->p.layer_floats;
  for (int k = 0; k < (int)t; k++)
    off += hxk_layer_param_floats(&e->dims, &e->shard, (enum hxk_param)k);
  return off;
}

/* The kv heads this rank counts in the norm and writes in a dump: a kv head
 * that a TP split replicates belongs to the rank holding its first query
 * head, so each is counted once. */
void rt_owned_kv(const struct rt_exec *e, int *begin, int *end) {
  int group = e->dims.heads / e->dims.kv_heads;
  *begin = (e->shard.q_begin + group - 1) / group;
  *end = e->shard.kv_end;
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

/* One copy of every parameter over the world: pipeline 0 only (after the
 * sync every pipeline holds the same values); of the replicated tensors TP
 * rank 0's copy; of a replicated kv head its owner's; and tok_emb from the
 * first stage (a tied copy on a last stage is a duplicate). */
static void list_in_norm(struct rt_exec *e) {
  const struct rt_params *p = &e->p;
  struct rt_runs *r = &e->in_norm;
  if (!e->cfg->counts_in_norm)
    return;
  bool lead = e->cfg->tp_rank == 0;
  long vd = (long)e->dims.vocab * e->dims.dim, row = (long)e->dims.head_dim * e->dims.dim;
  if (p->tok_emb >= 0 && lead && e->cfg->has_embedding)
    rt_runs_add(r, p->tok_emb, vd);
  int kb, ke;
  rt_owned_kv(e, &kb, &ke);
  for (int l = 0; l < p->nlayers; l++)
    for (int t = 0; t < HXK_LAYER_NPARAMS; t++) {
      long off = rt_layer_tensor(e, l, (enum hxk_param)t);
      long n = hxk_layer_param_floats(&e->dims, &e->shard, (enum hxk_param)t);
      if (t == HXK_ATTN_NORM || t == HXK_MLP_NORM) {
        if (lead)
          rt_runs_add(r, off, n);
      } else if (t == HXK_WK || t == HXK_WV) {
        if (ke > kb)
          rt_runs_add(r, off + (kb - e->shard.kv_begin) * row, (ke - kb) * row);
      } else {
        rt_runs_add(r, off, n);
      }
    }
  if (p->final_norm >= 0 && lead)
    rt_runs_add(r, p->final_norm, e->dims.dim);
  if (p->lm_head >= 0 && lead)
    rt_runs_add(r, p->lm_head, vd);
}

void rt_params_lists(struct rt_exec *e) {
  list_replicated(e);
  list_in_norm(e);
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
