/* The batch split, and completing a plan skeleton (stages with devices and
 * TP degrees) into a plan: micro-batch size, recompute, exact layer split,
 * leaders, and micro-batches per pipeline so that pipelines finish together.
 *
 * A pipeline of m micro-batches takes (m - 1) * slowest + chain (the 1F1B
 * and GPipe makespan of the closed-form estimate), increasing in m, so
 * handing out micro-batches one at a time to the pipeline that would finish
 * first after taking it gives the least possible finish time (the same
 * exchange argument as the layer split). Every pipeline gets at least one;
 * the global batch is exactly micro-batches x size, no sequence dropped. */
#include <math.h>
#include <stdlib.h>

#include "passes/cost/cost.h"
#include "ir/plan_util.h"
#include "sched.h"

void hx_sched_pipeline_times(const struct hx_ctx *ctx, const struct hx_pipeline *p,
                             double *slowest, double *chain) {
  double worst = 0, sum = 0;
  int64_t mbs = p->micro_batch_size;
  for (int s = 0; s < p->nstages; s++) {
    const struct hx_stage *st = &p->stages[s];
    bool first = s == 0, last = s == p->nstages - 1;
    double t = hx_stage_fwd_s(ctx, st, first, last, mbs) + hx_stage_bwd_s(ctx, st, first, last, mbs);
    worst = fmax(worst, t);
    sum += t;
    if (!last)
      sum += 2 * hx_hop_s(ctx, st, &p->stages[s + 1], mbs);
  }
  *slowest = worst;
  *chain = sum;
}

/* How many k in [1, cap] give k * slowest + chain <= t, computed as the
 * greedy below computes each finish time (non-decreasing in k). */
static int64_t finishes_by(double slowest, double chain, double t, int64_t cap) {
  double guess = floor((t - chain) / slowest);
  int64_t k = guess < 0 ? 0 : guess > (double)cap ? cap : (int64_t)guess;
  while (k > 0 && (double)k * slowest + chain > t)
    k--;
  while (k < cap && (double)(k + 1) * slowest + chain <= t)
    k++;
  return k;
}

static int64_t finishes_total(const double *slowest, const double *chain, int n, double t,
                              int64_t cap) {
  int64_t sum = 0;
  for (int i = 0; i < n && sum <= cap; i++)
    sum += finishes_by(slowest[i], chain[i], t, cap);
  return sum;
}

/* Hands out at once every micro-batch the one-at-a-time greedy below would
 * hand out with a finish time <= some t: the greedy takes the finish times
 * in increasing order (each pipeline's grow with its count), so all those
 * <= t come before any later one, and t is found by bisection as the largest
 * with at most `left` of them. What is left (the ties at the threshold) the
 * greedy hands out as before, so the split is the greedy's to the bit, in
 * O(n log) instead of O(total n): 4096 micro-batches over 256 pipelines
 * were a million steps per completion. Returns how many were handed out. */
static int64_t hand_out_below(const double *slowest, const double *chain, int n, int64_t left,
                              int64_t *m) {
  double hi = 0;
  for (int i = 0; i < n; i++) {
    if (!(slowest[i] > 0) || !isfinite(slowest[i]) || !isfinite(chain[i]))
      return 0; /* degenerate: the plain greedy copes */
    hi = fmax(hi, (double)left * slowest[i] + chain[i]);
  }
  double lo = 0; /* every finish time is > 0: none by 0 */
  if (finishes_total(slowest, chain, n, hi, left) <= left)
    lo = hi;
  for (int step = 0; step < 200 && lo < hi; step++) {
    double mid = lo + (hi - lo) / 2;
    if (mid <= lo || mid >= hi)
      break;
    if (finishes_total(slowest, chain, n, mid, left) <= left)
      lo = mid;
    else
      hi = mid;
  }
  int64_t handed = 0;
  for (int i = 0; i < n; i++) {
    int64_t k = finishes_by(slowest[i], chain[i], lo, left);
    m[i] += k;
    handed += k;
  }
  return handed;
}

bool hx_sched_split_batch(const double *slowest, const double *chain, int n, int64_t total,
                          int64_t *m) {
  if (n < 1 || total < n)
    return false;
  for (int i = 0; i < n; i++)
    m[i] = 1;
  int64_t handed = n;
  if (total - n > n)
    handed += hand_out_below(slowest, chain, n, total - n, m);
  for (; handed < total; handed++) {
    int pick = 0;
    double pick_t = INFINITY;
    for (int i = 0; i < n; i++) {
      double t = (double)m[i] * slowest[i] + chain[i]; /* finish with one more */
      if (t < pick_t) {
        pick = i;
        pick_t = t;
      }
    }
    m[pick]++;
  }
  return true;
}

