/* The outer HexiScale search.
 *
 * For every number of pipelines D_dp (all of 1..min(devices, batch) on small
 * clusters, a geometric ladder on large ones), phase 1 splits the devices
 * under an edge objective, phase 2 builds each pipeline for a few group
 * counts k and TP layouts, and hx_sched_complete fits micro-batch size,
 * recompute, layers and batch. Candidates are ranked by the closed-form
 * estimate; the best few get a move/swap refinement of the device split,
 * then the event simulator picks among them and the symmetric baseline.
 *
 * Objectives: both are tried for the first D_dp values; after that the one
 * whose results have been better (an exponential moving average of its best
 * estimate relative to the other's) is used, and the other is re-tried every
 * fourth D_dp so a change of regime is noticed.
 *
 * Deterministic: all choices come from the inputs and a fixed seed; the clock
 * only stops the search when --search-budget runs out. */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "../ir/cost.h"
#include "../ir/plan_util.h"
#include "../ir/sim.h"
#include "sched.h"

enum { TOP = 4, LADDER_FULL = 24, REFINE_STEPS_SMALL = 400, REFINE_STEPS_LARGE = 60 };
/* Stage moves tried per polished plan, and the largest TP group a merge
 * makes (a machine). */
enum { POLISH_SMALL = 2000, POLISH_LARGE = 200, MAX_MERGE = 8 };

struct search {
  struct hx_ctx *ctx;
  struct hx_arena *a; /* scratch: freed after the winner is copied out */
  int tau;
  struct hx_rng rng;
  struct hx_plan *top[TOP];   /* best by estimate, ascending */
  struct hx_sched_split *top_split[TOP];
  int ntop;
  long evaluated;
  double start, deadline, last_progress;
  bool out_of_time;
  double ema[2];              /* per objective: moving average of best estimate */
};

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void progress(struct search *s) {
  double t = now_s();
  if (t > s->deadline)
    s->out_of_time = true;
  if (t - s->start < 1.0 || t - s->last_progress < 1.0)
    return;
  s->last_progress = t;
  fprintf(stderr, "hexic: plan search: %ld candidates, best %.4g s/iteration (%.0f s)\n",
          s->evaluated, s->ntop ? s->top[0]->sim.iteration_s : NAN, t - s->start);
}

/* Keeps plan among the TOP best by estimate; ties keep the earlier one. */
static void consider(struct search *s, struct hx_plan *p, struct hx_sched_split *split) {
  s->evaluated++;
  if (!p)
    return;
  double t = p->sim.iteration_s;
  int at = s->ntop;
  while (at > 0 && t < s->top[at - 1]->sim.iteration_s)
    at--;
  if (at >= TOP)
    return;
  int last = s->ntop < TOP ? s->ntop : TOP - 1;
  for (int i = last; i > at; i--) {
    s->top[i] = s->top[i - 1];
    s->top_split[i] = s->top_split[i - 1];
  }
  s->top[at] = p;
  s->top_split[at] = split;
  if (s->ntop < TOP)
    s->ntop++;
}

/* Distinct islands (machines) among a pipeline's devices: the natural k. */
static int machines_in(const struct hx_cluster *c, const int *devices, int n) {
  int count = 0;
  for (int i = 0; i < n; i++) {
    bool seen = false;
    for (int j = 0; j < i && !seen; j++)
      seen = c->devices[devices[j]].node == c->devices[devices[i]].node;
    count += !seen;
  }
  return count;
}

/* k for pipeline i under k-mode mode: 0 one group, 1 one per machine,
 * 2 two groups. */
static int k_for(const struct hx_cluster *c, const struct hx_sched_split *sp, int i, int mode) {
  if (mode == 0)
    return 1;
  if (mode == 1)
    return machines_in(c, sp->devices[i], sp->count[i]);
  return sp->count[i] >= 2 ? 2 : 1;
}

static struct hx_plan *build(struct search *s, const struct hx_sched_split *sp, int kmode,
                             enum hx_tp_layout layout, int variant, uint64_t seed) {
  struct hx_ctx *ctx = s->ctx;
  struct hx_plan *sk = hx_plan_new(s->a, ctx->cluster.ndevices, sp->npipelines);
  sk->strategy = "hexiscale";
  sk->schedule = ctx->train.schedule;
  for (int i = 0; i < sp->npipelines; i++) {
    int k = k_for(&ctx->cluster, sp, i, kmode);
    /* a pipeline with fewer orders than `variant` keeps its last one */
    int v = variant;
    while (!hx_sched_phase2(ctx, s->a, sp->devices[i], sp->count[i], k, layout, s->tau, v,
                            seed + (uint64_t)i, &sk->pipelines[i]))
      if (--v < 0)
        return NULL;
    if (sk->pipelines[i].nstages > ctx->model.layers)
      return NULL;
  }
  return hx_sched_complete(ctx, s->a, sk);
}

