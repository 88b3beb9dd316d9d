/* The executor's parameters: one flat buffer per kind (weights, gradients,
 * AdamW m and v) laid out in the spec's tensor order, allocated by the
 * device, initialised on the host by the kernels' sharding-independent init
 * and uploaded, so any plan on any backend starts from the same weights as
 * one device; their host copies for checkpoints; and --dump-weights, which
 * gathers them unsharded on rank 0. */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rt_exec_internal.h"
#include "rt_init.h"
#include "seq/rt_seq.h"

/* tok_emb lives on a first stage, and with tied embeddings also on a last
 * stage (the LM head reads it there). */
static bool holds_tok_emb(const struct hx_rt_rank_config *c) {
  return c->has_embedding || (c->has_head && c->model->tie_embeddings);
}

static void lay_out(struct rt_exec *e) {
  const struct hx_rt_rank_config *c = e->cfg;
  struct rt_layout *p = &e->p.lay;
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
  p->head_weight = p->lm_head >= 0 ? p->lm_head : p->tok_emb; /* tied: the logits read tok_emb */
  p->n = n;
}

/* Every tensor the rank holds, in buffer order, with its AdamW decay
 * (matrices decay, norm gains do not): the device's optimizer table. */
static void list_tensors(struct rt_exec *e) {
  struct rt_layout *p = &e->p.lay;
  long vd = (long)e->dims.vocab * e->dims.dim;
  int cap = 3 + p->nlayers * HXK_LAYER_NPARAMS, n = 0;
  struct rt_tensor *t = hx_rt_calloc((size_t)cap, sizeof *t);
  if (p->tok_emb >= 0)
    t[n++] = (struct rt_tensor){p->tok_emb, vd, hxk_param_decays(HXK_TOK_EMB), p->tok_emb};
  for (int l = 0; l < p->nlayers; l++)
    for (int k = 0; k < HXK_LAYER_NPARAMS; k++) {
      enum hxk_param pk = (enum hxk_param)k;
      long off = rt_layer_tensor(e, l, pk);
      t[n++] = (struct rt_tensor){off, hxk_layer_param_floats(&e->dims, &e->shard, pk),
                                  hxk_param_decays(pk), off};
    }
  if (p->final_norm >= 0)
    t[n++] = (struct rt_tensor){p->final_norm, e->dims.dim, hxk_param_decays(HXK_FINAL_NORM),
                                p->final_norm};
  if (p->lm_head >= 0)
    t[n++] = (struct rt_tensor){p->lm_head, vd, hxk_param_decays(HXK_LM_HEAD), p->lm_head};
  p->tensors = t;
  p->ntensors = n;
}

/* The initial weights in a host buffer: per tensor, the slice this rank
 * holds of the full tensor's init. */
static void init_values(const struct rt_exec *e, float *w) {
  const struct rt_layout *p = &e->p.lay;
  uint64_t seed = e->cfg->train->seed;
  if (p->tok_emb >= 0)
    hxk_init_param(w + p->tok_emb, &e->dims, &e->shard, seed, HXK_TOK_EMB, 0);
  for (int l = 0; l < p->nlayers; l++)
    for (int t = 0; t < HXK_LAYER_NPARAMS; t++)
      hxk_init_param(w + rt_layer_tensor(e, l, (enum hxk_param)t), &e->dims, &e->shard, seed,
                     (enum hxk_param)t, e->cfg->layer_begin + l);
  if (p->final_norm >= 0)
    hxk_init_param(w + p->final_norm, &e->dims, &e->shard, seed, HXK_FINAL_NORM, 0);
  if (p->lm_head >= 0)
    hxk_init_param(w + p->lm_head, &e->dims, &e->shard, seed, HXK_LM_HEAD, 0);
}

