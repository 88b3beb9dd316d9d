/* Asymmetric gradient synchronisation groups.
 *
 * Pipelines hold a layer on stages of different TP degrees t_1..t_k. Each
 * member of a TP group holds 1/t_i of the layer's split weights. Cutting the
 * split dimension into nslices = lcm(t_1..t_k) slices, slice j lives on TP
 * rank j * t_i / nslices of pipeline i, so the all-reduce of slice j runs
 * among exactly one rank per pipeline, whatever the degrees (3 with 4 gives
 * 12 slices; the authors' padding to t_max only works for powers of two).
 * A rank of degree t_i takes part in nslices / t_i consecutive slices.
 *
 * Between two consecutive stage boundaries of any pipeline every pipeline
 * keeps the same stage, so one set of groups serves that whole layer range.
 * Weights TP does not split (the two RMSNorm gains per layer) are reduced
 * over the union of the range's stages. Layer -1 groups: the embedding over
 * the first stages, the final norm and LM head over the last stages. */
#include <math.h>
#include <stdlib.h>

#include "ir/plan_util.h"
#include "passes/cost/cost.h"
#include "sched.h"

struct group_list {
  struct hx_group *items;
  int n, cap;
};

static struct hx_group *add_group(struct hx_arena *a, struct group_list *l, enum hx_group_kind kind,
                                  int nranks) {
  if (l->n == l->cap) {
    int cap = l->cap ? 2 * l->cap : 64;
    struct hx_group *items = HX_NEW_ARRAY(a, struct hx_group, cap);
    for (int i = 0; i < l->n; i++)
      items[i] = l->items[i];
    l->items = items;
    l->cap = cap;
  }
  struct hx_group *g = &l->items[l->n++];
  g->kind = kind;
  g->nranks = nranks;
  g->ranks = HX_NEW_ARRAY(a, int, nranks);
  g->layer_begin = g->layer_end = -1;
  g->slice = 0;
  g->nslices = 1;
  return g;
}

/* The stage of pipeline p holding `layer`. */
static const struct hx_stage *stage_at(const struct hx_pipeline *p, int layer) {
  for (int s = 0; s < p->nstages; s++)
    if (p->stages[s].layer_begin <= layer && layer < p->stages[s].layer_end)
      return &p->stages[s];
  return NULL;
}

/* The lcm-sliced groups and the union group of one set of stages (one per
 * pipeline) for layers [begin, end). */
static void add_slices(struct hx_arena *a, struct group_list *l, const struct hx_stage **st, int n,
                       int begin, int end, bool with_union, unsigned holds) {
  int64_t nslices = 1;
  int total = 0;
  for (int i = 0; i < n; i++) {
    nslices = hx_lcm(nslices, st[i]->tp);
    total += st[i]->ndevices;
  }
  for (int64_t j = 0; j < nslices; j++) {
    struct hx_group *g = add_group(a, l, HX_GROUP_GRAD, n);
    for (int i = 0; i < n; i++)
      g->ranks[i] = st[i]->devices[j * st[i]->tp / nslices];
    g->layer_begin = begin;
    g->layer_end = end;
    g->slice = (int)j;
    g->nslices = (int)nslices;
    g->holds = holds;
  }
  if (!with_union)
    return;
  struct hx_group *u = add_group(a, l, HX_GROUP_UNSPLIT, total);
  int at = 0;
  for (int i = 0; i < n; i++)
    for (int k = 0; k < st[i]->ndevices; k++)
      u->ranks[at++] = st[i]->devices[k];
  u->layer_begin = begin;
  u->layer_end = end;
}

static void add_tp_groups(struct hx_arena *a, struct group_list *l, const struct hx_plan *plan) {
  for (int i = 0; i < plan->npipelines; i++)
    for (int s = 0; s < plan->pipelines[i].nstages; s++) {
      const struct hx_stage *st = &plan->pipelines[i].stages[s];
      if (st->tp <= 1)
        continue;
      struct hx_group *g = add_group(a, l, HX_GROUP_TP, st->tp);
      for (int k = 0; k < st->tp; k++)
        g->ranks[k] = st->devices[k];
      g->layer_begin = st->layer_begin;
      g->layer_end = st->layer_end;
    }
}