/* Every phase-2 variant of one device split; returns the best estimate. */
static double try_split(struct search *s, struct hx_sched_split *sp, uint64_t seed) {
  static const enum hx_tp_layout layouts[] = {HX_LAYOUT_THROUGHPUT, HX_LAYOUT_WIDE,
                                              HX_LAYOUT_NARROW};
  double best = INFINITY;
  for (int kmode = 0; kmode < 3; kmode++)
    for (int l = 0; l < 3; l++)
      for (int v = 0; v < (kmode == 1 ? HX_SCHED_ORDERS : 1); v++) {
        struct hx_plan *p = build(s, sp, kmode, layouts[l], v, seed);
        consider(s, p, sp);
        if (p && p->sim.iteration_s < best)
          best = p->sim.iteration_s;
      }
  return best;
}

/* The D_dp values tried: all up to LADDER_FULL, then about 4 per octave. */
static int ladder(int max_dp, int *out) {
  int n = 0;
  for (int d = 1; d <= max_dp; d = d < LADDER_FULL ? d + 1 : d + d / 4)
    out[n++] = d;
  return n;
}

static double best_or_inf(double a, double b) { return a < b ? a : b; }

static void explore(struct search *s) {
  struct hx_ctx *ctx = s->ctx;
  int max_dp = ctx->cluster.ndevices;
  if (ctx->train.global_batch < max_dp)
    max_dp = (int)ctx->train.global_batch;
  int dps[256];
  int ndps = ladder(max_dp, dps);
  for (int di = 0; di < ndps && !s->out_of_time; di++) {
    double got[2] = {INFINITY, INFINITY};
    bool warmup = di < 3 || di % 4 == 0;
    int prefer = s->ema[1] < s->ema[0] ? 1 : 0;
    for (int obj = 0; obj < 2 && !s->out_of_time; obj++) {
      if (!warmup && obj != prefer)
        continue;
      uint64_t seed = 0x5eed0000u + (uint64_t)dps[di] * 2 + (uint64_t)obj;
      struct hx_sched_split *sp = hx_sched_phase1(ctx, s->a, dps[di], (enum hx_edge_objective)obj,
                                                  seed);
      if (sp)
        got[obj] = try_split(s, sp, seed);
      progress(s);
    }
    /* the moving average only learns from D_dp values where both ran */
    if (isfinite(got[0]) && isfinite(got[1])) {
      double norm = best_or_inf(got[0], got[1]);
      for (int obj = 0; obj < 2; obj++)
        s->ema[obj] = 0.7 * s->ema[obj] + 0.3 * (got[obj] / norm);
    }
  }
}

/* ---- refinement: move or swap devices between pipelines ---------------- */

static struct hx_sched_split *split_copy(struct hx_arena *a, const struct hx_sched_split *src) {
  struct hx_sched_split *d = HX_NEW(a, struct hx_sched_split);
  d->npipelines = src->npipelines;
  d->count = HX_NEW_ARRAY(a, int, d->npipelines);
  d->devices = HX_NEW_ARRAY(a, int *, d->npipelines);
  for (int i = 0; i < d->npipelines; i++) {
    d->count[i] = src->count[i];
    d->devices[i] = HX_NEW_ARRAY(a, int, src->count[i] + 1);
    memcpy(d->devices[i], src->devices[i], sizeof(int) * (size_t)src->count[i]);
  }
  return d;
}

/* Moves the machine-run of devices starting at index at of pipeline from
 * (all of that node's devices there) into pipeline to, keeping rank order. */
static bool move_node(struct hx_sched_split *sp, const struct hx_cluster *c, int from, int at,
                      int to) {
  int node = c->devices[sp->devices[from][at]].node;
  int moved = 0;
  for (int i = 0; i < sp->count[from]; i++)
    if (c->devices[sp->devices[from][i]].node == node)
      moved++;
  if (moved == sp->count[from])
    return false; /* a pipeline never empties */
  int *dst = sp->devices[to], keep = 0;
  for (int i = 0; i < sp->count[from]; i++) {
    int r = sp->devices[from][i];
    if (c->devices[r].node == node) {
      int j = sp->count[to]++;
      while (j > 0 && dst[j - 1] > r) {
        dst[j] = dst[j - 1];
        j--;
      }
      dst[j] = r;
    } else {
      sp->devices[from][keep++] = r;
    }
  }
  sp->count[from] = keep;
  return true;
}

