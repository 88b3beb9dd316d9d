/* HexiSeq frames and plans: which devices form each stage's units, the
 * symmetric layouts of the baselines, and the plan a set of layouts makes
 * (device table, CP rings, HP all-to-all groups with split tables). */
#include <math.h>
#include <string.h>

#include "ir/plan_util.h"
#include "hexiseq.h"

/* ---- frames ------------------------------------------------------------ */

static bool units_fit_nodes(const struct hx_cluster *c, int tp) {
  for (int n = 0; n < c->nnodes; n++)
    if (c->nodes[n].gpus % tp)
      return false;
  return true;
}

static bool frame_is_legal(const struct hx_ctx *ctx, int dp, int tp, int pp) {
  const struct hx_model *m = &ctx->model;
  int n = ctx->cluster.ndevices;
  if (dp <= 0 || tp <= 0 || pp <= 0 || n % (dp * tp * pp))
    return false;
  if (m->heads % tp || m->kv_heads % tp || m->layers % pp || ctx->train.global_batch % dp)
    return false;
  return units_fit_nodes(&ctx->cluster, tp);
}

/* Megatron: rank = ((stage * dp + pipeline) * units + unit) * tp + k. */
static void megatron_cells(const struct hx_seq_frame *f) {
  for (int i = 0; i < f->dp; i++)
    for (int s = 0; s < f->pp; s++)
      for (int k = 0; k < f->units * f->tp; k++)
        f->cell[i * f->pp + s][k] = (s * f->dp + i) * f->units * f->tp + k;
}

static double node_device_flops(const struct hx_cluster *c, int node) {
  return hx_device_flops(c, c->nodes[node].first_device);
}

/* Nodes from the fastest GPU down, each to the cells with the least compute
 * so far (whole nodes where the cell has room): every stage gets a similar
 * mix of GPU types, and a node's units stay together where they can. */
static void mixed_cells(struct hx_arena *a, const struct hx_ctx *ctx, const struct hx_seq_frame *f) {
  const struct hx_cluster *c = &ctx->cluster;
  int ncells = f->dp * f->pp;
  int *order = HX_NEW_ARRAY(a, int, c->nnodes), *filled = HX_NEW_ARRAY(a, int, ncells);
  double *load = HX_NEW_ARRAY(a, double, ncells);
  for (int n = 0; n < c->nnodes; n++)
    order[n] = n;
  for (int i = 1; i < c->nnodes; i++) /* insertion sort: stable, fastest first */
    for (int j = i; j > 0 && node_device_flops(c, order[j]) > node_device_flops(c, order[j - 1]);
         j--) {
      int t = order[j];
      order[j] = order[j - 1];
      order[j - 1] = t;
    }
  for (int k = 0; k < c->nnodes; k++) {
    const struct hx_node *node = &c->nodes[order[k]];
    int left = node->gpus / f->tp, next = node->first_device;
    double unit_flops = node_device_flops(c, order[k]) * f->tp;
    while (left > 0) {
      int best = -1;
      for (int q = 0; q < ncells; q++)
        if (filled[q] < f->units && (best < 0 || load[q] < load[best]))
          best = q;
      int take = f->units - filled[best] < left ? f->units - filled[best] : left;
      for (int u = 0; u < take; u++, next += f->tp)
        for (int t = 0; t < f->tp; t++)
          f->cell[best][(filled[best] + u) * f->tp + t] = next + t;
      filled[best] += take;
      load[best] += take * unit_flops;
      left -= take;
    }
  }
}

struct hx_seq_frame *hx_seq_frame_new(struct hx_arena *a, const struct hx_ctx *ctx, int dp, int tp,
                                      int pp, bool recompute, bool mixed) {
  if (!frame_is_legal(ctx, dp, tp, pp))
    return NULL;
  struct hx_seq_frame *f = HX_NEW(a, struct hx_seq_frame);
  f->dp = dp;
  f->tp = tp;
  f->pp = pp;
  f->units = ctx->cluster.ndevices / (dp * tp * pp);
  f->recompute = recompute;
  f->mixed = mixed;
  f->cell = HX_NEW_ARRAY(a, int *, dp * pp);
  for (int c = 0; c < dp * pp; c++)
    f->cell[c] = HX_NEW_ARRAY(a, int, f->units * tp);
  f->bounds = HX_NEW_ARRAY(a, int, dp * (pp + 1));
  for (int i = 0; i < dp; i++)
    for (int s = 0; s <= pp; s++)
      f->bounds[i * (pp + 1) + s] = (int)(s * (ctx->model.layers / pp));
  if (mixed)
    mixed_cells(a, ctx, f);
  else
    megatron_cells(f);
  return f;
}

void hx_seq_frame_layers(const struct hx_seq_frame *f, int c, int *begin, int *end) {
  int i = c / f->pp, s = c % f->pp;
  *begin = f->bounds[i * (f->pp + 1) + s];
  *end = f->bounds[i * (f->pp + 1) + s + 1];
}

/* ---- layouts ----------------------------------------------------------- */

void hx_seq_zigzag(struct hx_seq_layout *l) {
  for (int u = 0; u < l->nunits; u++)
    l->first[u] = l->tokens[u] / 2;
}

struct hx_seq_layout *hx_seq_symmetric_layout(struct hx_arena *a, const struct hx_ctx *ctx,
                                              const int *ranks, int tp, int cp, int hp) {
  int64_t share = ctx->model.heads / tp, seq = ctx->model.seq_len;
  if (hp <= 0 || cp <= 0 || share % hp)
    return NULL;
  int units = cp * hp;
  struct hx_seq_layout *l = hx_seq_layout_new(a, tp, units, cp);
  for (int u = 0; u < units; u++) {
    l->order[u] = u;
    l->group_of[u] = u / hp;
    l->tokens[u] = seq / units + (u < seq % units ? 1 : 0);
    l->heads[u] = (int)(share / hp);
  }
  for (int g = 0; g <= cp; g++)
    l->group_start[g] = g * hp;
  hx_seq_zigzag(l);
  hx_seq_layout_links(ctx, ranks, l);
  return l;
}

