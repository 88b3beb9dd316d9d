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
#include <string.h>

#include "passes/cost/cost.h"
#include "ir/plan_util.h"
#include "sched.h"

/* fwd + bwd of one micro-batch on stage s of p: hx_stage_fwd_s +
 * hx_stage_bwd_s, bit for bit, from one hx_stage_times. */
static double stage_busy_s(const struct hx_ctx *ctx, const struct hx_pipeline *p, int s) {
  struct hx_stage_times t;
  hx_stage_times(ctx, &p->stages[s], s == 0, s == p->nstages - 1, p->micro_batch_size, true, &t);
  return t.fwd + t.bwd;
}

/* hx_sched_pipeline_times from each stage's stage_busy_s: busy[s] when
 * busy is given (a piece has them already), else priced here. */
static void pipeline_times_of(const struct hx_ctx *ctx, const struct hx_pipeline *p,
                              const double *busy, double *slowest, double *chain) {
  double worst = 0, sum = 0;
  int64_t mbs = p->micro_batch_size;
  for (int s = 0; s < p->nstages; s++) {
    double t = busy ? busy[s] : stage_busy_s(ctx, p, s);
    worst = fmax(worst, t);
    sum += t;
    if (s < p->nstages - 1)
      sum += 2 * hx_hop_s(ctx, &p->stages[s], &p->stages[s + 1], mbs);
  }
  *slowest = worst;
  *chain = sum;
}

