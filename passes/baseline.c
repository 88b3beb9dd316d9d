/* baseline: what Megatron-LM would run on this cluster — the fastest
 * symmetric plan (uniform dp, tp, pp and micro-batch size) that fits memory,
 * under the same simulator as every hexic plan.
 *
 * Choices, as Megatron makes them:
 *  - every device is used (Megatron runs one world of dp * tp * pp ranks; it
 *    has no notion of leaving slow GPUs out);
 *  - tp never crosses a node and divides both heads and kv_heads;
 *  - pp divides the layers (equal layers per stage);
 *  - the global batch splits exactly into dp pipelines of m micro-batches of
 *    mbs sequences (train.micro_batch fixes mbs; otherwise powers of two);
 *  - recompute = auto tries both with and without full recompute.
 * On a mixed cluster the slowest GPU of every group sets the pace, which the
 * simulator models by itself. */
#include <math.h>

#include "passes/cost/cost.h"
#include "ir/plan_util.h"
#include "passes.h"

static bool tp_inside_nodes(const struct hx_cluster *c, int tp) {
  for (int r = 0; r < c->ndevices; r += tp)
    for (int k = 1; k < tp; k++)
      if (c->devices[r + k].node != c->devices[r].node)
        return false;
  return true;
}

static bool shape_is_legal(const struct hx_ctx *ctx, int dp, int tp, int pp, int64_t mbs) {
  const struct hx_model *m = &ctx->model;
  if (m->heads % tp || m->kv_heads % tp || m->layers % pp)
    return false;
  if (ctx->train.global_batch % ((int64_t)dp * mbs))
    return false;
  return tp_inside_nodes(&ctx->cluster, tp);
}

struct hx_plan *hx_symmetric_plan(struct hx_ctx *ctx, int dp, int tp, int pp, int64_t mbs,
                                  bool recompute) {
  if (!shape_is_legal(ctx, dp, tp, pp, mbs))
    return NULL;
  struct hx_arena *a = &ctx->arena;
  struct hx_plan *p = hx_plan_new(a, ctx->cluster.ndevices, dp);
  p->strategy = "symmetric";
  p->description = hx_sprintf(a, "dp=%d tp=%d pp=%d mbs=%lld%s", dp, tp, pp, (long long)mbs,
                              recompute ? " recompute=full" : "");
  p->schedule = ctx->train.schedule;
  int per_stage = (int)(ctx->model.layers / pp);
  int *ranks = HX_NEW_ARRAY(a, int, tp);
  for (int d = 0; d < dp; d++) {
    struct hx_pipeline *pl = &p->pipelines[d];
    hx_pipeline_init(a, pl, pp);
    pl->micro_batch_size = mbs;
    pl->micro_batches = ctx->train.global_batch / ((int64_t)dp * mbs);
    for (int s = 0; s < pp; s++) {
      for (int t = 0; t < tp; t++)
        ranks[t] = (s * dp + d) * tp + t;
      hx_stage_init(a, &pl->stages[s], ranks, tp, s * per_stage, (s + 1) * per_stage, recompute);
    }
  }
  hx_plan_fill_devices(a, p, &ctx->model);
  return p;
}

/* Every (dp, tp, pp, mbs, recompute) of the space, in a fixed order. */
struct shape {
  int dp, tp, pp;
  int64_t mbs;
  bool recompute;
};

typedef void (*shape_fn)(struct hx_ctx *ctx, const struct shape *sh, void *state);

static void for_each_shape(struct hx_ctx *ctx, bool both_recompute, shape_fn fn, void *state) {
  int n = ctx->cluster.ndevices;
  int64_t fixed_mbs = ctx->train.micro_batch;
  bool rc = ctx->train.recompute == HX_RECOMPUTE_FULL;
  for (int tp = 1; tp <= n; tp++) {
    if (n % tp)
      continue;
    for (int pp = 1; pp <= n / tp; pp++) {
      if ((n / tp) % pp)
        continue;
      int dp = n / tp / pp;
      for (int64_t mbs = fixed_mbs ? fixed_mbs : 1; mbs <= ctx->train.global_batch / dp;
           mbs = fixed_mbs ? ctx->train.global_batch + 1 : mbs * 2)
        for (int r = 0; r < 2; r++) {
          bool recompute = r == 1;
          if (!both_recompute && ctx->train.recompute != HX_RECOMPUTE_AUTO && recompute != rc)
            continue;
          struct shape sh = {dp, tp, pp, mbs, recompute};
          fn(ctx, &sh, state);
        }
    }
  }
}