/* A proposal: move one machine's devices of one pipeline to another. */
static struct hx_sched_split *propose(struct search *s, const struct hx_sched_split *cur) {
  if (cur->npipelines < 2)
    return NULL;
  int from = hx_rng_below(&s->rng, cur->npipelines);
  int to = hx_rng_below(&s->rng, cur->npipelines - 1);
  if (to >= from)
    to++;
  struct hx_sched_split *sp = split_copy(s->a, cur);
  /* the receiving pipeline needs room for the moved devices */
  for (int i = 0; i < sp->npipelines; i++) {
    int *bigger = HX_NEW_ARRAY(s->a, int, s->ctx->cluster.ndevices);
    memcpy(bigger, sp->devices[i], sizeof(int) * (size_t)sp->count[i]);
    sp->devices[i] = bigger;
  }
  int at = hx_rng_below(&s->rng, sp->count[from]);
  return move_node(sp, &s->ctx->cluster, from, at, to) ? sp : NULL;
}

/* Hill-climbs one candidate's device split: a move is kept when the best
 * plan built on the new split has a smaller estimate. */
static void refine_from(struct search *s, struct hx_sched_split *cur, double cur_t, int steps) {
  for (int step = 0; step < steps && !s->out_of_time; step++) {
    struct hx_sched_split *sp = propose(s, cur);
    if (!sp)
      continue;
    double t = try_split(s, sp, 0x7ef1u + (uint64_t)step);
    if (t < cur_t) {
      cur = sp;
      cur_t = t;
    }
    if (step % 16 == 0)
      progress(s);
  }
}

/* Refines each of the best candidates that has pipelines to move between
 * (a snapshot: the list changes as refinement finds better plans). */
static void refine(struct search *s) {
  int steps = s->ctx->cluster.ndevices <= 64 ? REFINE_STEPS_SMALL : REFINE_STEPS_LARGE;
  struct hx_sched_split *start[TOP];
  double start_t[TOP];
  int n = 0;
  for (int i = 0; i < s->ntop; i++)
    if (s->top_split[i]->npipelines > 1) {
      start[n] = s->top_split[i];
      start_t[n++] = s->top[i]->sim.iteration_s;
    }
  for (int i = 0; i < n; i++)
    refine_from(s, start[i], start_t[i], steps / n);
}

/* ---- polishing: stage-level moves on the best plans ----------------------- */

/* Whether every device of a and b sits on one machine. */
static bool one_machine(const struct hx_cluster *c, const struct hx_stage *a,
                        const struct hx_stage *b) {
  int node = c->devices[a->devices[0]].node;
  for (int k = 0; k < a->ndevices; k++)
    if (c->devices[a->devices[k]].node != node)
      return false;
  for (int k = 0; k < b->ndevices; k++)
    if (c->devices[b->devices[k]].node != node)
      return false;
  return true;
}

/* A copy of plan where pipeline i's stage `from` is merged into stage `to`
 * as one TP group (op 0), moved to position `to` (op 1), or split into two
 * TP halves (op 2, `to` ignored), completed again; NULL when the move does
 * not apply (merges stay inside a machine with a legal degree). */