/* ---- plans ------------------------------------------------------------- */

static void fill_unit_devices(struct hx_arena *a, const struct hx_ctx *ctx, struct hx_plan *plan,
                              const struct hx_stage *st, int i, int s) {
  const struct hx_seq_layout *l = st->seq_layout;
  for (int g = 0; g < l->ngroups; g++)
    for (int k = l->group_start[g]; k < l->group_start[g + 1]; k++) {
      int u = l->order[k];
      struct hx_range ranges[2];
      int n = hx_seq_unit_ranges(l, ctx->model.seq_len, u, ranges);
      for (int t = 0; t < l->tp; t++) {
        struct hx_device_plan *d = &plan->devices[st->devices[u * l->tp + t]];
        d->pipeline = i;
        d->stage = s;
        d->tp_rank = t;
        d->cp_rank = g;
        d->hp_rank = k - l->group_start[g];
        d->nseq = n;
        d->seq = HX_NEW_ARRAY(a, struct hx_range, n > 0 ? n : 1);
        memcpy(d->seq, ranges, sizeof ranges[0] * (size_t)n);
        d->heads = hx_seq_device_heads(l, &ctx->model, u, t);
      }
    }
}

static struct hx_group *next_group(struct hx_plan *plan, enum hx_group_kind kind,
                                   const struct hx_stage *st, int nranks, struct hx_arena *a) {
  struct hx_group *g = &plan->groups[plan->ngroups++];
  g->kind = kind;
  g->nranks = nranks;
  g->ranks = HX_NEW_ARRAY(a, int, nranks);
  g->layer_begin = st->layer_begin;
  g->layer_end = st->layer_end;
  return g;
}

/* Per TP rank t: the CP ring over every unit (ring order), and one HP group
 * per all-to-all group with its split table (tokens of the sender x heads
 * of the receiver). */
static void stage_groups(struct hx_arena *a, struct hx_plan *plan, const struct hx_stage *st) {
  const struct hx_seq_layout *l = st->seq_layout;
  for (int t = 0; t < l->tp; t++) {
    struct hx_group *ring = next_group(plan, HX_GROUP_CP_RING, st, l->nunits, a);
    for (int k = 0; k < l->nunits; k++)
      ring->ranks[k] = st->devices[l->order[k] * l->tp + t];
    for (int g = 0; g < l->ngroups; g++) {
      int first = l->group_start[g], n = l->group_start[g + 1] - first;
      struct hx_group *hp = next_group(plan, HX_GROUP_HP_A2A, st, n, a);
      hp->split_table = HX_NEW_ARRAY(a, int64_t, (long)n * n);
      for (int x = 0; x < n; x++) {
        int u = l->order[first + x];
        hp->ranks[x] = st->devices[u * l->tp + t];
        for (int y = 0; y < n; y++)
          hp->split_table[(long)x * n + y] = l->tokens[u] * l->heads[l->order[first + y]];
      }
    }
  }
}

struct hx_plan *hx_seq_plan_build(struct hx_arena *a, const struct hx_ctx *ctx,
                                  const struct hx_seq_frame *f,
                                  const struct hx_seq_layout *const *layouts, const char *strategy,
                                  const char *description) {
  struct hx_plan *plan = hx_plan_new(a, ctx->cluster.ndevices, f->dp);
  plan->strategy = strategy;
  plan->description = description;
  plan->schedule = ctx->train.schedule;
  int ngroups = 0;
  for (int c = 0; c < f->dp * f->pp; c++)
    ngroups += f->tp * (1 + layouts[c]->ngroups);
  plan->groups = HX_NEW_ARRAY(a, struct hx_group, ngroups);
  for (int i = 0; i < f->dp; i++) {
    struct hx_pipeline *pl = &plan->pipelines[i];
    hx_pipeline_init(a, pl, f->pp);
    pl->micro_batch_size = 1; /* one long sequence per micro-batch */
    pl->micro_batches = ctx->train.global_batch / f->dp;
    for (int s = 0; s < f->pp; s++) {
      struct hx_stage *st = &pl->stages[s];
      const struct hx_seq_layout *l = layouts[i * f->pp + s];
      int begin, end;
      hx_seq_frame_layers(f, i * f->pp + s, &begin, &end);
      hx_stage_init(a, st, f->cell[i * f->pp + s], f->units * f->tp, begin, end, f->recompute);
      st->tp = f->tp;
      st->cp = l->ngroups;
      st->hp = hx_seq_largest_group(l);
      st->seq_layout = l;
      fill_unit_devices(a, ctx, plan, st, i, s);
      stage_groups(a, plan, st);
    }
  }
  return plan;
}

struct hx_plan *hx_seq_plan_copy(struct hx_arena *a, const struct hx_plan *src) {
  struct hx_plan *p = hx_plan_copy(a, src);
  p->description = src->description ? hx_strdup(a, src->description) : NULL;
  for (int i = 0; i < p->npipelines; i++)
    for (int s = 0; s < p->pipelines[i].nstages; s++) {
      struct hx_stage *st = &p->pipelines[i].stages[s];
      if (st->seq_layout)
        st->seq_layout = hx_seq_layout_copy(a, st->seq_layout);
    }
  return p;
}