/* The next layer after `layer` where some pipeline starts a new stage. */
static int next_boundary(const struct hx_plan *plan, int layer, int layers) {
  int next = layers;
  for (int i = 0; i < plan->npipelines; i++) {
    const struct hx_stage *st = stage_at(&plan->pipelines[i], layer);
    if (st && st->layer_end < next)
      next = st->layer_end;
  }
  return next;
}

static void shard_optimizer(const struct hx_ctx *ctx, struct hx_arena *a, struct hx_plan *plan,
                            bool even);

void hx_sched_build_groups_sharded(struct hx_ctx *ctx, struct hx_arena *a, struct hx_plan *plan,
                                   bool even) {
  struct group_list l = {0};
  int layers = (int)ctx->model.layers, n = plan->npipelines;
  add_tp_groups(a, &l, plan);
  if (n > 1) {
    const struct hx_stage **st = HX_NEW_ARRAY(a, const struct hx_stage *, n);
    for (int begin = 0; begin < layers;) {
      int end = next_boundary(plan, begin, layers);
      for (int i = 0; i < n; i++)
        st[i] = stage_at(&plan->pipelines[i], begin);
      add_slices(a, &l, st, n, begin, end, true, 0);
      begin = end;
    }
    for (int i = 0; i < n; i++)
      st[i] = &plan->pipelines[i].stages[0];
    bool head_apart = false; /* some pipeline keeps the head off its first stage */
    for (int i = 0; i < n; i++)
      head_apart |= plan->pipelines[i].nstages > 1;
    add_slices(a, &l, st, n, -1, -1, false,
               head_apart ? HX_HOLDS_EMBEDDING : HX_HOLDS_EMBEDDING | HX_HOLDS_HEAD);
    for (int i = 0; i < n; i++)
      st[i] = &plan->pipelines[i].stages[plan->pipelines[i].nstages - 1];
    if (head_apart)
      add_slices(a, &l, st, n, -1, -1, false, HX_HOLDS_HEAD);
  }
  plan->groups = l.items;
  plan->ngroups = l.n;
  shard_optimizer(ctx, a, plan, even);
}

void hx_sched_build_groups(struct hx_ctx *ctx, struct hx_arena *a, struct hx_plan *plan) {
  hx_sched_build_groups_sharded(ctx, a, plan, false);
}

/* One group's shares in parts per million, in proportion to weight[] of its
 * members (all 0: equal); the floor's remainder to the heaviest member. */
static void split_ppm(struct hx_group *g, const double *weight) {
  double total = 0;
  int heaviest = 0;
  for (int i = 0; i < g->nranks; i++) {
    total += weight[g->ranks[i]];
    if (weight[g->ranks[i]] > weight[g->ranks[heaviest]])
      heaviest = i;
  }
  int64_t given = 0;
  for (int i = 0; i < g->nranks; i++) {
    double share = total > 0 ? weight[g->ranks[i]] / total : 1.0 / g->nranks;
    g->shard_ppm[i] = (int32_t)floor(share * HX_PPM);
    given += g->shard_ppm[i];
  }
  g->shard_ppm[heaviest] += (int32_t)(HX_PPM - given);
}

/* ZeRO-1's shares (sched.h, hx_sched_build_groups_sharded). */
static void shard_optimizer(const struct hx_ctx *ctx, struct hx_arena *a, struct hx_plan *plan,
                            bool even) {
  plan->optimizer_sharding = HX_SHARD_NONE;
  if (ctx->train.optimizer_sharding != HX_SHARD_ZERO1 || !hx_plan_replicates_weights(plan))
    return;
  plan->optimizer_sharding = HX_SHARD_ZERO1;
  if (hx_plan_has_units(plan)) /* HexiSeq units: even, see cost.h */
    return;
  double *weight = HX_NEW_ARRAY(a, double, plan->ndevices + 1);
  if (!even) {
    hx_plan_free_bytes(ctx, plan, weight);
    for (int r = 0; r < plan->ndevices; r++)
      weight[r] = fmax(weight[r], 0.0);
  }
  for (int g = 0; g < plan->ngroups; g++) {
    struct hx_group *gr = &plan->groups[g];
    if (gr->kind != HX_GROUP_GRAD && gr->kind != HX_GROUP_UNSPLIT)
      continue;
    if (!gr->shard_ppm)
      gr->shard_ppm = HX_NEW_ARRAY(a, int32_t, gr->nranks);
    split_ppm(gr, weight);
  }
}