static struct hx_plan *stage_move(struct search *s, const struct hx_plan *plan, int i, int from,
                                  int to, int op) {
  const struct hx_ctx *ctx = s->ctx;
  const struct hx_pipeline *p = &plan->pipelines[i];
  const struct hx_stage *a = &p->stages[from], *b = &p->stages[to];
  if (op != 2 && from == to)
    return NULL;
  if (op == 0 && (a->ndevices + b->ndevices > MAX_MERGE ||
                  !hx_sched_tp_legal(&ctx->model, a->ndevices + b->ndevices) ||
                  !one_machine(&ctx->cluster, a, b)))
    return NULL;
  if (op == 2 && (to != 0 || a->ndevices % 2 || !hx_sched_tp_legal(&ctx->model, a->ndevices / 2)))
    return NULL;
  /* the new stage list: device runs and sizes */
  int n = p->nstages, order[2 * 256], sizes[2 * 256], ranks[2 * MAX_MERGE], m = 0;
  const int *runs[2 * 256];
  if (n > 256)
    return NULL;
  for (int k = 0; k < n; k++) {
    if (k == from && op != 2)
      continue;
    if (op == 1 && k == to && to < from) {
      runs[m] = a->devices, sizes[m++] = a->ndevices;
    }
    if (op == 2 && k == from) {
      runs[m] = a->devices, sizes[m++] = a->ndevices / 2;
      runs[m] = a->devices + a->ndevices / 2, sizes[m++] = a->ndevices / 2;
      continue;
    }
    if (op == 0 && k == to) {
      memcpy(ranks, b->devices, sizeof(int) * (size_t)b->ndevices);
      memcpy(ranks + b->ndevices, a->devices, sizeof(int) * (size_t)a->ndevices);
      runs[m] = ranks, sizes[m++] = a->ndevices + b->ndevices;
      continue;
    }
    runs[m] = p->stages[k].devices, sizes[m++] = p->stages[k].ndevices;
    if (op == 1 && k == to && to > from)
      runs[m] = a->devices, sizes[m++] = a->ndevices;
  }
  (void)order;
  struct hx_plan *q = hx_plan_copy(s->a, plan);
  struct hx_pipeline *qp = &q->pipelines[i];
  hx_pipeline_init(s->a, qp, m);
  qp->micro_batch_size = p->micro_batch_size;
  qp->micro_batches = p->micro_batches;
  for (int k = 0; k < m; k++)
    hx_stage_init(s->a, &qp->stages[k], runs[k], sizes[k], 0, 0, false);
  return hx_sched_complete(s->ctx, s->a, q);
}

/* First-improvement hill climbing over the stage moves of every pipeline. */
static struct hx_plan *polish(struct search *s, struct hx_plan *plan, int budget) {
  bool improved = true;
  while (improved && budget > 0 && !s->out_of_time) {
    improved = false;
    for (int i = 0; i < plan->npipelines && !improved; i++)
      for (int st = 0; st < plan->pipelines[i].nstages && !improved; st++)
        for (int to = 0; to < plan->pipelines[i].nstages && !improved; to++)
        for (int op = 0; op < 3 && !improved && budget > 0; op++) {
          struct hx_plan *q = stage_move(s, plan, i, st, to, op);
          budget--;
          s->evaluated++;
          if (q && q->sim.iteration_s < plan->sim.iteration_s * (1 - 1e-9)) {
            plan = q;
            improved = true;
          }
        }
    progress(s);
  }
  return plan;
}

static void polish_top(struct search *s) {
  int budget = s->ctx->cluster.ndevices <= 64 ? POLISH_SMALL : POLISH_LARGE;
  int n = s->ntop;
  struct hx_plan *start[TOP];
  struct hx_sched_split *split[TOP];
  for (int i = 0; i < n; i++) {
    start[i] = s->top[i];
    split[i] = s->top_split[i];
  }
  for (int i = 0; i < n; i++)
    consider(s, polish(s, start[i], budget), split[i]);
}

/* ---- choosing -------------------------------------------------------------- */

static struct hx_plan *finish(struct search *s) {
  struct hx_ctx *ctx = s->ctx;
  struct hx_plan *best = NULL;
  for (int i = 0; i < s->ntop; i++) {
    struct hx_plan *p = hx_plan_copy(&ctx->arena, s->top[i]);
    hx_sched_build_groups(ctx, &ctx->arena, p);
    p->description = hx_sprintf(&ctx->arena, "dp=%d", p->npipelines);
    hx_simulate(ctx, p, NULL);
    if (p->sim.valid && (!best || p->sim.iteration_s < best->sim.iteration_s))
      best = p;
  }
  struct hx_plan *base = ctx->baseline;
  if (base && (!best || base->sim.iteration_s <= best->sim.iteration_s)) {
    best = hx_plan_copy(&ctx->arena, base);
    best->strategy = "symmetric";
  }
  return best;
}

struct hx_plan *hx_sched_search(struct hx_ctx *ctx) {
  struct hx_arena scratch;
  hx_arena_init(&scratch);
  struct search s = {.ctx = ctx, .a = &scratch, .tau = hx_sched_tau()};
  s.rng.state = 0x4865786953636c65ull; /* fixed: same inputs, same plan */
  s.start = s.last_progress = now_s();
  s.deadline = s.start + (ctx->opt.search_budget_s > 0 ? ctx->opt.search_budget_s : 30.0);
  if (ctx->baseline && !ctx->baseline->sim.valid)
    hx_simulate(ctx, ctx->baseline, NULL);
  explore(&s);
  refine(&s);
  polish_top(&s);
  struct hx_plan *best = finish(&s);
  hx_arena_free(&scratch);
  if (s.out_of_time)
    fprintf(stderr, "hexic: plan search stopped by --search-budget after %ld candidates\n",
            s.evaluated);
  return best;
}