/* The fitting shapes, in the enumeration's order. */
struct fitting {
  struct hx_plan **plan;
  int n, cap;
};

static void try_shape(struct hx_ctx *ctx, const struct shape *sh, void *state) {
  struct fitting *f = state;
  struct hx_plan *p = hx_symmetric_plan(ctx, sh->dp, sh->tp, sh->pp, sh->mbs, sh->recompute);
  if (!p || !hx_plan_memory_fits(ctx, p, NULL, NULL))
    return;
  if (f->n == f->cap) {
    int cap = f->cap ? 2 * f->cap : 64;
    struct hx_plan **plan = HX_NEW_ARRAY(&ctx->arena, struct hx_plan *, cap);
    for (int i = 0; i < f->n; i++)
      plan[i] = f->plan[i];
    f->plan = plan;
    f->cap = cap;
  }
  f->plan[f->n++] = p;
}

/* The fastest fitting shape under the simulator; ties keep the earlier
 * shape, so the choice is stable. hx_simulate_fastest prunes by sound lower
 * bounds: the same choice as simulating every one, with a few simulations
 * instead of dozens (each grows with the global batch in micro-batches). */
static struct hx_plan *fastest(const struct hx_ctx *ctx, const struct fitting *f) {
  int best = hx_simulate_fastest(ctx, f->plan, f->n);
  return best >= 0 ? f->plan[best] : NULL;
}

bool hx_pass_baseline(struct hx_ctx *ctx) {
  if (!ctx->has_model || !ctx->has_train || ctx->cluster.ndevices <= 0)
    return true;
  struct fitting f = {0};
  for_each_shape(ctx, false, try_shape, &f);
  ctx->baseline = fastest(ctx, &f);
  return true;
}

struct shortfall {
  double bytes;
  int rank;
  bool with_recompute; /* the smallest shortfall needs recompute */
};

static void measure_shape(struct hx_ctx *ctx, const struct shape *sh, void *state) {
  struct shortfall *s = state;
  struct hx_plan *p = hx_symmetric_plan(ctx, sh->dp, sh->tp, sh->pp, sh->mbs, sh->recompute);
  double need;
  int rank;
  if (!p)
    return;
  hx_plan_memory_fits(ctx, p, &need, &rank);
  if (need < s->bytes) {
    s->bytes = need;
    s->rank = rank;
    s->with_recompute = sh->recompute;
  }
}

void hx_report_no_plan(struct hx_ctx *ctx) {
  struct shortfall s = {INFINITY, -1, false};
  for_each_shape(ctx, true, measure_shape, &s);
  bool can_recompute = ctx->train.recompute == HX_RECOMPUTE_NONE;
  const char *hint = can_recompute ? "try recompute = full, more devices or GPUs with more memory"
                                   : "try more devices or GPUs with more memory";
  if (s.rank < 0) {
    hx_error_plain("no plan fits the cluster: no symmetric shape divides the model and batch "
                   "(%lld layers, %lld heads, global_batch %lld) over %d devices; %s",
                   (long long)ctx->model.layers, (long long)ctx->model.heads,
                   (long long)ctx->train.global_batch, ctx->cluster.ndevices, hint);
    return;
  }
  hx_error_plain("no plan fits in memory: needs at least %.1f GiB more on %s%s; %s",
                 s.bytes / 1073741824.0, ctx->cluster.devices[s.rank].name,
                 s.with_recompute && can_recompute ? " (with recompute = full)" : "", hint);
}
