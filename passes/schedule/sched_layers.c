/* The exact layer split. Decoder layers are identical, so a stage's time for
 * one micro-batch is linear in its layer count, time(n) = per_layer * n +
 * extra (embedding / head work on the first / last stage), and its memory
 * grows with n, which gives each stage a largest count max_layers. Which
 * layers a stage holds does not matter, only how many: the contiguous split
 * that minimises the slowest stage is the count vector minimising
 * max_s time_s(n_s) with sum n_s = L and 1 <= n_s <= max_layers_s.
 *
 * For increasing per-stage costs that is solved exactly by the greedy that
 * hands out one layer at a time to the stage whose time after taking it is
 * smallest: after every step the largest time is the least possible for
 * that many layers (an exchange argument), so it is also at the end. */
#include <math.h>
#include <string.h>

#include "passes/cost/cost.h"
#include "sched.h"

/* fwd + bwd of one micro-batch on a stage holding layers [0, n). */
static double stage_time(const struct hx_ctx *ctx, struct hx_stage *st, bool first, bool last,
                         int64_t mbs, int n) {
  st->layer_begin = 0;
  st->layer_end = n;
  struct hx_stage_times t; /* once: hx_stage_fwd_s + hx_stage_bwd_s priced it twice */
  hx_stage_times(ctx, st, first, last, mbs, true, &t);
  return t.fwd + t.bwd;
}

/* ---- the stage-cost cache -------------------------------------------------
 * A search completes thousands of pipelines, each at every setting, whose
 * stages repeat: gpt-neo-2.7b on gh200-a100-v100 at batch 2048 priced
 * 771,624 stages of which 6,954 distinct by devices, TP degree, recompute,
 * ends and micro-batch size, and of 1,418 distinct memory shapes (degree,
 * recompute, ends, size, in flight); only the optimizer share (which
 * follows each plan's devices) made them 152,149. So the times are kept
 * per stage by everything hx_stage_times reads of it, and the memory parts
 * (hx_stage_memory_parts: all but the share) per shape and layer count;
 * each figure is the uncached one to the bit. HexiSeq stages are not
 * cached (their layouts are not keyed). */
struct hx_sched_cost_cache {
  struct hx_arena *a;
  struct hx_sched_memo times, memory;
};

struct hx_sched_cost_cache *hx_sched_cost_cache_new(struct hx_arena *a) {
  struct hx_sched_cost_cache *c = HX_NEW(a, struct hx_sched_cost_cache);
  c->a = a;
  return c;
}

static int key_int64(int *key, int64_t v) {
  key[0] = (int)(uint32_t)(uint64_t)v;
  key[1] = (int)(uint32_t)((uint64_t)v >> 32);
  return 2;
}

/* extra and per_layer of a stage at mbs. */
struct stage_times_value {
  double extra, per_layer;
};

static void stage_times_of(const struct hx_ctx *ctx, struct hx_stage *st, bool first, bool last,
                           int64_t mbs, struct stage_times_value *v) {
  double t0 = stage_time(ctx, st, first, last, mbs, 0);
  v->extra = t0;
  v->per_layer = stage_time(ctx, st, first, last, mbs, 1) - t0;
}

/* stage_times_of through the cache: keyed on the stage's devices in their
 * order, TP degree, recompute, ends and mbs (hx_stage_times reads no more
 * of a stage without a HexiSeq layout once its layers are set). */
static struct stage_times_value cached_stage_times(const struct hx_ctx *ctx,
                                                   struct hx_sched_cost_cache *cache,
                                                   struct hx_stage *st, bool first, bool last,
                                                   int64_t mbs) {
  enum { STACK = 64, FIXED = 6 };
  struct stage_times_value v;
  if (!cache || st->seq_layout || st->ndevices > STACK - FIXED) {
    stage_times_of(ctx, st, first, last, mbs, &v);
    return v;
  }
  int key[STACK], n = 0;
  key[n++] = st->ndevices;
  key[n++] = st->tp;
  key[n++] = st->recompute;
  key[n++] = first | last << 1;
  n += key_int64(key + n, mbs);
  memcpy(key + n, st->devices, sizeof(int) * (size_t)st->ndevices);
  n += st->ndevices;
  struct hx_sched_memo_entry *e = hx_sched_memo_get(cache->a, &cache->times, key, n);
  if (!e->set) {
    e->value = HX_NEW(cache->a, struct stage_times_value);
    stage_times_of(ctx, st, first, last, mbs, e->value);
    e->set = true;
  }
  return *(const struct stage_times_value *)e->value;
}