void hx_sched_pipeline_times(const struct hx_ctx *ctx, const struct hx_pipeline *p,
                             double *slowest, double *chain) {
  pipeline_times_of(ctx, p, NULL, slowest, chain);
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
 * with at most `left` of them (any t with exactly `left` ends it: most
 * splits have a gap between finish times, found in a few steps where the
 * bisection to adjacent doubles took some sixty). What is left (the ties at the threshold) the
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
    int64_t count = finishes_total(slowest, chain, n, mid, left);
    if (count == left) { /* exactly the greedy's first `left`: no tie to settle */
      lo = mid;
      break;
    }
    if (count < left)
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

/* ---- pieces: one pipeline's part of a completion ---------------------------- */

/* What a completion derives for one pipeline from that pipeline alone (its
 * stages' devices, its micro-batch size, recompute, the micro-batches each
 * stage keeps in flight) and the plan's optimizer-share denominator: its
 * leaders, the exact layer split and the pipeline's times. A search prices
 * thousands of skeletons one move apart that share most pipelines, each at
 * every setting: the pieces are computed once. */
struct piece {
  bool fits;             /* the layer split fits memory */
  double slowest, chain; /* hx_sched_pipeline_times */
  int *leader, *layers;  /* per stage */
  /* per stage: fwd + bwd of one micro-batch, and the sum of that over the
   * stages before it (see compute_bound) */
  double *busy, *before;
};

struct hx_sched_pieces {
  struct hx_arena *a;
  struct hx_sched_memo memo;
  /* the stage costs a new piece's layer split takes (pieces that differ
   * share most stages) */
  struct hx_sched_cost_cache *costs;
};

struct hx_sched_pieces *hx_sched_pieces_new(struct hx_arena *a) {
  struct hx_sched_pieces *pc = HX_NEW(a, struct hx_sched_pieces);
  pc->a = a;
  pc->costs = hx_sched_cost_cache_new(a);
  return pc;
}

static int key_double(int *key, double v) {
  uint64_t bits;
  memcpy(&bits, &v, sizeof bits);
  key[0] = (int)(uint32_t)bits;
  key[1] = (int)(uint32_t)(bits >> 32);
  return 2;
}

static int key_int64(int *key, int64_t v) {
  key[0] = (int)(uint32_t)(uint64_t)v;
  key[1] = (int)(uint32_t)((uint64_t)v >> 32);
  return 2;
}

/* The piece memo has two levels: a pipeline's shape (its stages' devices,
 * TP, CP and HP degrees), then its setting (micro-batch size, recompute,
 * micro-batches in flight, the optimizer-share denominator). A completion
 * tries every setting of one skeleton: each pipeline's shape is looked up
 * once for all of them (split_work's shapes), and a setting's lookup is in
 * the shape's own small table. One memo keyed by both hashed and compared
 * some 40 ints in a table of half a million entries for each setting of
 * each pipeline (a cache miss or two each: 12% of a search). */
struct shape {
  struct hx_sched_memo settings; /* setting key -> struct piece */
};

/* Ints a pipeline's shape key and setting key take. */
static int shape_key_length(const struct hx_pipeline *pl) {
  int n = 1;
  for (int s = 0; s < pl->nstages; s++)
    n += 4 + pl->stages[s].ndevices;
  return n;
}

static int setting_key_length(const struct hx_pipeline *pl) { return 5 + 3 * pl->nstages; }

/* What the piece depends on, as ints: the shape, then the setting. */
static int shape_key(const struct hx_pipeline *pl, int *key) {
  int n = 0;
  key[n++] = pl->nstages;
  for (int s = 0; s < pl->nstages; s++) {
    const struct hx_stage *st = &pl->stages[s];
    key[n++] = st->ndevices;
    key[n++] = st->tp;
    key[n++] = st->cp;
    key[n++] = st->hp;
    memcpy(key + n, st->devices, sizeof(int) * (size_t)st->ndevices);
    n += st->ndevices;
  }
  return n;
}

static int setting_key(const struct hx_plan *plan, const struct hx_pipeline *pl, double opt_total,
                       int *key) {
  int n = 0;
  key[n++] = pl->stages[0].recompute;
  n += key_int64(key + n, pl->micro_batch_size);
  n += key_double(key + n, opt_total);
  for (int s = 0; s < pl->nstages; s++) {
    key[n++] = pl->stages[s].recompute;
    n += key_int64(key + n, hx_in_flight(plan->schedule, s, pl->nstages, pl->micro_batches));
  }
  return n;
}

/* Computes pipeline pl's piece in place (leaders and layers set on pl);
 * its arrays in a; the stage costs through `costs` (or NULL) with the
 * plan's hx_sched_opt_total, opt_total. */
static void compute_piece(const struct hx_ctx *ctx, struct hx_arena *a, const struct hx_plan *plan,
                          struct hx_pipeline *pl, double opt_total,
                          struct hx_sched_cost_cache *costs, struct piece *out) {
  hx_sched_set_leaders(ctx, pl);
  out->fits = hx_sched_assign_layers_cached(ctx, plan, pl, opt_total, costs);
  out->slowest = out->chain = 0;
  out->leader = HX_NEW_ARRAY(a, int, pl->nstages);
  out->layers = HX_NEW_ARRAY(a, int, pl->nstages);
  out->busy = HX_NEW_ARRAY(a, double, pl->nstages);
  out->before = HX_NEW_ARRAY(a, double, pl->nstages);
  for (int s = 0; s < pl->nstages; s++) {
    out->leader[s] = pl->stages[s].leader;
    out->layers[s] = pl->stages[s].layer_end - pl->stages[s].layer_begin;
  }
  if (!out->fits)
    return;
  double sum = 0;
  for (int s = 0; s < pl->nstages; s++) {
    out->busy[s] = stage_busy_s(ctx, pl, s);
    out->before[s] = sum;
    sum += out->busy[s];
  }
  /* the times from the same busy figures: each stage priced once */
  pipeline_times_of(ctx, pl, out->busy, &out->slowest, &out->chain);
}

/* A bound below the simulator's lower bound (hx_sim_lower_bound) on a
 * pipeline of m micro-batches: a stage starts its first forward after the
 * forwards of the stages before it, runs m forwards and backwards one at a
 * time, and the backwards of the stages before it follow its last. The
 * simulator's bound adds links, broadcasts, the optimizer step and the
 * gradient sync; this one needs no completed plan, so settings that cannot
 * beat a time are dropped before the rest of their completion. Shaved by
 * 1e-12 so that rounding in the other order of the sums never puts it
 * above. */
static double compute_bound(const struct piece *pc, int nstages, int64_t m) {
  double bound = 0;
  for (int s = 0; s < nstages; s++)
    bound = fmax(bound, pc->before[s] + (double)m * pc->busy[s]);
  return bound * (1 - 1e-12);
}

/* Pipeline pl's shape in the memo: *known when set, else looked up (and
 * kept in *known when known is not NULL). */
static struct shape *shape_of(struct hx_arena *a, const struct hx_pipeline *pl,
                              struct hx_sched_pieces *pieces, struct shape **known) {
  if (known && *known)
    return *known;
  enum { STACK = 512 };
  int stack[STACK];
  int len = shape_key_length(pl);
  int *key = len <= STACK ? stack : HX_NEW_ARRAY(a, int, len);
  int n = shape_key(pl, key);
  struct hx_sched_memo_entry *e = hx_sched_memo_get(pieces->a, &pieces->memo, key, n);
  if (!e->set) {
    struct shape *sh = HX_NEW(pieces->a, struct shape);
    sh->settings.first_cap = 16; /* a skeleton's settings: 24 at most, times the shares */
    e->value = sh;
    e->set = true;
  }
  if (known)
    *known = e->value;
  return e->value;
}

/* Gives pipeline pl its leaders and layer split, from the memo when it
 * holds them; NULL when its layers do not fit memory. The piece lives in
 * pieces' arena, or in a (no memo). *known (or NULL): pl's shape in the
 * memo, kept across the settings of one completion. */
static const struct piece *complete_pipeline(const struct hx_ctx *ctx, struct hx_arena *a,
                                             const struct hx_plan *plan, struct hx_pipeline *pl,
                                             double opt_total, struct hx_sched_pieces *pieces,
                                             struct shape **known) {
  bool memo = pieces != NULL;
  for (int s = 0; s < pl->nstages && memo; s++)
    memo = pl->stages[s].seq_layout == NULL; /* HexiSeq layouts are not keyed */
  if (!memo) {
    struct piece *pc = HX_NEW(a, struct piece);
    compute_piece(ctx, a, plan, pl, opt_total, NULL, pc);
    return pc->fits ? pc : NULL;
  }
  struct shape *sh = shape_of(a, pl, pieces, known);
  enum { STACK = 256 };
  int stack[STACK];
  int len = setting_key_length(pl);
  int *key = len <= STACK ? stack : HX_NEW_ARRAY(a, int, len);
  int n = setting_key(plan, pl, opt_total, key);
  struct hx_sched_memo_entry *e = hx_sched_memo_get(pieces->a, &sh->settings, key, n);
  if (!e->set) {
    struct piece *pc = HX_NEW(pieces->a, struct piece);
    compute_piece(ctx, pieces->a, plan, pl, opt_total, pieces->costs, pc);
    e->value = pc;
    e->set = true;
    return pc->fits ? pc : NULL;
  }
  const struct piece *pc = e->value;
  int at = 0;
  for (int s = 0; s < pl->nstages; s++) {
    pl->stages[s].leader = pc->leader[s];
    pl->stages[s].layer_begin = at;
    at += pc->layers[s];
    pl->stages[s].layer_end = at;
  }
  return pc->fits ? pc : NULL;
}

/* Whether pipeline pl keeps as many micro-batches in flight on every stage
 * with m micro-batches as with its own count (its piece is then the same). */
static bool same_in_flight(enum hx_pp_schedule schedule, const struct hx_pipeline *pl, int64_t m) {
  for (int s = 0; s < pl->nstages; s++)
    if (hx_in_flight(schedule, s, pl->nstages, m) !=
        hx_in_flight(schedule, s, pl->nstages, pl->micro_batches))
      return false;
  return true;
}

/* One setting's work on p (a prepared copy, its settings set): each
 * pipeline's piece by its micro-batches in flight (pc[i] kept from the round
 * before when those did not change), then the batch split by their times;
 * false when some pipeline's layers or the batch do not fit. Sets *bound to
 * the largest compute_bound of the split, *pipes to the closed-form
 * estimate's slowest pipeline. */
struct split_work {
  const struct piece **pc;
  double *slowest, *chain;
  int64_t *m;
  struct shape **shapes; /* per pipeline, kept across settings; or NULL */
};

static bool split_layers_and_batch(const struct hx_ctx *ctx, struct hx_arena *a, struct hx_plan *p,
                                   const int64_t *mbs, bool uniform, double opt_total,
                                   struct hx_sched_pieces *pieces, const struct split_work *w,
                                   double *bound, double *pipes, bool *changed, bool *unfit) {
  int n = p->npipelines;
  const struct piece **pc = w->pc;
  double *slowest = w->slowest, *chain = w->chain;
  int64_t *m = w->m;
  for (int i = 0; i < n; i++) {
    if (!pc[i])
      pc[i] = complete_pipeline(ctx, a, p, &p->pipelines[i], opt_total, pieces,
                                w->shapes ? &w->shapes[i] : NULL);
    if (!pc[i]) {
      *unfit = true;
      return false;
    }
    slowest[i] = pc[i]->slowest;
    chain[i] = pc[i]->chain;
  }
  int64_t B = ctx->train.global_batch;
  if (uniform ? !hx_sched_split_batch(slowest, chain, n, B / mbs[0], m)
              : !split_mixed(slowest, chain, mbs, n, B, m))
    return false;
  *bound = *pipes = 0;
  *changed = false;
  for (int i = 0; i < n; i++) {
    *bound = fmax(*bound, compute_bound(pc[i], p->pipelines[i].nstages, m[i]));
    /* the estimate's pipeline term (pipeline_estimate_s), bit for bit */
    *pipes = fmax(*pipes, (double)(m[i] - 1) * pc[i]->slowest + pc[i]->chain);
    if (!same_in_flight(p->schedule, &p->pipelines[i], m[i])) {
      pc[i] = NULL; /* a next round computes it again */
      *changed = true;
    }
    p->pipelines[i].micro_batches = m[i];
  }
  return true;
}

/* The skeleton as every completion starts from it, in a. */
static struct hx_plan *prepared_copy(struct hx_arena *a, const struct hx_plan *skeleton) {
  struct hx_plan *p = hx_plan_copy(a, skeleton);
  p->groups = NULL; /* a skeleton's old groups would price the sync of other layers */
  p->ngroups = 0;
  /* TP ranks in ascending device order, whoever built the skeleton: the
   * gradient-sync slices pair TP rank k of every pipeline, so one canonical
   * order keeps hexic's plans inside the exhaustive planner's space */
  for (int i = 0; i < p->npipelines; i++)
    for (int s = 0; s < p->pipelines[i].nstages; s++) {
      struct hx_stage *st = &p->pipelines[i].stages[s];
      hx_sched_sort_ranks(st->devices, st->ndevices);
    }
  return p;
}

/* p (a prepared copy) at one setting: sizes, recompute, leaders, layers and
 * micro-batches; false when the setting does not fit the batch or memory
 * of the layer split, cannot beat `beat`, or is too large to simulate.
 * *pipes: the estimate's pipeline term (a bound below its iteration);
 * *unfit (when not NULL): set when some pipeline's layers fit no split in
 * memory with the even share of micro-batches. Scratch in a. */
static bool split_setting(const struct hx_ctx *ctx, struct hx_arena *a, struct hx_plan *p,
                          const int64_t *mbs, bool recompute, struct hx_sched_pieces *pieces,
                          struct shape **shapes, double beat, double *pipes, bool *unfit) {
  bool no_split = false;
  if (!unfit)
    unfit = &no_split;
  int n = p->npipelines;
  int64_t B = ctx->train.global_batch, least = 0;
  bool uniform = true;
  for (int i = 0; i < n; i++) {
    if (mbs[i] < 1 || B % mbs[i])
      return false;
    least += mbs[i];
    uniform = uniform && mbs[i] == mbs[0];
  }
  if (least > B) /* every pipeline takes at least one micro-batch */
    return false;
  /* the first layer split assumes the even share of micro-batches; the
   * second uses the split's own counts (GPipe keeps them all in memory) */
  set_settings(p, mbs, recompute, B);
  double opt_total = hx_sched_opt_total(ctx, p), bound = 0;
  /* the rounds' per-pipeline arrays: on the stack unless there are many
   * pipelines (an arena allocation each, zeroed, was a tenth of a
   * completion) */
  enum { STACK = 64 };
  const struct piece *pc_stack[STACK] = {NULL};
  double slowest_stack[STACK], chain_stack[STACK];
  int64_t m_stack[STACK];
  bool small = n <= STACK;
  struct split_work w = {
      small ? pc_stack : HX_NEW_ARRAY(a, const struct piece *, n),
      small ? slowest_stack : HX_NEW_ARRAY(a, double, n),
      small ? chain_stack : HX_NEW_ARRAY(a, double, n),
      small ? m_stack : HX_NEW_ARRAY(a, int64_t, n),
      shapes,
  };
  /* a second round whose pieces are all the first's would split the batch
   * from the same times to the same counts: it is skipped */
  bool changed = true, later = false;
  for (int round = 0; round < 2 && changed; round++)
    /* only the first round's verdict, at the even share, says the same of
     * every larger size (complete_each's skip): the second's counts are
     * the split's own */
    if (!split_layers_and_batch(ctx, a, p, mbs, uniform, opt_total, pieces, &w, &bound, pipes,
                                &changed, round == 0 ? unfit : &later))
      return false;
  if (bound > beat)
    return false;
  /* a plan the simulator cannot judge is not proposed */
  return hx_sim_task_bound(ctx, p) <= HX_SIM_MAX_TASKS;
}

/* p with its devices filled in; NULL when it does not fit memory. */
static struct hx_plan *fitting(const struct hx_ctx *ctx, struct hx_arena *a, struct hx_plan *p) {
  hx_plan_fill_devices(a, p, &ctx->model);
  return hx_plan_memory_fits(ctx, p, NULL, NULL) ? p : NULL;
}

/* Settings come in increasing micro-batch sizes (hx_sched_settings). Where
 * a pipeline's layers fit no split in memory at size m with the even share
 * of the batch, they fit none at a larger size with the same recompute
 * when every stage keeps as many micro-batches in flight at both sizes:
 * with the slots the same, every term of a stage's memory is nondecreasing
 * in the micro-batch size (activations, hop, recompute and workspace
 * buffers grow with it, rounded up as the runtime allocates them; weights
 * and optimizer state do not move), so no stage holds more layers. Where
 * the slots drop the total can fall (GPipe at the even share: half the
 * slots at twice the size, 0.01% less), so those sizes are split. Such
 * settings are skipped, not split (GPT-Neo-2.7B at global batch 2048 on
 * gh200-a100-v100: 2.5% of the planning's instructions); tests/cost's
 * test_memory_grows_with_mbs checks the premise. */
struct unfit_sizes {
  int64_t from[2]; /* per recompute: the least size found not to fit; 0: none */
};

/* Whether every stage of w keeps as many micro-batches in flight at the
 * even share of size `larger` as at that of `smaller`. */
static bool same_slots(const struct hx_plan *w, int64_t batch, int64_t smaller, int64_t larger) {
  int n = w->npipelines;
  int64_t a = (batch / smaller + n - 1) / n, b = (batch / larger + n - 1) / n;
  for (int i = 0; i < n; i++) {
    int nst = w->pipelines[i].nstages;
    for (int st = 0; st < nst; st++)
      if (hx_in_flight(w->schedule, st, nst, a) != hx_in_flight(w->schedule, st, nst, b))
        return false;
  }
  return true;
}

static bool known_unfit(const struct unfit_sizes *u, const struct hx_plan *w, int64_t batch,
                        int64_t mbs, bool recompute) {
  int64_t from = u->from[recompute];
  return from > 0 && mbs >= from && same_slots(w, batch, from, mbs);
}

static void note_unfit(struct unfit_sizes *u, int64_t mbs, bool recompute, bool unfit) {
  if (unfit && (u->from[recompute] == 0 || mbs < u->from[recompute]))
    u->from[recompute] = mbs;
}

void hx_sched_complete_each(struct hx_ctx *ctx, struct hx_arena *a, const struct hx_plan *skeleton,
                            int nsettings, const int64_t *mbs, const bool *recompute,
                            struct hx_sched_pieces *pieces, double beat, struct hx_plan **out) {
  /* one working copy for every setting (each sets all it reads), copied
   * out only for the settings that survive: most do not */
  struct hx_arena scratch;
  hx_arena_init(&scratch);
  struct hx_plan *w = prepared_copy(&scratch, skeleton);
  int n = skeleton->npipelines;
  int64_t *each = HX_NEW_ARRAY(&scratch, int64_t, n);
  struct shape **shapes = HX_NEW_ARRAY(&scratch, struct shape *, n);
  struct unfit_sizes unfit = {{0, 0}};
  for (int k = 0; k < nsettings; k++) {
    out[k] = NULL;
    if (ctx->train.global_batch / mbs[k] < n ||
        known_unfit(&unfit, w, ctx->train.global_batch, mbs[k], recompute[k]))
      continue;
    for (int i = 0; i < n; i++)
      each[i] = mbs[k];
    double pipes;
    bool no_split = false;
    if (split_setting(ctx, &scratch, w, each, recompute[k], pieces, shapes, beat, &pipes,
                      &no_split))
      out[k] = fitting(ctx, a, hx_plan_copy(a, w));
    note_unfit(&unfit, mbs[k], recompute[k], no_split);
  }
  hx_arena_free(&scratch);
}

struct hx_plan *hx_sched_complete_mixed(struct hx_ctx *ctx, struct hx_arena *a,
                                        const struct hx_plan *skeleton, const int64_t *mbs,
                                        bool recompute) {
  struct hx_plan *p = prepared_copy(a, skeleton);
  double pipes;
  return split_setting(ctx, a, p, mbs, recompute, NULL, NULL, INFINITY, &pipes, NULL)
             ? fitting(ctx, a, p)
                                                                          : NULL;
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

/* A setting and the estimate's pipeline term, for hx_sched_complete's
 * order. */
struct bounded_setting {
  double bound;
  int index; /* in hx_sched_settings' order: ties go to the earlier */
};

static int by_bound(const void *x, const void *y) {
  const struct bounded_setting *a = x, *b = y;
  if (a->bound != b->bound)
    return a->bound < b->bound ? -1 : 1;
  return (a->index > b->index) - (a->index < b->index);
}

/* w at setting k, copied into a with its devices; NULL when it does not
 * fit. */
static struct hx_plan *at_setting(const struct hx_ctx *ctx, struct hx_arena *a, struct hx_plan *w,
                                  int64_t mbs, bool recompute, struct hx_sched_pieces *pieces,
                                  struct shape **shapes, int64_t *each) {
  for (int i = 0; i < w->npipelines; i++)
    each[i] = mbs;
  double pipes;
  if (!split_setting(ctx, a, w, each, recompute, pieces, shapes, INFINITY, &pipes, NULL))
    return NULL;
  return fitting(ctx, a, hx_plan_copy(a, w));
}

struct hx_plan *hx_sched_complete(struct hx_ctx *ctx, struct hx_arena *a,
                                  const struct hx_plan *skeleton, struct hx_sched_pieces *pieces) {
  int64_t mbs[HX_SCHED_MAX_SETTINGS] = {0};
  bool recompute[HX_SCHED_MAX_SETTINGS] = {false};
  int n = hx_sched_settings(ctx, mbs, recompute);
  /* Every setting's layers and batch are split on one working copy in a
   * scratch arena (a plan has per-device arrays: keeping every setting of
   * every skeleton of a search over 4096 devices cost more in page faults
   * than the completions), which gives the estimate's pipeline term, a
   * bound below its iteration; then settings are completed and priced in
   * the order of that bound, and only while it may still win, so the rest
   * of a completion and the gradient sync (most of an estimate on large
   * clusters) are priced for few. The winner is the first setting (in
   * hx_sched_settings' order) of least estimate, as when every setting is
   * priced in full. */
  struct hx_arena scratch;
  hx_arena_init(&scratch);
  struct hx_plan *w = prepared_copy(&scratch, skeleton);
  int np = skeleton->npipelines;
  int64_t *each = HX_NEW_ARRAY(&scratch, int64_t, np);
  struct shape **shapes = HX_NEW_ARRAY(&scratch, struct shape *, np);
  struct bounded_setting order[HX_SCHED_MAX_SETTINGS];
  int norder = 0;
  struct unfit_sizes unfit = {{0, 0}};
  for (int k = 0; k < n; k++) {
    if (ctx->train.global_batch / mbs[k] < np ||
        known_unfit(&unfit, w, ctx->train.global_batch, mbs[k], recompute[k]))
      continue;
    for (int i = 0; i < np; i++)
      each[i] = mbs[k];
    double pipes;
    bool no_split = false;
    if (split_setting(ctx, &scratch, w, each, recompute[k], pieces, shapes, INFINITY, &pipes,
                      &no_split))
      order[norder++] = (struct bounded_setting){pipes, k};
    note_unfit(&unfit, mbs[k], recompute[k], no_split);
  }
  qsort(order, (size_t)norder, sizeof order[0], by_bound);
  struct hx_plan *best = NULL;
  int best_index = -1;
  double best_s = INFINITY;
  for (int i = 0; i < norder && !(order[i].bound > best_s); i++) {
    int k = order[i].index;
    struct hx_plan *p = at_setting(ctx, &scratch, w, mbs[k], recompute[k], pieces, shapes, each);
    if (!p)
      continue;
    /* an earlier setting wins a tie: price it exactly up to best_s too */
    bool earlier = best && k < best_index;
    double t = hx_estimate_iteration_below(ctx, p, earlier ? nextafter(best_s, INFINITY) : best_s);
    if (t < best_s || (earlier && t == best_s)) {
      best_s = t;
      best = p;
      best_index = k;
    }
  }
  struct hx_plan *out = NULL;
  if (best) {
    out = hx_plan_copy(a, best);
    out->sim.iteration_s = best_s; /* the estimate, until simulated */
  }
  hx_arena_free(&scratch);
  return out;
}