/* Pipelines of their own micro-batch sizes (each a power of two, or the
 * train block's size, dividing the global batch): the same greedy over
 * sequences. Each pipeline starts with one micro-batch; while sequences are
 * left, the pipeline that would finish first with one more of its
 * micro-batches, among those whose size still fits, takes one (ties: the
 * lower index). The sizes divide one another and the batch, so the
 * smallest always fits what is left and the batch is exact. */
static bool split_mixed(const double *slowest, const double *chain, const int64_t *mbs, int n,
                        int64_t total, int64_t *m) {
  int64_t left = total;
  for (int i = 0; i < n; i++) {
    m[i] = 1;
    left -= mbs[i];
  }
  if (left < 0)
    return false;
  while (left > 0) {
    int pick = -1;
    double pick_t = INFINITY;
    for (int i = 0; i < n; i++) {
      double t = (double)m[i] * slowest[i] + chain[i];
      if (mbs[i] <= left && (pick < 0 || t < pick_t)) {
        pick = i;
        pick_t = t;
      }
    }
    if (pick < 0)
      return false; /* sizes that do not divide one another */
    m[pick]++;
    left -= mbs[pick];
  }
  return true;
}

/* ---- completing a skeleton ------------------------------------------------ */

static void set_settings(struct hx_plan *p, const int64_t *mbs, bool recompute,
                         int64_t global_batch) {
  for (int i = 0; i < p->npipelines; i++) {
    struct hx_pipeline *pl = &p->pipelines[i];
    int64_t total = global_batch / mbs[i];
    pl->micro_batch_size = mbs[i];
    pl->micro_batches = (total + p->npipelines - 1) / p->npipelines; /* the even share */
    for (int s = 0; s < pl->nstages; s++)
      pl->stages[s].recompute = recompute;
  }
}

static bool assign_all_layers(const struct hx_ctx *ctx, struct hx_plan *p) {
  for (int i = 0; i < p->npipelines; i++)
    if (!hx_sched_assign_layers(ctx, p, &p->pipelines[i]))
      return false;
  return true;
}

static bool split_all_batches(const struct hx_ctx *ctx, struct hx_arena *a, struct hx_plan *p,
                              const int64_t *mbs, bool uniform) {
  int n = p->npipelines;
  double *slowest = HX_NEW_ARRAY(a, double, n), *chain = HX_NEW_ARRAY(a, double, n);
  int64_t *m = HX_NEW_ARRAY(a, int64_t, n);
  for (int i = 0; i < n; i++)
    hx_sched_pipeline_times(ctx, &p->pipelines[i], &slowest[i], &chain[i]);
  int64_t B = ctx->train.global_batch;
  if (uniform ? !hx_sched_split_batch(slowest, chain, n, B / mbs[0], m)
              : !split_mixed(slowest, chain, mbs, n, B, m))
    return false;
  for (int i = 0; i < n; i++)
    p->pipelines[i].micro_batches = m[i];
  return true;
}

struct hx_plan *hx_sched_complete_mixed(struct hx_ctx *ctx, struct hx_arena *a,
                                        const struct hx_plan *skeleton, const int64_t *mbs,
                                        bool recompute) {
  int n = skeleton->npipelines;
  int64_t B = ctx->train.global_batch, least = 0;
  bool uniform = true;
  for (int i = 0; i < n; i++) {
    if (mbs[i] < 1 || B % mbs[i])
      return NULL;
    least += mbs[i];
    uniform = uniform && mbs[i] == mbs[0];
  }
  if (least > B) /* every pipeline takes at least one micro-batch */
    return NULL;
  struct hx_plan *p = hx_plan_copy(a, skeleton);
  p->groups = NULL; /* a skeleton's old groups would price the sync of other layers */
  p->ngroups = 0;
  /* TP ranks in ascending device order, whoever built the skeleton: the
   * gradient-sync slices pair TP rank k of every pipeline, so one canonical
   * order keeps hexic's plans inside the exhaustive planner's space */
  for (int i = 0; i < n; i++)
    for (int s = 0; s < p->pipelines[i].nstages; s++) {
      struct hx_stage *st = &p->pipelines[i].stages[s];
      hx_sched_sort_ranks(st->devices, st->ndevices);
    }
  /* the first layer split assumes the even share of micro-batches; the
   * second uses the split's own counts (GPipe keeps them all in memory) */
  set_settings(p, mbs, recompute, B);
  for (int i = 0; i < n; i++)
    hx_sched_set_leaders(ctx, &p->pipelines[i]);
  for (int round = 0; round < 2; round++)
    if (!assign_all_layers(ctx, p) || !split_all_batches(ctx, a, p, mbs, uniform))
      return NULL;
  /* a plan the simulator cannot judge is not proposed */
  if (hx_sim_task_bound(ctx, p) > HX_SIM_MAX_TASKS)
    return NULL;
  hx_plan_fill_devices(a, p, &ctx->model);
  if (!hx_plan_memory_fits(ctx, p, NULL, NULL))
    return NULL;
  return p;
}