/* Tensors held whole by every TP rank with identical gradients. */
static void list_replicated(struct rt_exec *e) {
  const struct rt_layout *p = &e->p.lay;
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
  const struct rt_layout *p = &e->p.lay;
  if (c->pipeline != 0 || (c->seq && c->seq->unit != 0)) /* HexiSeq: the ring's first unit */
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

/* Sequence parallelism runs on TP stages of whole sequences when the plan
 * asks for it; a HexiSeq stage keeps the all-reduces (its rows are already
 * a part of each sequence). Also this rank's rows and the collectives'
 * counts. */
static void sp_init(struct rt_exec *e) {
  const struct hx_rt_rank_config *c = e->cfg;
  bool sp = c->sequence_parallel && c->tp > 1 && !e->hs.on && c->layer_end > c->layer_begin;
  e->model.sp_size = sp ? c->tp : 0;
  e->model.sp_rank = e->model.sp_size > 1 ? c->tp_rank : 0;
  e->model.tp_reduce_scatter = e->model.sp_size > 1 ? rt_tp_reduce_scatter : NULL;
  e->model.tp_allgather = e->model.sp_size > 1 ? rt_tp_allgather : NULL;
  if (e->model.sp_size > 1)
    e->sp_counts = hx_rt_calloc((size_t)c->tp, sizeof *e->sp_counts);
}

/* The device's view of the model; the TP hook only when TP splits it. */
static void describe_model(struct rt_exec *e) {
  bool split = e->cfg->tp > 1;
  e->model = (struct rt_model){.dims = &e->dims,
                               .shard = &e->shard,
                               .recompute = e->cfg->recompute != 0,
                               .nseq = e->cfg->micro_batch_size,
                               .layout = &e->p.lay,
                               .tp_reduce = split ? rt_tp_allreduce : NULL,
                               .tp_arg = split ? e : NULL,
                               .local_len = e->hs.on ? e->hs.local_len : 0,
                               .positions = e->hs.on ? e->hs.positions : NULL,
                               .attention = e->hs.on ? rt_seq_attention_hook(e->hs.hook) : NULL};
  sp_init(e);
}

void rt_params_init(struct rt_exec *e) {
  lay_out(e);
  list_tensors(e);
  list_replicated(e);
  rt_for_each_owned(e, add_to_norm, &e->in_norm);
  e->p.lay.norm = e->in_norm.items;
  e->p.lay.nnorm = e->in_norm.n;
  rt_sync_plan(e); /* the optimizer table, moments and norm (ZeRO-1's shards) */
  describe_model(e);
  e->dev->setup(&e->model, &e->p.dev);
  /* A backend that draws the spec's stream itself (CUDA: a 1.3B rank in
   * seconds, where the host took a minute) saves the host buffer and its
   * upload; the values are the host's to within a float ulp. */
  if (e->dev->init_weights) {
    e->dev->init_weights(e->cfg->train->seed, e->cfg->layer_begin);
    return;
  }
  struct rt_host_params init = rt_host_params_new(e, false);
  init_values(e, init.w);
  rt_host_params_upload(e, &init);
  rt_host_params_free(&init);
}

struct rt_host_params rt_host_params_new(const struct rt_exec *e, bool moments) {
  size_t n = (size_t)e->p.lay.n;
  struct rt_host_params h = {hx_rt_calloc(n, sizeof(float)), NULL, NULL};
  if (moments) {
    h.m = hx_rt_calloc(n, sizeof(float));
    h.v = hx_rt_calloc(n, sizeof(float));
  }
  return h;
}

void rt_host_params_free(struct rt_host_params *h) {
  free(h->w);
  free(h->m);
  free(h->v);
  *h = (struct rt_host_params){NULL, NULL, NULL};
}

/* The device's moments (layout->moments floats, the optimizer table's
 * pieces back to back) to and from the host's layout (like the weights). */
static void moments_to_host(const struct rt_exec *e, float *host, const float *dev) {
  const struct rt_layout *p = &e->p.lay;
  float *packed = hx_rt_calloc((size_t)(p->moments > 0 ? p->moments : 1), sizeof(float));
  e->dev->download(packed, dev, (size_t)p->moments * sizeof(float));
  for (int i = 0; i < p->nopt; i++)
    memcpy(host + p->opt[i].off, packed + p->opt[i].moff, (size_t)p->opt[i].n * sizeof(float));
  free(packed);
}

static void moments_to_device(const struct rt_exec *e, float *dev, const float *host) {
  const struct rt_layout *p = &e->p.lay;
  float *packed = hx_rt_calloc((size_t)(p->moments > 0 ? p->moments : 1), sizeof(float));
  for (int i = 0; i < p->nopt; i++)
    memcpy(packed + p->opt[i].moff, host + p->opt[i].off, (size_t)p->opt[i].n * sizeof(float));
  e->dev->upload(dev, packed, (size_t)p->moments * sizeof(float));
  free(packed);
}

/* With moments, collective over the gradient-sync groups under ZeRO-1: each
 * member's shards complete the others' (a checkpoint holds every moment of
 * the rank's tensors, so any plan can read it). */
void rt_host_params_download(const struct rt_exec *e, struct rt_host_params *h) {
  size_t bytes = (size_t)e->p.lay.n * sizeof(float);
  e->dev->download(h->w, e->p.dev.w, bytes);
  if (h->m)
    moments_to_host(e, h->m, e->p.dev.m);
  if (h->v)
    moments_to_host(e, h->v, e->p.dev.v);
  if (h->m && h->v && e->sync.sharded)
    rt_sync_gather_moments(e, h->m, h->v);
}

void rt_host_params_upload(const struct rt_exec *e, const struct rt_host_params *h) {
  size_t bytes = (size_t)e->p.lay.n * sizeof(float);
  e->dev->upload(e->p.dev.w, h->w, bytes);
  if (h->m)
    moments_to_device(e, e->p.dev.m, h->m);
  if (h->v)
    moments_to_device(e, e->p.dev.v, h->v);
  e->dev->weights_changed();
}

/* Entry i: tensor t of global layer `layer` at offset off, with its
 * canonical identity (the spec's id, full shape, the slice this rank holds),
 * so a checkpoint can be read back under any plan. */
static int add_tensor(const struct rt_exec *e, const struct rt_host_params *h,
                      struct hx_rt_ckpt_tensor *out, int i, enum hxk_param t, int layer, long off) {
  if (!out)
    return i + 1;
  long rows, cols, r0, r1, c0, c1;
  hxk_param_shape(&e->dims, t, &rows, &cols);
  hxk_param_slice(&e->dims, &e->shard, t, &r0, &r1, &c0, &c1);
  out[i] = (struct hx_rt_ckpt_tensor){.param = h->w + off,
                                      .adam_m = h->m ? h->m + off : NULL,
                                      .adam_v = h->v ? h->v + off : NULL,
                                      .n = (r1 - r0) * (c1 - c0),
                                      .id = hxk_param_id(t, layer),
                                      .rows = rows,
                                      .cols = cols,
                                      .r0 = r0,
                                      .r1 = r1,
                                      .c0 = c0,
                                      .c1 = c1};
  return i + 1;
}

/* The checkpoint's tensors in the spec's order (one entry per tensor, a
 * layer's nine each); with out NULL only counts them. */
int rt_ckpt_tensors(const struct rt_exec *e, const struct rt_host_params *h,
                    struct hx_rt_ckpt_tensor *out) {
  const struct rt_layout *p = &e->p.lay;
  int i = 0;
  if (p->tok_emb >= 0)
    i = add_tensor(e, h, out, i, HXK_TOK_EMB, 0, p->tok_emb);
  for (int l = 0; l < p->nlayers; l++)
    for (int k = 0; k < HXK_LAYER_NPARAMS; k++)
      i = add_tensor(e, h, out, i, (enum hxk_param)k, e->cfg->layer_begin + l,
                     rt_layer_tensor(e, l, (enum hxk_param)k));
  if (p->final_norm >= 0)
    i = add_tensor(e, h, out, i, HXK_FINAL_NORM, 0, p->final_norm);
  if (p->lm_head >= 0)
    i = add_tensor(e, h, out, i, HXK_LM_HEAD, 0, p->lm_head);
  return i;
}

/* A tensor's place in the order the backward produces the gradients over
 * the whole model, 0 first: the spec's order reversed (lm_head, final_norm,
 * the last layer's w_down ... attn_norm, ..., tok_emb; ids put final_norm
 * before the layers). */
static int backward_ordinal(const struct rt_exec *e, uint64_t id) {
  int last = 2 + e->dims.layers * HXK_LAYER_NPARAMS; /* lm_head's place in the spec's order */
  int spec;
  if (id == hxk_param_id(HXK_TOK_EMB, 0))
    spec = 0;
  else if (id == hxk_param_id(HXK_FINAL_NORM, 0))
    spec = last - 1;
  else if (id == hxk_param_id(HXK_LM_HEAD, 0))
    spec = last;
  else
    spec = 1 + (int)((id - 16) / 16) * HXK_LAYER_NPARAMS + (int)((id - 16) % 16);
  return last - spec;
}

int rt_first_non_finite_gradient(const struct rt_exec *e, struct rt_bad_gradient *out) {
  struct rt_host_params h = rt_host_params_new(e, false); /* h.w holds the gradients */
  e->dev->download(h.w, e->p.dev.g, (size_t)e->p.lay.n * sizeof(float));
  int n = rt_ckpt_tensors(e, &h, NULL), ordinal = INT_MAX;
  struct hx_rt_ckpt_tensor *t = hx_rt_calloc((size_t)(n > 0 ? n : 1), sizeof *t);
  rt_ckpt_tensors(e, &h, t);
  for (int i = n - 1; i >= 0 && ordinal == INT_MAX; i--) /* the backward's order */
    for (long k = 0; k < t[i].n; k++)
      if (!isfinite(t[i].param[k])) {
        long width = (long)(t[i].c1 - t[i].c0);
        ordinal = backward_ordinal(e, t[i].id);
        *out = (struct rt_bad_gradient){.value = t[i].param[k],
                                        .row = (long)t[i].r0 + k / width,
                                        .col = (long)t[i].c0 + k % width};
        hx_rt_ckpt_tensor_name(t[i].id, out->name, sizeof out->name);
        break;
      }
  free(t);
  rt_host_params_free(&h);
  return ordinal;
}

/* ---------------------------------------------------------------------------
 * --dump-weights FILE: the full, unsharded parameters after training, for
 * comparing any plan with one device.
 *
 * Every rank sends rank 0 the pieces it owns — one copy of each element over
 * the world, rt_for_each_owned's rule (ranks outside pipeline 0 send none) —
 * as records (tensor, layer, rows [r0, r1), columns [c0, c1)) plus the packed
 * values. Rank 0 places them into the model, checks that every element was
 * written exactly once, and writes FILE: the tensors in docs/model-spec.md's
 * order, each full and row-major, as raw little-endian float32, nothing else.
 * ------------------------------------------------------------------------- */

enum { REC_INTS = 6 }; /* tensor, layer, r0, r1, c0, c1 */

struct pieces {
  const float *weights; /* a host copy of the rank's flat parameter buffer */
  int nrec, cap_rec;
  int *rec;
  long nfloats, cap_floats;
  float *vals;
};

/* rt_for_each_owned's visitor: one record and its values. */
static void add_piece(void *arg, const struct rt_piece *piece) {
  struct pieces *p = arg;
  long n = (piece->r1 - piece->r0) * (piece->c1 - piece->c0);
  if (n <= 0)
    return;
  if (p->nrec == p->cap_rec) {
    p->cap_rec = p->cap_rec ? 2 * p->cap_rec : 64;
    p->rec = realloc(p->rec, (size_t)p->cap_rec * REC_INTS * sizeof(int));
  }
  if (p->nfloats + n > p->cap_floats) {
    p->cap_floats = 2 * (p->nfloats + n);
    p->vals = realloc(p->vals, (size_t)p->cap_floats * sizeof(float));
  }
  if (!p->rec || !p->vals)
    hx_rt_fatal(HX_RT_EXIT_ERROR, "out of memory gathering the weights");
  int *r = p->rec + (size_t)p->nrec++ * REC_INTS;
  r[0] = (int)piece->t, r[1] = piece->layer, r[2] = (int)piece->r0, r[3] = (int)piece->r1,
  r[4] = (int)piece->c0, r[5] = (int)piece->c1;
  memcpy(p->vals + p->nfloats, p->weights + piece->off, (size_t)n * sizeof(float));
  p->nfloats += n;
}

/* Offset of tensor t of layer l in the full model, spec order. */
static long full_offset(const struct hxk_dims *d, bool tied, enum hxk_param t, int layer,
                        long *total) {
  long off = 0, rows, cols, found = -1;
  hxk_param_shape(d, HXK_TOK_EMB, &rows, &cols);
  if (t == HXK_TOK_EMB)
    found = off;
  off += rows * cols;
  for (int l = 0; l < d->layers; l++)
    for (int k = 0; k < HXK_LAYER_NPARAMS; k++) {
      if ((int)t == k && l == layer)
        found = off;
      hxk_param_shape(d, (enum hxk_param)k, &rows, &cols);
      off += rows * cols;
    }
  if (t == HXK_FINAL_NORM)
    found = off;
  off += d->dim;
  if (!tied) {
    if (t == HXK_LM_HEAD)
      found = off;
    off += (long)d->vocab * d->dim;
  }
  *total = off;
  return found;
}

/* Rank 0: writes every record's values into the full model; counts how often
 * each element was written. */
static void place(const struct rt_exec *e, const int *rec, int nrec, const float *vals,
                  float *model, unsigned char *hits) {
  bool tied = e->cfg->model->tie_embeddings != 0;
  for (int i = 0; i < nrec; i++, rec += REC_INTS) {
    long total, rows, cols;
    enum hxk_param t = (enum hxk_param)rec[0];
    long base = full_offset(&e->dims, tied, t, rec[1], &total);
    hxk_param_shape(&e->dims, t, &rows, &cols);
    if (base < 0 || rec[3] > rows || rec[5] > cols)
      hx_rt_fatal(HX_RT_EXIT_ERROR, "internal: weight dump record %d out of range", i);
    for (long r = rec[2]; r < rec[3]; r++)
      for (long c = rec[4]; c < rec[5]; c++) {
        model[base + r * cols + c] = *vals++;
        hits[base + r * cols + c]++;
      }
  }
}

static void write_model(const char *path, const float *model, const unsigned char *hits, long n) {
  for (long i = 0; i < n; i++)
    if (hits[i] != 1)
      hx_rt_fatal(HX_RT_EXIT_ERROR,
                  "internal: weight dump element %ld was written %d times (want once)", i,
                  hits[i]);
  FILE *f = fopen(path, "wb");
  if (!f || fwrite(model, sizeof(float), (size_t)n, f) != (size_t)n || fclose(f) != 0)
    hx_rt_fatal(HX_RT_EXIT_ERROR, "cannot write the weights to '%s'", path);
}

static int *displacements(const int *counts, int n) {
  int *d = hx_rt_calloc((size_t)n, sizeof(int));
  for (int i = 1; i < n; i++)
    d[i] = d[i - 1] + counts[i - 1];
  return d;
}

void rt_dump_weights(const struct rt_exec *e, const char *path) {
  struct rt_host_params h = rt_host_params_new(e, false);
  rt_host_params_download(e, &h);
  struct pieces mine = {.weights = h.w};
  rt_for_each_owned(e, add_piece, &mine);
  rt_host_params_free(&h);
  if (mine.nfloats > INT_MAX / 2)
    hx_rt_fatal(HX_RT_EXIT_ERROR, "--dump-weights is for small models (this rank holds %ld)",
                mine.nfloats);
  int world = e->cfg->world_size, root = e->cfg->rank == 0;
  int sizes[2] = {mine.nrec * REC_INTS, (int)mine.nfloats};
  int *all = hx_rt_calloc((size_t)world * 2, sizeof(int));
  hx_rt_mpi_check(MPI_Gather(sizes, 2, MPI_INT, all, 2, MPI_INT, 0, MPI_COMM_WORLD),
                  "gather the weight dump sizes");
  int *rec_counts = hx_rt_calloc((size_t)world, sizeof(int));
  int *val_counts = hx_rt_calloc((size_t)world, sizeof(int));
  long recs = 0, nvals = 0;
  for (int r = 0; r < world; r++) {
    rec_counts[r] = all[2 * r];
    val_counts[r] = all[2 * r + 1];
    recs += rec_counts[r];
    nvals += val_counts[r];
  }
  /* MPI_Gatherv's displacements are int: the whole model must fit them. */
  if (recs > INT_MAX || nvals > INT_MAX)
    hx_rt_fatal(HX_RT_EXIT_ERROR, "--dump-weights is for small models (%ld floats in all)", nvals);
  int *rec_displ = displacements(rec_counts, world), *val_displ = displacements(val_counts, world);
  int *rec_all = hx_rt_calloc((size_t)(root ? recs : 1), sizeof(int));
  float *val_all = hx_rt_calloc((size_t)(root ? nvals : 1), sizeof(float));
  hx_rt_mpi_check(MPI_Gatherv(mine.rec, sizes[0], MPI_INT, rec_all, rec_counts, rec_displ, MPI_INT,
                              0, MPI_COMM_WORLD),
                  "gather the weight dump records");
  hx_rt_mpi_check(MPI_Gatherv(mine.vals, sizes[1], MPI_FLOAT, val_all, val_counts, val_displ,
                              MPI_FLOAT, 0, MPI_COMM_WORLD),
                  "gather the weights");
  if (root) {
    long total;
    full_offset(&e->dims, e->cfg->model->tie_embeddings != 0, HXK_TOK_EMB, 0, &total);
    float *model = hx_rt_calloc((size_t)total, sizeof(float));
    unsigned char *hits = hx_rt_calloc((size_t)total, 1);
    place(e, rec_all, (int)(recs / REC_INTS), val_all, model, hits);
    write_model(path, model, hits, total);
    hx_rt_log_banner("weights: %ld floats, unsharded, written to %s", total, path);
    free(model);
    free(hits);
  }
  free(mine.rec);
  free(mine.vals);
  free(all);
  free(rec_counts);
  free(val_counts);
  free(rec_displ);
  free(val_displ);
  free(rec_all);
  free(val_all);
}