/* A stage's memory parts at every layer count (filled as asked) for one
 * shape: what hx_stage_memory_parts reads of a stage besides its layers. */
struct memory_shape {
  int L;
  struct hx_stage_memory_parts **at; /* [0, L] */
};

/* The shape of st in the cache; NULL when it has none (no cache, a HexiSeq
 * stage, a TP degree above HX_MEMORY_PARTS_RANKS). */
static struct memory_shape *memory_shape_of(struct hx_sched_cost_cache *cache,
                                            const struct hx_stage *st, bool first, bool last,
                                            int64_t mbs, int64_t in_flight, int L) {
  if (!cache || st->seq_layout || st->tp < 1 || st->tp > HX_MEMORY_PARTS_RANKS)
    return NULL; /* hx_stage_memory_parts' refusals: such a stage is priced whole */
  int key[8], k = 0;
  key[k++] = st->tp;
  key[k++] = st->recompute;
  key[k++] = first | last << 1;
  key[k++] = L;
  k += key_int64(key + k, mbs);
  k += key_int64(key + k, in_flight);
  struct hx_sched_memo_entry *e = hx_sched_memo_get(cache->a, &cache->memory, key, k);
  if (!e->set) {
    struct memory_shape *shape = HX_NEW(cache->a, struct memory_shape);
    shape->L = L;
    shape->at = HX_NEW_ARRAY(cache->a, struct hx_stage_memory_parts *, L + 1);
    e->value = shape;
    e->set = true;
  }
  return e->value;
}

/* hx_stage_memory_bytes of st holding n layers, from the shape's parts
 * when it has one. */
static double stage_memory(const struct hx_ctx *ctx, struct hx_sched_cost_cache *cache,
                           struct memory_shape *shape, struct hx_stage *st, bool first, bool last,
                           int64_t mbs, int64_t in_flight, int n) {
  st->layer_begin = 0;
  st->layer_end = n;
  if (!shape || n < 0 || n > shape->L)
    return hx_stage_memory_bytes(ctx, st, first, last, mbs, in_flight);
  if (!shape->at[n]) {
    struct hx_stage_memory_parts *parts = HX_NEW(cache->a, struct hx_stage_memory_parts);
    if (!hx_stage_memory_parts(ctx, st, first, last, mbs, in_flight, parts))
      hx_internal_error("a stage of TP %d has a memory shape but no memory parts", st->tp);
    shape->at[n] = parts;
  }
  return hx_stage_memory_from_parts(ctx, st, first, last, mbs, in_flight, shape->at[n]);
}

/* The largest n <= L whose memory fits; 0 when even one layer does not.
 * Memory is affine in n for n >= 1, so the bound is solved for, then
 * corrected by stepping (rounding). */
static int max_layers(const struct hx_ctx *ctx, struct hx_sched_cost_cache *cache,
                      struct hx_stage *st, bool first, bool last, int64_t mbs, int64_t in_flight,
                      int L) {
  struct memory_shape *sh = memory_shape_of(cache, st, first, last, mbs, in_flight, L);
  double cap = hx_stage_memory_capacity(&ctx->cluster, st);
  double m1 = stage_memory(ctx, cache, sh, st, first, last, mbs, in_flight, 1);
  if (m1 > cap)
    return 0;
  double slope = stage_memory(ctx, cache, sh, st, first, last, mbs, in_flight, 2) - m1;
  int n = slope > 0 ? (int)fmin((double)L, 1.0 + floor((cap - m1) / slope)) : L;
  if (n < 1)
    n = 1;
  while (n > 1 && stage_memory(ctx, cache, sh, st, first, last, mbs, in_flight, n) > cap)
    n--;
  while (n < L && stage_memory(ctx, cache, sh, st, first, last, mbs, in_flight, n + 1) <= cap)
    n++;
  return n;
}

double hx_sched_opt_total(const struct hx_ctx *ctx, const struct hx_plan *plan) {
  if (ctx->train.optimizer_sharding != HX_SHARD_ZERO1 || plan->npipelines <= 1)
    return 0;
  const struct hx_cluster *c = &ctx->cluster;
  double all = 0;
  for (int i = 0; i < plan->npipelines; i++) {
    const struct hx_pipeline *p = &plan->pipelines[i];
    double sum = 0;
    int n = 0;
    for (int s = 0; s < p->nstages; s++)
      for (int k = 0; k < p->stages[s].ndevices; k++, n++)
        sum += (double)c->gpus[c->devices[p->stages[s].devices[k]].gpu_type].memory_bytes;
    all += n ? sum / n : 0;
  }
  return all;
}