struct hx_plan *hx_sched_complete_setting(struct hx_ctx *ctx, struct hx_arena *a,
                                          const struct hx_plan *skeleton, int64_t mbs,
                                          bool recompute) {
  int n = skeleton->npipelines;
  if (ctx->train.global_batch / mbs < n)
    return NULL;
  int64_t stack[64];
  int64_t *each = n <= 64 ? stack : HX_NEW_ARRAY(a, int64_t, n);
  for (int i = 0; i < n; i++)
    each[i] = mbs;
  return hx_sched_complete_mixed(ctx, a, skeleton, each, recompute);
}

bool hx_sched_recompute_allowed(const struct hx_ctx *ctx, bool full) {
  return ctx->train.recompute == HX_RECOMPUTE_AUTO ||
         full == (ctx->train.recompute == HX_RECOMPUTE_FULL);
}

int hx_sched_settings(const struct hx_ctx *ctx, int64_t *mbs, bool *recompute) {
  int64_t B = ctx->train.global_batch, fixed = ctx->train.micro_batch;
  int n = 0;
  for (int64_t size = fixed ? fixed : 1; size <= B; size = fixed ? B + 1 : size * 2) {
    if (B % size)
      continue;
    for (int r = 0; r < 2 && n < HX_SCHED_MAX_SETTINGS; r++) {
      if (!hx_sched_recompute_allowed(ctx, r == 1))
        continue;
      mbs[n] = size;
      recompute[n++] = r == 1;
    }
  }
  return n;
}

/* A setting's plan and the estimate's bound on it (pipelines and
 * optimizer, without the gradient sync), for hx_sched_complete's order. */
struct completed {
  struct hx_plan *plan;
  double bound;
  int index; /* in hx_sched_settings' order: ties go to the earlier */
};

static int by_bound(const void *x, const void *y) {
  const struct completed *a = x, *b = y;
  if (a->bound != b->bound)
    return a->bound < b->bound ? -1 : 1;
  return (a->index > b->index) - (a->index < b->index);
}

struct hx_plan *hx_sched_complete(struct hx_ctx *ctx, struct hx_arena *a,
                                  const struct hx_plan *skeleton) {
  int64_t mbs[HX_SCHED_MAX_SETTINGS];
  bool recompute[HX_SCHED_MAX_SETTINGS];
  int n = hx_sched_settings(ctx, mbs, recompute);
  /* The settings are completed in a scratch arena (a plan has per-device
   * arrays: keeping every setting of every skeleton of a search over 4096
   * devices cost more in page faults than the completions), then priced
   * in the order of their bound, so the gradient sync (most of an estimate
   * on large clusters) is priced only for settings that may still win. The
   * winner is the first setting (in hx_sched_settings' order) of least
   * estimate, as when every setting is priced in full. */
  struct hx_arena scratch;
  hx_arena_init(&scratch);
  struct completed done[HX_SCHED_MAX_SETTINGS];
  int ndone = 0;
  for (int k = 0; k < n; k++) {
    struct hx_plan *p = hx_sched_complete_setting(ctx, &scratch, skeleton, mbs[k], recompute[k]);
    if (p)
      done[ndone++] = (struct completed){p, hx_estimate_iteration_below(ctx, p, -INFINITY), k};
  }
  qsort(done, (size_t)ndone, sizeof done[0], by_bound);
  const struct completed *best = NULL;
  double best_s = INFINITY;
  for (int i = 0; i < ndone && !(done[i].bound > best_s); i++) {
    /* an earlier setting wins a tie: price it exactly up to best_s too */
    bool earlier = best && done[i].index < best->index;
    double t = hx_estimate_iteration_below(ctx, done[i].plan,
                                           earlier ? nextafter(best_s, INFINITY) : best_s);
    if (t < best_s || (earlier && t == best_s)) {
      best_s = t;
      best = &done[i];
    }
  }
  struct hx_plan *out = NULL;
  if (best) {
    out = hx_plan_copy(a, best->plan);
    out->sim.iteration_s = best_s; /* the estimate, until simulated */
  }
  hx_arena_free(&scratch);
  return out;
}