/* A stage's share of the optimizer state given hx_sched_opt_total. */
static double share_of(const struct hx_ctx *ctx, double total, const struct hx_stage *st) {
  double mine = hx_stage_memory_capacity(&ctx->cluster, st);
  return total > 0 ? fmin(1.0, mine / total) : 0;
}

double hx_sched_opt_share(const struct hx_ctx *ctx, const struct hx_plan *plan,
                          const struct hx_stage *st) {
  return share_of(ctx, hx_sched_opt_total(ctx, plan), st);
}

void hx_sched_stage_costs_cached(const struct hx_ctx *ctx, const struct hx_plan *plan,
                                 const struct hx_pipeline *p, double total,
                                 struct hx_sched_cost_cache *cache, struct hx_stage_cost *cost) {
  int L = (int)ctx->model.layers;
  for (int s = 0; s < p->nstages; s++) {
    struct hx_stage st = p->stages[s]; /* a copy: its layer range is scratch */
    st.opt_share = share_of(ctx, total, &st);
    bool first = s == 0, last = s == p->nstages - 1;
    int64_t mbs = p->micro_batch_size;
    struct stage_times_value t = cached_stage_times(ctx, cache, &st, first, last, mbs);
    cost[s].extra = t.extra;
    cost[s].per_layer = t.per_layer;
    int64_t keep = hx_in_flight(plan->schedule, s, p->nstages, p->micro_batches);
    cost[s].max_layers = max_layers(ctx, cache, &st, first, last, mbs, keep, L);
  }
}

void hx_sched_stage_costs(const struct hx_ctx *ctx, const struct hx_plan *plan,
                          const struct hx_pipeline *p, struct hx_stage_cost *cost) {
  /* once: it sums every device */
  hx_sched_stage_costs_cached(ctx, plan, p, hx_sched_opt_total(ctx, plan), NULL, cost);
}

static double time_at(const struct hx_stage_cost *c, int n) { return c->per_layer * n + c->extra; }

double hx_sched_split_layers(const struct hx_stage_cost *cost, int n, int layers, int *counts) {
  if (n < 1 || layers < n)
    return -1;
  for (int s = 0; s < n; s++) {
    if (cost[s].max_layers < 1)
      return -1;
    counts[s] = 1;
  }
  for (int left = layers - n; left > 0; left--) {
    int pick = -1;
    double pick_t = INFINITY;
    for (int s = 0; s < n; s++) {
      if (counts[s] >= cost[s].max_layers)
        continue;
      double t = time_at(&cost[s], counts[s] + 1);
      /* ties: the cheaper layer (smaller sum), then the earlier stage */
      if (t < pick_t || (t == pick_t && cost[s].per_layer < cost[pick].per_layer)) {
        pick = s;
        pick_t = t;
      }
    }
    if (pick < 0)
      return -1;
    counts[pick]++;
  }
  double worst = 0;
  for (int s = 0; s < n; s++)
    worst = fmax(worst, time_at(&cost[s], counts[s]));
  return worst;
}

bool hx_sched_assign_layers_cached(const struct hx_ctx *ctx, const struct hx_plan *plan,
                                   struct hx_pipeline *p, double opt_total,
                                   struct hx_sched_cost_cache *cache) {
  enum { STACK = 256 };
  struct hx_stage_cost cost[STACK];
  int counts[STACK];
  if (p->nstages > STACK || p->nstages > ctx->model.layers)
    return false;
  hx_sched_stage_costs_cached(ctx, plan, p, opt_total, cache, cost);
  if (hx_sched_split_layers(cost, p->nstages, (int)ctx->model.layers, counts) < 0)
    return false;
  int at = 0;
  for (int s = 0; s < p->nstages; s++) {
    p->stages[s].layer_begin = at;
    at += counts[s];
    p->stages[s].layer_end = at;
  }
  return true;
}

bool hx_sched_assign_layers(const struct hx_ctx *ctx, const struct hx_plan *plan,
                            struct hx_pipeline *p) {
  return hx_sched_assign_layers_cached(ctx, plan, p, hx_sched_opt_total(ctx, plan), NULL);
}
