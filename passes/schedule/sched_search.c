/* The outer HexiScale search.
 *
 * Pools: a plan need not use every device. Slow links or slow GPUs can make
 * the whole cluster slower than part of it (a 1 Gbps network between fast
 * machines: one machine alone wins), so the search explores device pools:
 * the whole cluster, every set of machines joined by links of at least some
 * bandwidth (the components of the machine graph at each distinct link
 * bandwidth), and each of those without its slowest GPU types. Pools that
 * cannot hold the model's state, or that look like one already taken (same
 * GPU types, counts and links), are skipped.
 *
 * For every pool and number of pipelines D_dp (all of 1..min(devices,
 * batch) on small pools, a geometric ladder on large ones), phase 1 splits
 * the pool's devices under an edge objective, phase 2 builds each pipeline
 * for a few group counts k, TP layouts and stage orders (the grouping and
 * orders are computed once per pipeline and k), and hx_sched_complete fits
 * micro-batch size, recompute, layers and batch. A skeleton seen before is
 * not completed again. The best few candidates get a move refinement of
 * their device split and a polish of stage-level moves (merge two stages
 * into one TP group, move a stage, split one, drop a stage, drop a
 * pipeline, put a machine's idle devices into a pipeline); on clusters of
 * at most HX_LOCAL_MAX_DEVICES the local search of sched_local.c climbs
 * from them. Then each pipeline's own group count k_i (refine_k) and, above
 * HX_EXHAUSTIVE_MAX_DEVICES, its own micro-batch size (mix_micro_batches)
 * are refined by coordinate descent; the event simulator picks among the
 * best by score, the plans kept before those refinements and the
 * faster of the two symmetric baselines (all devices, best subset).
 *
 * Scores: on small clusters (<= SIM_SCORE_MAX devices) every candidate is
 * ranked by the event simulator itself, each long 1F1B pipeline's steady
 * state extrapolated (hx_sim_options.steady_all: the cost does not grow
 * with the batch, the figures are the step-by-step run's within 1e-9);
 * otherwise by the closed-form estimate, which is what keeps 1024 GPUs
 * under a few seconds.
 *
 * Objectives: both are tried for the first D_dp values of a pool; after
 * that the one whose results have been better (an exponential moving average
 * of its best score relative to the other's) is used, and the other is
 * re-tried every fourth D_dp so a change of regime is noticed.
 *
 * Limits: a first plan is found cheaply before anything else (first_plan:
 * a few pipeline counts, one grouping each, no METIS inside pipelines), so
 * a search that stops early still returns the best plan so far whenever one
 * exists. After that every loop stops once the search's evaluations
 * (--search-evals: one fresh skeleton completed or priced each) are spent,
 * or, only under an explicit --search-budget, when the clock cuts it
 * short, which is then said.
 *
 * Deterministic: all choices come from the inputs and fixed seeds; the
 * budgets are counts of candidates, not seconds. Only a cut by the clock
 * can make a plan depend on the machine, and hexic warns when that
 * happens. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "passes/cost/cost.h"
#include "ir/plan_util.h"
#include "sched.h"

/* TOP plans are refined, polished and climbed from; the FINAL best by score
 * are simulated at the end (on large clusters the score is the estimate,
 * and the many near-equal candidates of several group counts can push the
 * plan the simulator prefers out of a short list), past the best TOP only
 * while their simulations total at most FINAL_TASKS tasks (large batches
 * make each one long). */
enum { TOP = 4, FINAL = 16, FINAL_TASKS = 1 << 21, MAX_MERGE = 8, MAX_STAGES = 256 };
/* Clusters of up to SIM_SCORE_MAX devices rank candidates by simulation,
 * others by the estimate; up to SMALL_CLUSTER they get the full budgets,
 * beyond it smaller ones. A step-by-step simulation's tasks grow with the
 * micro-batches (a global batch of 16M sequences on 8 devices took 40 s and
 * 1.4 GB for 5 candidates); the search's, extrapolated, do not (the estimate
 * it replaced there misranked: at a global batch of 2048 on 16 GPUs its plan
 * was 9% slower than the simulator's choice). */
enum { SIM_SCORE_MAX = 16, SMALL_CLUSTER = 64 };
/* Device exchanges hx_sched_relabel tries on the chosen plan (16 devices
 * have at most 120 pairs; each try is one simulation). */
enum { RELABEL_TRIES = 480 };

/* Budgets (candidates), by cluster size. */
struct budgets {
  int pools;         /* device pools explored */
  int ladder_full;   /* D_dp values all tried up to this, then a ladder */
  int layouts;       /* TP layouts tried (throughput, wide, narrow) */
  int variants;      /* stage orders tried with one group per machine */
  int refine_steps;  /* device moves tried, over all refined candidates */
  int polish_moves;  /* stage moves tried per polished candidate */
  int climb_pricings; /* structures priced per local search */
  int climb_kicks;    /* random restarts of the local search */
  int kvalues;        /* group counts k per pipeline tried (a prefix of KS) */
  int k_refine;       /* evaluations of per-pipeline k changes */
  int mix_steps;      /* evaluations of per-pipeline micro-batch sizes */
};

static struct budgets budgets_for(int ndevices) {
  /* the local search's neighbourhoods and simulations grow with the
   * cluster: fewer kicks past 8 devices keep 16 under a second */
  if (ndevices <= 8)
    return (struct budgets){24, 24, 3, HX_SCHED_ORDERS, 160, 600, 4000, 64, 8, 200, 0};
  if (ndevices <= SMALL_CLUSTER)
    return (struct budgets){24, 24, 3, HX_SCHED_ORDERS, 160, 600, 1500, 16, 8, 200, 200};
  if (ndevices <= 512)
    return (struct budgets){3, 4, 2, 2, 24, 80, 0, 0, 5, 24, 24};
  return (struct budgets){2, 4, 2, 1, 12, 40, 0, 0, 4, 8, 8};
}

/* ---- the search state ----------------------------------------------------- */

struct pool {
  int n;
  int *devices; /* sorted ranks */
};

/* How try_split built a plan: its device split, each pipeline's group
 * count (an index into KS), TP layout and stage order; what the
 * per-pipeline k refinement starts from. */
struct recipe {
  struct hx_sched_split *split;
  int *kmode;
  enum hx_tp_layout layout;
  int variant;
};

struct search {
  struct hx_ctx *ctx;
  struct hx_arena *a; /* scratch: freed after the winner is copied out */
  int tau;
  struct budgets b;
  bool sim_score;
  struct hx_rng rng;
  struct hx_plan *top[TOP];   /* best by score, ascending */
  struct hx_sched_split *top_split[TOP];
  struct recipe *top_recipe[TOP]; /* NULL for plans built otherwise */
  int ntop;
  struct hx_plan *final[FINAL]; /* best by score, ascending */
  int nfinal;
  /* the best plans before refine_k and mix_micro_batches add theirs: always
   * simulated at the end, so those never make the result slower */
  struct hx_plan *kept[TOP];
  int nkept;
  /* Small clusters: the best plan of each pipeline count, starting points
   * for the local search besides the top (they differ most from it). */
  struct hx_plan *best_by_dp[HX_LOCAL_MAX_DEVICES + 1];
  struct hx_sched_split *best_by_dp_split[HX_LOCAL_MAX_DEVICES + 1];
  long evaluated;              /* candidates considered (progress lines) */
  struct hx_arena candidates;  /* complete_by_simulation's scratch, reused */
  struct hx_search_limit limit;
  bool first_phase;             /* first_plan runs regardless of the limit */
  bool tp_any_link;             /* groupings let TP span any link (last resort) */
  struct hx_sched_memo groupings; /* (kmode, devices) -> struct hx_sched_grouping */
  struct hx_sched_memo skeletons; /* stage lists -> completed plan (or none) */
  struct hx_sched_memo scores;    /* stage lists -> simulated time (local search) */
  int *keybuf;                /* scratch for keys */
  /* progress lines only (stderr): the clock never steers the search */
  double progress_start, last_progress;
  double ema[2];              /* per objective: moving average of best score */
  struct hx_sched_pieces *pieces; /* completions' pipeline pieces, shared */
  int nsettings;              /* hx_sched_settings, for complete_by_simulation */
  int64_t mbs[HX_SCHED_MAX_SETTINGS];
  bool recompute[HX_SCHED_MAX_SETTINGS];
};

/* Whether the search must stop (its evaluations spent, or the clock ran
 * out); never while the first plan is being found. */
static bool stopped(struct search *s) {
  return !s->first_phase && hx_search_limit_stop(&s->limit);
}

/* A candidate's score by the simulator: every 1F1B pipeline's steady state
 * extrapolated once found (hx_sim_options.steady_all), so the cost does not
 * grow with the batch; finish() judges the finalists step by step. */
static void simulate_candidate(const struct hx_ctx *ctx, struct hx_plan *p) {
  struct hx_sim_options o = {.steady_all = true};
  hx_simulate(ctx, p, &o);
}

static void progress(struct search *s) {
  double t = hx_search_now_s();
  if (t - s->progress_start < 1.0 || t - s->last_progress < 1.0)
    return;
  s->last_progress = t;
  fprintf(stderr, "hexic: plan search: %ld candidates, best %.4g s/iteration (%.0f s)\n",
          s->evaluated, s->ntop ? s->top[0]->sim.iteration_s : NAN, t - s->progress_start);
}

/* A completed setting and a lower bound on it: hx_sim_quick_bound's until
 * `exact`, then hx_sim_lower_bound's. */
struct bounded {
  struct hx_plan *plan;
  double bound;
  bool exact;
  int index; /* in hx_sched_settings' order: ties go to the earlier */
};

/* Whether x comes before y: the lesser bound, at equal bounds a quick one
 * (its exact bound may tie y's and have the earlier index), then the
 * earlier setting. */
static bool bounded_before(const struct bounded *x, const struct bounded *y) {
  if (x->bound != y->bound)
    return x->bound < y->bound;
  if (x->exact != y->exact)
    return !x->exact;
  return x->index < y->index;
}

/* The next setting in the order of exact bounds (ties: the earlier) with
 * its exact bound, computing exact bounds only for settings that reach the
 * front: when a setting with an exact bound comes first, every quick one
 * left is above it (a tie would come first), and so is its exact bound.
 * Removed from done[]; false when none is left or the next cannot beat or
 * tie `best_s` (then no later one can either). */
static bool next_by_bound(const struct hx_ctx *ctx, struct bounded *done, int *ndone, double best_s,
                          struct bounded *next) {
  for (;;) {
    int at = -1;
    for (int i = 0; i < *ndone; i++)
      if (at < 0 || bounded_before(&done[i], &done[at]))
        at = i;
    if (at < 0 || done[at].bound > best_s)
      return false;
    if (!done[at].exact) {
      done[at].bound = hx_sim_lower_bound(ctx, done[at].plan);
      done[at].exact = true;
      continue;
    }
    *next = done[at];
    done[at] = done[--*ndone];
    return true;
  }
}

/* Small clusters: every (micro-batch size, recompute) setting completed and
 * simulated unless its lower bound cannot beat the best so far; the fastest
 * simulated one (ties: the earlier setting). The estimate that
 * hx_sched_complete ranks settings by can prefer a setting the simulator
 * does not (it ignores the overlap of the gradient sync), and the simulator
 * is what the plan is judged by. Settings are simulated in the order of
 * their bounds, so the best is found early and the rest are cut by it (a
 * large batch has a dozen micro-batch sizes); the choice is the one of
 * simulating them all. The exact bound is computed lazily (next_by_bound):
 * a setting whose quick bound is already above the best never pays for
 * it. Settings that cannot beat `beat` are not simulated: NULL when none
 * does. */
static struct hx_plan *complete_by_simulation(struct search *s, struct hx_arena *a,
                                              const struct hx_plan *sk, double beat) {
  struct bounded done[HX_SCHED_MAX_SETTINGS], next;
  int ndone = 0;
  struct hx_plan *each[HX_SCHED_MAX_SETTINGS];
  /* the settings' plans and groups in the search's candidate arena, emptied
   * for each skeleton: only the winner is copied into a (keeping every
   * setting of every skeleton was 30 of a search's 177 MB) */
  struct hx_arena *c = &s->candidates;
  hx_arena_reset(c);
  hx_sched_complete_each(s->ctx, c, sk, s->nsettings, s->mbs, s->recompute, s->pieces, beat, each);
  for (int k = 0; k < s->nsettings; k++) {
    struct hx_plan *p = each[k];
    if (!p)
      continue;
    /* the groups first: the bound prices their sync and ZeRO-1's shards
     * (without them it prices the symmetric sync, which can be slower) */
    hx_sched_build_groups(s->ctx, c, p);
    done[ndone++] = (struct bounded){p, hx_sim_quick_bound(s->ctx, p), false, k};
  }
  struct hx_plan *best = NULL;
  double best_s = beat;
  int best_index = -1;
  while (next_by_bound(s->ctx, done, &ndone, best_s, &next)) {
    bool may_tie = best && next.index < best_index;
    if (next.bound == best_s && !may_tie)
      continue;
    struct hx_plan *p = next.plan;
    simulate_candidate(s->ctx, p);
    double t = p->sim.iteration_s;
    if (p->sim.valid && (t < best_s || (t == best_s && may_tie))) {
      best = p;
      best_s = t;
      best_index = next.index;
    }
  }
  return best ? hx_plan_copy(a, best) : NULL;
}

/* Keeps plan among the FINAL best by score; ties keep the earlier one. */
static void keep_final(struct search *s, struct hx_plan *p) {
  for (int i = 0; i < s->nfinal; i++)
    if (s->final[i] == p)
      return;
  int at = s->nfinal;
  while (at > 0 && p->sim.iteration_s < s->final[at - 1]->sim.iteration_s)
    at--;
  if (at >= FINAL)
    return;
  int last = s->nfinal < FINAL ? s->nfinal : FINAL - 1;
  for (int i = last; i > at; i--)
    s->final[i] = s->final[i - 1];
  s->final[at] = p;
  if (s->nfinal < FINAL)
    s->nfinal++;
}

/* Counts a candidate, and keeps it among the FINAL and the TOP best by
 * score (ties keep the earlier one) with how it was built. */
static void consider_recipe(struct search *s, struct hx_plan *p, struct hx_sched_split *split,
                            struct recipe *r) {
  s->evaluated++;
  if (!p || !isfinite(p->sim.iteration_s))
    return;
  keep_final(s, p);
  for (int i = 0; i < s->ntop; i++)
    if (s->top[i] == p) /* polish may reach a plan already kept */
      return;
  double t = p->sim.iteration_s;
  int dp = p->npipelines;
  if (dp <= HX_LOCAL_MAX_DEVICES && (!s->best_by_dp[dp] || t < s->best_by_dp[dp]->sim.iteration_s)) {
    s->best_by_dp[dp] = p;
    s->best_by_dp_split[dp] = split;
  }
  int at = s->ntop;
  while (at > 0 && t < s->top[at - 1]->sim.iteration_s)
    at--;
  if (at >= TOP)
    return;
  int last = s->ntop < TOP ? s->ntop : TOP - 1;
  for (int i = last; i > at; i--) {
    s->top[i] = s->top[i - 1];
    s->top_split[i] = s->top_split[i - 1];
    s->top_recipe[i] = s->top_recipe[i - 1];
  }
  s->top[at] = p;
  s->top_split[at] = split;
  s->top_recipe[at] = r;
  if (s->ntop < TOP)
    s->ntop++;
}

static void consider(struct search *s, struct hx_plan *p, struct hx_sched_split *split) {
  consider_recipe(s, p, split, NULL);
}

/* The skeleton's stage lists as a memo key. */
static int skeleton_key(const struct hx_plan *sk, int *key) {
  int n = 0;
  for (int i = 0; i < sk->npipelines; i++) {
    key[n++] = -1 - sk->pipelines[i].nstages;
    for (int st = 0; st < sk->pipelines[i].nstages; st++) {
      const struct hx_stage *g = &sk->pipelines[i].stages[st];
      key[n++] = -1000000 - g->ndevices;
      memcpy(key + n, g->devices, sizeof(int) * (size_t)g->ndevices);
      n += g->ndevices;
    }
  }
  return n;
}

/* complete() for a caller that only takes a plan faster than `beat` (the
 * polish): where candidates are simulated, settings that cannot beat it are
 * not simulated, and a skeleton that does not is not remembered (a later
 * complete() does it in full); a plan it returns is complete()'s. */
static struct hx_plan *complete_below(struct search *s, const struct hx_plan *sk, bool *fresh,
                                      double beat) {
  int n = skeleton_key(sk, s->keybuf);
  struct hx_sched_memo_entry *e = hx_sched_memo_get(s->a, &s->skeletons, s->keybuf, n);
  *fresh = false;
  if (e->set)
    return e->value;
  if (stopped(s))
    return NULL;
  *fresh = true;
  s->limit.evals++;
  struct hx_plan *p = s->sim_score ? complete_by_simulation(s, s->a, sk, beat)
                                   : hx_sched_complete(s->ctx, s->a, sk, s->pieces);
  if (p || !s->sim_score || beat == INFINITY) {
    e->value = p;
    e->set = true;
  }
  return p;
}

/* Completes and scores a skeleton, once per distinct skeleton: one
 * evaluation. *fresh says whether this call did the work (a repeat is not
 * considered again). NULL without work once the search has stopped. */
static struct hx_plan *complete(struct search *s, const struct hx_plan *sk, bool *fresh) {
  return complete_below(s, sk, fresh, INFINITY);
}

/* The group counts k_i phase 2 tries per pipeline, as HexiScale iterates
 * k_i: one group, one per machine, then 2, 3, 4, ... groups by METIS (a
 * pipeline with fewer devices than k has one group per device). The first
 * three are what earlier versions tried; budgets.kvalues says how many. */
static const int KS[] = {1, HX_SCHED_K_MACHINES, 2, 3, 4, 6, 8, 12};
enum { NKS = sizeof KS / sizeof KS[0] };
static int k_for(int mode) { return KS[mode]; }

static const struct hx_sched_grouping *grouping(struct search *s, const int *devices, int n,
                                                int kmode) {
  s->keybuf[0] = s->tp_any_link ? NKS + kmode : kmode;
  memcpy(s->keybuf + 1, devices, sizeof(int) * (size_t)n);
  struct hx_sched_memo_entry *e = hx_sched_memo_get(s->a, &s->groupings, s->keybuf, n + 1);
  if (!e->set) {
    struct hx_sched_grouping *g =
        hx_sched_grouping(s->ctx, s->a, devices, n, k_for(kmode), s->tau, 0x9a0u + (uint64_t)kmode);
    g->tp_any_link = s->tp_any_link;
    e->value = g;
    e->set = true;
  }
  return e->value;
}

/* Skeletons are built in an arena of their own, freed once completed: the
 * memo keeps the completion (in s->a) under the skeleton's key, and a
 * skeleton has per-device arrays (llama2-13b on hetero-64 at batch 65536:
 * 10,700 skeletons and their copies were 60 of the search arena's 169 MB). */

/* A skeleton from a recipe: pipeline i grouped into KS[kmode[i]] groups;
 * NULL when the search stopped or a pipeline has no stages. In sa. */
static struct hx_plan *recipe_skeleton(struct search *s, struct hx_arena *sa,
                                       const struct recipe *r) {
  struct hx_ctx *ctx = s->ctx;
  const struct hx_sched_split *sp = r->split;
  struct hx_plan *sk = hx_plan_new(sa, ctx->cluster.ndevices, sp->npipelines);
  sk->strategy = "hexiscale";
  sk->schedule = ctx->train.schedule;
  for (int i = 0; i < sp->npipelines; i++) {
    if (stopped(s))
      return NULL;
    const struct hx_sched_grouping *g = grouping(s, sp->devices[i], sp->count[i], r->kmode[i]);
    /* a pipeline with fewer orders than `variant` keeps its last one */
    int v = r->variant < g->norders ? r->variant : g->norders - 1;
    if (v < 0 ||
        !hx_sched_stages(ctx, sa, sp->devices[i], sp->count[i], g, r->layout, v,
                         &sk->pipelines[i]) ||
        sk->pipelines[i].nstages > ctx->model.layers)
      return NULL;
  }
  return sk;
}

/* The recipe's skeleton, completed (NULL when it has none or nothing fits). */
static struct hx_plan *build_recipe(struct search *s, const struct recipe *r, bool *fresh) {
  struct hx_arena sa;
  hx_arena_init(&sa);
  *fresh = false;
  struct hx_plan *sk = recipe_skeleton(s, &sa, r);
  struct hx_plan *p = sk ? complete(s, sk, fresh) : NULL;
  hx_arena_free(&sa);
  return p;
}

static struct recipe *uniform_recipe(struct search *s, struct hx_sched_split *sp, int kmode,
                                     enum hx_tp_layout layout, int variant) {
  struct recipe *r = HX_NEW(s->a, struct recipe);
  *r = (struct recipe){sp, HX_NEW_ARRAY(s->a, int, sp->npipelines), layout, variant};
  for (int i = 0; i < sp->npipelines; i++)
    r->kmode[i] = kmode;
  return r;
}

static struct hx_plan *build(struct search *s, struct hx_sched_split *sp, int kmode,
                             enum hx_tp_layout layout, int variant, bool *fresh,
                             struct recipe **made) {
  struct recipe *r = uniform_recipe(s, sp, kmode, layout, variant);
  if (made)
    *made = r;
  return build_recipe(s, r, fresh);
}

/* Every phase-2 variant of one device split; returns the best score. */
static double try_split(struct search *s, struct hx_sched_split *sp) {
  static const enum hx_tp_layout layouts[] = {HX_LAYOUT_THROUGHPUT, HX_LAYOUT_WIDE,
                                              HX_LAYOUT_NARROW};
  double best = INFINITY;
  int largest = 0;
  for (int i = 0; i < sp->npipelines; i++)
    largest = sp->count[i] > largest ? sp->count[i] : largest;
  for (int kmode = 0; kmode < 3 && !stopped(s); kmode++) {
    if (KS[kmode] > largest) /* every pipeline would have a group per device: seen */
      break;
    for (int l = 0; l < s->b.layouts; l++)
      for (int v = 0; v < (kmode == 1 ? s->b.variants : 1); v++) {
        bool fresh;
        struct recipe *r;
        struct hx_plan *p = build(s, sp, kmode, layouts[l], v, &fresh, &r);
        if (fresh)
          consider_recipe(s, p, sp, r);
        if (p && p->sim.iteration_s < best)
          best = p->sim.iteration_s;
      }
  }
  return best;
}

/* The D_dp values tried: all up to ladder_full, then the powers of two and
 * the midpoints 1.5 x 2^j (batches and clusters are mostly powers of two,
 * so the symmetric shapes stay reachable); max_dp last. */
static int ladder(const struct budgets *b, int max_dp, int *out) {
  int n = 0, d = 1;
  while (d <= max_dp) {
    out[n++] = d;
    bool pow2 = (d & (d - 1)) == 0;
    int next = d < b->ladder_full ? d + 1 : pow2 ? d * 3 / 2 : d * 4 / 3;
    d = next > d ? next : d + 1;
  }
  if (n > 0 && out[n - 1] != max_dp)
    out[n++] = max_dp;
  return n;
}

/* Model state per parameter that every pipeline keeps a copy of, and that
 * the pipelines share between them: ZeRO-1 splits the optimizer state over
 * them, so only one copy of it counts. */
static double shared_bytes_per_param(const struct hx_ctx *ctx) {
  return ctx->train.optimizer_sharding == HX_SHARD_ZERO1
             ? hx_optimizer_state_bytes_per_param(&ctx->train)
             : 0;
}

static double replica_bytes_per_param(const struct hx_ctx *ctx) {
  return hx_state_bytes_per_param(&ctx->train) - shared_bytes_per_param(ctx);
}

/* The most pipelines the pool's memory can hold: each pipeline keeps a whole
 * replica of the weights and optimizer state (activations aside), so no
 * more than the pool's usable memory over one replica's state; at least 1. */
static int memory_max_dp(const struct hx_ctx *ctx, const struct pool *p) {
  double have = 0;
  for (int i = 0; i < p->n; i++)
    have += (double)ctx->cluster.gpus[ctx->cluster.devices[p->devices[i]].gpu_type].memory_bytes -
            HX_MEMORY_RESERVE_BYTES;
  double replica = (double)ctx->model.params_total * replica_bytes_per_param(ctx);
  have -= (double)ctx->model.params_total * shared_bytes_per_param(ctx);
  double most = replica > 0 ? floor(have / replica) : (double)p->n;
  return most < 1 ? 1 : most > p->n ? p->n : (int)most;
}

/* The most pipelines worth trying on the pool: what memory holds, and at
 * most one per sample of the global batch. */
static int most_pipelines(const struct hx_ctx *ctx, const struct pool *p) {
  int most = memory_max_dp(ctx, p);
  return ctx->train.global_batch < most ? (int)ctx->train.global_batch : most;
}

/* Phase 1's split of the pool into dp pipelines under obj, its seed fixed
 * by (dp, obj): first_plan and explore_pool ask for the same splits, so
 * the completions of the first are memoised for the second. */
static struct hx_sched_split *split_pool(struct search *s, const struct pool *pool, int dp,
                                         enum hx_edge_objective obj) {
  uint64_t seed = 0x5eed0000u + (uint64_t)dp * 2 + (uint64_t)obj;
  return hx_sched_phase1(s->ctx, s->a, pool->devices, pool->n, dp, obj, seed);
}

static void explore_pool(struct search *s, const struct pool *pool) {
  int max_dp = most_pipelines(s->ctx, pool);
  int dps[512];
  int ndps = ladder(&s->b, max_dp, dps);
  s->ema[0] = s->ema[1] = 0;
  for (int di = 0; di < ndps && !stopped(s); di++) {
    double got[2] = {INFINITY, INFINITY};
    bool warmup = di < 3 || di % 4 == 0;
    int prefer = s->ema[1] < s->ema[0] ? 1 : 0;
    for (int obj = 0; obj < 2 && !stopped(s); obj++) {
      if (!warmup && obj != prefer)
        continue;
      struct hx_sched_split *sp = split_pool(s, pool, dps[di], (enum hx_edge_objective)obj);
      if (sp)
        got[obj] = try_split(s, sp);
      progress(s);
    }
    /* the moving average only learns from D_dp values where both ran */
    if (isfinite(got[0]) && isfinite(got[1])) {
      double norm = fmin(got[0], got[1]);
      for (int obj = 0; obj < 2; obj++)
        s->ema[obj] = 0.7 * s->ema[obj] + 0.3 * (got[obj] / norm);
    }
  }
}

/* The first plan: a few pipeline counts, most likely to fit first (half
 * what memory allows, then fewer by halves, then the most), each split by
 * phase 1 as explore_pool would (same seed: its completions are memoised
 * for the search) and built with one group per machine and the throughput
 * layout, which need no METIS inside pipelines. Stops at the first plan
 * that fits. Cheap (at most ~2 log2(devices) evaluations), and run before
 * the limits apply, so a search that stops early still has a plan. */
static void first_plan(struct search *s, const struct pool *pool) {
  int top = most_pipelines(s->ctx, pool);
  int dps[64], n = 0;
  for (int d = top / 2 > 0 ? top / 2 : 1; d >= 1 && n < 62; d /= 2)
    dps[n++] = d;
  if (dps[0] != top)
    dps[n++] = top;
  for (int i = 0; i < n && s->ntop == 0; i++) {
    struct hx_sched_split *sp = split_pool(s, pool, dps[i], HX_EDGES_RECIPROCAL);
    for (int kmode = 1; sp && kmode >= 0 && s->ntop == 0; kmode--) {
      bool fresh;
      struct recipe *r;
      struct hx_plan *p = build(s, sp, kmode, HX_LAYOUT_THROUGHPUT, 0, &fresh, &r);
      if (fresh)
        consider_recipe(s, p, sp, r);
    }
  }
}

/* ---- device pools ----------------------------------------------------------- */

static int find_root(int *parent, int x) {
  while (parent[x] != x)
    x = parent[x] = parent[parent[x]];
  return x;
}

static double node_link(const struct hx_cluster *c, int a, int b) {
  return hx_bw(c, c->nodes[a].first_device, c->nodes[b].first_device);
}

static int cmp_double_desc(const void *x, const void *y) {
  double a = *(const double *)x, b = *(const double *)y;
  return (a < b) - (a > b);
}

/* Whether the pool's devices can hold the model's weights and optimizer
 * state at all (activations aside): a cheap filter before any partition. */
static bool pool_may_fit(const struct hx_ctx *ctx, const struct pool *p) {
  double have = 0;
  for (int i = 0; i < p->n; i++)
    have += (double)ctx->cluster.gpus[ctx->cluster.devices[p->devices[i]].gpu_type].memory_bytes -
            HX_MEMORY_RESERVE_BYTES;
  /* under ZeRO-1 too: the pipelines hold at least one copy of everything */
  return have >= (double)ctx->model.params_total * hx_state_bytes_per_param(&ctx->train);
}

/* What makes two pools alike: per machine (sorted) its GPU type, devices
 * used and bandwidth, plus the slowest link between the pool's machines. */
static int pool_signature(const struct hx_cluster *c, const struct pool *p, int *key) {
  int n = 0;
  double slowest = INFINITY;
  for (int i = 0; i < p->n; i++) {
    const struct hx_device *d = &c->devices[p->devices[i]];
    if (i > 0 && c->devices[p->devices[i - 1]].node == d->node) {
      key[n - 1]++;
      continue;
    }
    for (int j = 0; j < i; j++)
      slowest = fmin(slowest, hx_bw(c, p->devices[j], p->devices[i]));
    key[n++] = d->gpu_type;
    key[n++] = (int)fmin(c->nodes[d->node].bandwidth / 1e6, 1e9);
    key[n++] = 1;
  }
  /* machines in a canonical order: sort the triples */
  for (int i = 3; i < n; i += 3)
    for (int j = i; j >= 3 && memcmp(key + j - 3, key + j, 3 * sizeof(int)) > 0; j -= 3)
      for (int k = 0; k < 3; k++) {
        int t = key[j - 3 + k];
        key[j - 3 + k] = key[j + k];
        key[j + k] = t;
      }
  key[n++] = isfinite(slowest) ? (int)fmin(slowest / 1e6, 1e9) : -1;
  return n;
}

struct pool_list {
  struct pool *items;
  double *compute;
  int n, cap;
  struct hx_sched_memo seen;
};

/* The most devices one plan can use: at most global_batch pipelines, each
 * of at most `layers` stages of at most HX_SCHED_MAX_TP devices. */
static int64_t usable_devices(const struct hx_ctx *ctx) {
  int tp = HX_SCHED_MAX_TP;
  while (tp > 1 && !hx_sched_tp_legal(&ctx->model, tp))
    tp--;
  double most = (double)ctx->train.global_batch * (double)ctx->model.layers * tp;
  return most < (double)INT32_MAX ? (int64_t)most : INT32_MAX;
}

struct ranked_device {
  double flops;
  int rank;
};

static int faster_first(const void *x, const void *y) {
  const struct ranked_device *a = x, *b = y;
  if (a->flops != b->flops)
    return a->flops > b->flops ? -1 : 1;
  return (a->rank > b->rank) - (a->rank < b->rank);
}

void hx_sched_sort_fastest_first(const struct hx_cluster *c, struct hx_arena *a, int *devices,
                                 int n) {
  struct ranked_device *r = HX_NEW_ARRAY(a, struct ranked_device, n > 0 ? n : 1);
  for (int i = 0; i < n; i++)
    r[i] = (struct ranked_device){hx_device_flops(c, devices[i]), devices[i]};
  qsort(r, (size_t)n, sizeof *r, faster_first);
  for (int i = 0; i < n; i++)
    devices[i] = r[i].rank;
}

/* Keeps the `keep` fastest of devices[0..n) (ties: the lower rank), in rank
 * order: a pool larger than any plan can use (2048 one-GPU machines for an
 * 8-layer model and a batch of 7) would only yield pipelines of too many
 * stages, and "no plan fits" where the fastest few devices fit. */
static int fastest_devices(const struct hx_cluster *c, struct hx_arena *a, int *devices, int n,
                           int keep) {
  hx_sched_sort_fastest_first(c, a, devices, n);
  hx_sched_sort_ranks(devices, keep);
  return keep;
}

static void add_pool(struct search *s, struct pool_list *l, const int *devices, int n) {
  if (n <= 0 || l->n == l->cap)
    return;
  struct pool p = {n, HX_NEW_ARRAY(s->a, int, n)};
  memcpy(p.devices, devices, sizeof(int) * (size_t)n);
  int64_t usable = usable_devices(s->ctx);
  if (p.n > usable)
    p.n = n = fastest_devices(&s->ctx->cluster, s->a, p.devices, n, (int)usable);
  devices = p.devices;
  if (!pool_may_fit(s->ctx, &p))
    return;
  int *key = HX_NEW_ARRAY(s->a, int, 3 * n + 1);
  struct hx_sched_memo_entry *e =
      hx_sched_memo_get(s->a, &l->seen, key, pool_signature(&s->ctx->cluster, &p, key));
  if (e->set)
    return;
  e->set = true;
  double compute = 0;
  for (int i = 0; i < n; i++)
    compute += hx_device_flops(&s->ctx->cluster, devices[i]);
  l->compute[l->n] = compute;
  l->items[l->n++] = p;
}

/* The pools of one set of machines (in[node]): all its devices, then
 * without the slowest GPU types one after another. */
static void add_machine_set(struct search *s, struct pool_list *l, const bool *in) {
  const struct hx_cluster *c = &s->ctx->cluster;
  int *devs = HX_NEW_ARRAY(s->a, int, c->ndevices);
  double *speeds = HX_NEW_ARRAY(s->a, double, c->ndevices);
  int nspeeds = 0;
  for (int r = 0; r < c->ndevices; r++)
    if (in[c->devices[r].node])
      speeds[nspeeds++] = hx_device_flops(c, r);
  qsort(speeds, (size_t)nspeeds, sizeof(double), cmp_double_desc);
  for (int i = nspeeds - 1; i >= 0; i--) { /* every device first, then faster cuts */
    if (i + 1 < nspeeds && speeds[i] == speeds[i + 1])
      continue;
    int n = 0;
    for (int r = 0; r < c->ndevices; r++)
      if (in[c->devices[r].node] && hx_device_flops(c, r) >= speeds[i])
        devs[n++] = r;
    add_pool(s, l, devs, n);
  }
}

/* Machine sets: the components of the machine graph keeping the links of
 * at least each distinct bandwidth (fastest first: single machines), from
 * the slowest threshold (everything) up. */
static void add_components(struct search *s, struct pool_list *l) {
  const struct hx_cluster *c = &s->ctx->cluster;
  int nn = c->nnodes;
  long npairs = (long)nn * (nn - 1) / 2;
  /* large clusters: only the whole cluster and single machines */
  bool all_thresholds = npairs <= 4096;
  double *bws = HX_NEW_ARRAY(s->a, double, (all_thresholds ? npairs : 0) + 2);
  int nbw = 0;
  bws[nbw++] = 0; /* everything */
  for (int a = 0; all_thresholds && a < nn; a++)
    for (int b = a + 1; b < nn; b++)
      bws[nbw++] = node_link(c, a, b);
  bws[nbw++] = INFINITY; /* single machines */
  qsort(bws, (size_t)nbw, sizeof(double), cmp_double_desc);
  int *parent = HX_NEW_ARRAY(s->a, int, nn);
  bool *in = HX_NEW_ARRAY(s->a, bool, nn);
  for (int t = nbw - 1; t >= 0; t--) {
    if (t + 1 < nbw && bws[t] == bws[t + 1])
      continue;
    for (int i = 0; i < nn; i++)
      parent[i] = i;
    for (int a = 0; a < nn; a++)
      for (int b = a + 1; b < nn && bws[t] > 0; b++)
        if (node_link(c, a, b) >= bws[t] && fmin(node_link(c, a, b), node_link(c, b, a)) >= bws[t])
          parent[find_root(parent, b)] = find_root(parent, a);
    for (int root = 0; root < nn; root++) {
      if (bws[t] > 0 && find_root(parent, root) != root)
        continue;
      for (int i = 0; i < nn; i++)
        in[i] = bws[t] <= 0 || find_root(parent, i) == root;
      add_machine_set(s, l, in);
      if (bws[t] <= 0)
        break;
    }
  }
}

/* The pools explored, the whole cluster first, then by compute. */
static int make_pools(struct search *s, struct pool *out, int max) {
  struct pool_list l = {HX_NEW_ARRAY(s->a, struct pool, 4 * max + 64),
                        HX_NEW_ARRAY(s->a, double, 4 * max + 64), 0, 4 * max + 64, {0}};
  add_components(s, &l);
  int n = 0;
  bool *taken = HX_NEW_ARRAY(s->a, bool, l.n);
  if (l.n > 0 && l.items[0].n == s->ctx->cluster.ndevices) {
    out[n++] = l.items[0];
    taken[0] = true;
  }
  while (n < max) {
    int pick = -1;
    for (int i = 0; i < l.n; i++)
      if (!taken[i] && (pick < 0 || l.compute[i] > l.compute[pick]))
        pick = i;
    if (pick < 0)
      break;
    taken[pick] = true;
    out[n++] = l.items[pick];
  }
  return n;
}

/* ---- refinement: move devices between pipelines ------------------------- */

static struct hx_sched_split *split_copy(struct hx_arena *a, const struct hx_sched_split *src,
                                         int room) {
  struct hx_sched_split *d = HX_NEW(a, struct hx_sched_split);
  d->npipelines = src->npipelines;
  d->count = HX_NEW_ARRAY(a, int, d->npipelines);
  d->devices = HX_NEW_ARRAY(a, int *, d->npipelines);
  for (int i = 0; i < d->npipelines; i++) {
    d->count[i] = src->count[i];
    d->devices[i] = HX_NEW_ARRAY(a, int, src->count[i] + room);
    memcpy(d->devices[i], src->devices[i], sizeof(int) * (size_t)src->count[i]);
  }
  return d;
}

/* Moves the devices of pipeline `from` on the machine of its device `at`
 * into pipeline `to`, keeping rank order. */
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
  struct hx_sched_split *sp = split_copy(s->a, cur, cur->count[from]);
  int at = hx_rng_below(&s->rng, sp->count[from]);
  return move_node(sp, &s->ctx->cluster, from, at, to) ? sp : NULL;
}

/* Hill-climbs one candidate's device split: a move is kept when the best
 * plan built on the new split scores better. */
static void refine_from(struct search *s, struct hx_sched_split *cur, double cur_t, int steps) {
  for (int step = 0; step < steps && !stopped(s); step++) {
    struct hx_sched_split *sp = propose(s, cur);
    if (!sp)
      continue;
    double t = try_split(s, sp);
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
  struct hx_sched_split *start[TOP];
  double start_t[TOP];
  int n = 0;
  for (int i = 0; i < s->ntop; i++)
    if (s->top_split[i] && s->top_split[i]->npipelines > 1) {
      start[n] = s->top_split[i];
      start_t[n++] = s->top[i]->sim.iteration_s;
    }
  for (int i = 0; i < n; i++)
    refine_from(s, start[i], start_t[i], s->b.refine_steps / n);
}

/* ---- per-pipeline group counts and micro-batch sizes ----------------------- */

/* Coordinate descent over each pipeline's own k_i (HexiScale draws k_i per
 * pipeline): from each best plan try_split built, one pipeline's group
 * count changed at a time, a change kept when the plan scores better;
 * b.k_refine fresh evaluations in all. */
static void refine_k(struct search *s, struct recipe *const *start, int n) {
  long spent = 0;
  for (int t = 0; t < n && spent < s->b.k_refine && !stopped(s); t++) {
    struct recipe *cur = start[t];
    bool fresh;
    struct hx_plan *best = build_recipe(s, cur, &fresh); /* memoised */
    if (!best)
      continue;
    for (int i = 0; i < cur->split->npipelines && spent < s->b.k_refine && !stopped(s); i++)
      for (int m = 0; m < s->b.kvalues && spent < s->b.k_refine && !stopped(s); m++) {
        if (m == cur->kmode[i] || KS[m] > cur->split->count[i])
          continue;
        struct recipe *r = HX_NEW(s->a, struct recipe);
        *r = *cur;
        r->kmode = HX_NEW_ARRAY(s->a, int, cur->split->npipelines);
        memcpy(r->kmode, cur->kmode, sizeof(int) * (size_t)cur->split->npipelines);
        r->kmode[i] = m;
        struct hx_plan *p = build_recipe(s, r, &fresh);
        if (!fresh)
          continue;
        spent++;
        consider_recipe(s, p, r->split, r);
        if (p && p->sim.iteration_s < best->sim.iteration_s * (1 - 1e-9)) {
          best = p;
          cur = r;
        }
      }
    progress(s);
  }
}

/* A plan with the micro-batch sizes mbs (one per pipeline), completed from
 * plan's stages and scored as every candidate is (simulated on small
 * clusters, else the estimate); NULL when it does not fit. One evaluation. */
static struct hx_plan *with_sizes(struct search *s, const struct hx_plan *plan,
                                  const int64_t *mbs, bool recompute) {
  s->limit.evals++;
  struct hx_plan *p = hx_sched_complete_mixed(s->ctx, s->a, plan, mbs, recompute);
  if (!p)
    return NULL;
  if (s->sim_score) {
    hx_sched_build_groups(s->ctx, s->a, p);
    simulate_candidate(s->ctx, p);
    return p->sim.valid ? p : NULL;
  }
  p->sim.iteration_s = hx_estimate_iteration_s(s->ctx, p);
  return p;
}

/* Each pipeline its own micro-batch size where faster: from each best plan
 * of several pipelines, one pipeline's size changed at a time (the sizes of
 * hx_sched_settings at the plan's recompute), a change kept when the plan
 * scores better; b.mix_steps evaluations in all. Clusters of more than
 * HX_EXHAUSTIVE_MAX_DEVICES only: the exhaustive planner's space (the
 * oracle of every smaller plan) has one size per plan. */
static void mix_micro_batches(struct search *s) {
  if (s->ctx->cluster.ndevices <= HX_EXHAUSTIVE_MAX_DEVICES || s->b.mix_steps <= 0)
    return;
  struct hx_plan *start[TOP];
  int n = 0;
  for (int i = 0; i < s->ntop; i++)
    if (s->top[i]->npipelines > 1)
      start[n++] = s->top[i];
  long spent = 0;
  for (int t = 0; t < n && spent < s->b.mix_steps && !stopped(s); t++) {
    struct hx_plan *best = start[t];
    int np = best->npipelines;
    bool rc = best->pipelines[0].stages[0].recompute;
    int64_t *mbs = HX_NEW_ARRAY(s->a, int64_t, np);
    for (int i = 0; i < np; i++)
      mbs[i] = best->pipelines[i].micro_batch_size;
    for (int i = 0; i < np && spent < s->b.mix_steps && !stopped(s); i++)
      for (int k = 0; k < s->nsettings && spent < s->b.mix_steps && !stopped(s); k++) {
        if (s->recompute[k] != rc || s->mbs[k] == mbs[i])
          continue;
        int64_t was = mbs[i];
        mbs[i] = s->mbs[k];
        spent++;
        struct hx_plan *p = with_sizes(s, best, mbs, rc);
        consider(s, p, NULL);
        if (p && p->sim.iteration_s < best->sim.iteration_s * (1 - 1e-9))
          best = p;
        else
          mbs[i] = was;
      }
    progress(s);
  }
}

/* ---- polishing: stage-level moves on the best plans ----------------------- */

enum stage_op { OP_MERGE, OP_MOVE, OP_SPLIT, OP_DROP_STAGE, OP_DROP_PIPELINE, NOPS };

/* Whether a and b may form one TP group: every pair of their devices may
 * share one (as phase 2's islands). */
static bool may_merge(const struct hx_cluster *c, const struct hx_stage *a,
                      const struct hx_stage *b) {
  for (int i = 0; i < a->ndevices; i++)
    for (int j = 0; j < b->ndevices; j++)
      if (!hx_sched_may_share_tp(c, a->devices[i], b->devices[j]))
        return false;
  return true;
}

static bool op_applies(const struct search *s, const struct hx_plan *plan, int i, int from, int to,
                       enum stage_op op) {
  const struct hx_ctx *ctx = s->ctx;
  const struct hx_pipeline *p = &plan->pipelines[i];
  const struct hx_stage *a = &p->stages[from], *b = &p->stages[to];
  switch (op) {
  case OP_MERGE:
    return from != to && a->ndevices + b->ndevices <= MAX_MERGE &&
           hx_sched_tp_legal(&ctx->model, a->ndevices + b->ndevices) &&
           may_merge(&ctx->cluster, a, b);
  case OP_MOVE:
    return from != to;
  case OP_SPLIT:
    return to == 0 && a->ndevices % 2 == 0 && hx_sched_tp_legal(&ctx->model, a->ndevices / 2);
  case OP_DROP_STAGE:
    return to == 0 && p->nstages > 1;
  case OP_DROP_PIPELINE:
    return from == 0 && to == 0 && plan->npipelines > 1;
  case NOPS:
    break;
  }
  return false;
}

/* stage_move's skeleton (the move applies), in sa. */
static struct hx_plan *moved_skeleton(struct hx_arena *sa, const struct hx_plan *plan, int i,
                                      int from, int to, enum stage_op op) {
  const struct hx_pipeline *p = &plan->pipelines[i];
  struct hx_plan *q = hx_plan_copy(sa, plan);
  q->groups = NULL;
  q->ngroups = 0;
  if (op == OP_DROP_PIPELINE) {
    for (int k = i; k + 1 < q->npipelines; k++)
      q->pipelines[k] = q->pipelines[k + 1];
    q->npipelines--;
    return q;
  }
  const struct hx_stage *a = &p->stages[from], *b = &p->stages[to];
  int sizes[2 * MAX_STAGES], m = 0;
  const int *runs[2 * MAX_STAGES];
  int *merged = HX_NEW_ARRAY(sa, int, a->ndevices + b->ndevices);
  for (int k = 0; k < p->nstages; k++) {
    if (k == from && op != OP_SPLIT)
      continue; /* merged, moved or dropped */
    if (op == OP_MOVE && k == to && to < from) {
      runs[m] = a->devices, sizes[m++] = a->ndevices;
    }
    if (op == OP_SPLIT && k == from) {
      runs[m] = a->devices, sizes[m++] = a->ndevices / 2;
      runs[m] = a->devices + a->ndevices / 2, sizes[m++] = a->ndevices / 2;
      continue;
    }
    if (op == OP_MERGE && k == to) {
      memcpy(merged, b->devices, sizeof(int) * (size_t)b->ndevices);
      memcpy(merged + b->ndevices, a->devices, sizeof(int) * (size_t)a->ndevices);
      runs[m] = merged, sizes[m++] = a->ndevices + b->ndevices;
      continue;
    }
    runs[m] = p->stages[k].devices, sizes[m++] = p->stages[k].ndevices;
    if (op == OP_MOVE && k == to && to > from)
      runs[m] = a->devices, sizes[m++] = a->ndevices;
  }
  struct hx_pipeline *qp = &q->pipelines[i];
  hx_pipeline_init(sa, qp, m);
  qp->micro_batch_size = p->micro_batch_size;
  qp->micro_batches = p->micro_batches;
  for (int k = 0; k < m; k++)
    hx_stage_init(sa, &qp->stages[k], runs[k], sizes[k], 0, 0, false);
  return q;
}

/* A copy of plan with pipeline i's stage list changed by op: stage `from`
 * merged into stage `to` as one TP group, moved to position `to`, split into
 * two TP halves, or left out (its devices unused); or pipeline i left out.
 * Completed again; NULL when the move does not apply or nothing fits. */
static struct hx_plan *stage_move(struct search *s, const struct hx_plan *plan, int i, int from,
                                  int to, enum stage_op op, bool *fresh, double beat) {
  *fresh = false;
  const struct hx_pipeline *p = &plan->pipelines[i];
  if (p->nstages > MAX_STAGES || !op_applies(s, plan, i, from, to, op))
    return NULL;
  struct hx_arena sa; /* the skeleton's: see recipe_skeleton */
  hx_arena_init(&sa);
  struct hx_plan *done = complete_below(s, moved_skeleton(&sa, plan, i, from, to, op), fresh,
                                        beat);
  hx_arena_free(&sa);
  return done;
}

/* A copy of plan with the devices of machine `node` that it leaves unused
 * inserted into pipeline i as a new stage at position `at` (one TP group
 * when the count is a legal degree, else one stage per device). */
static struct hx_plan *add_machine(struct search *s, const struct hx_plan *plan, int i, int node,
                                   int at, bool *fresh, double beat) {
  const struct hx_cluster *c = &s->ctx->cluster;
  const struct hx_pipeline *p = &plan->pipelines[i];
  *fresh = false;
  int idle[MAX_MERGE], n = 0;
  for (int k = 0; k < c->nodes[node].gpus && n < MAX_MERGE; k++) {
    int r = c->nodes[node].first_device + k;
    if (plan->devices[r].pipeline < 0)
      idle[n++] = r;
  }
  if (n == 0 || p->nstages + n > MAX_STAGES || p->nstages + 1 > s->ctx->model.layers)
    return NULL;
  bool one = hx_sched_tp_legal(&s->ctx->model, n);
  int added = one ? 1 : n;
  struct hx_arena sa; /* the skeleton's: see recipe_skeleton */
  hx_arena_init(&sa);
  struct hx_plan *q = hx_plan_copy(&sa, plan);
  q->groups = NULL;
  q->ngroups = 0;
  struct hx_pipeline *qp = &q->pipelines[i];
  hx_pipeline_init(&sa, qp, p->nstages + added);
  qp->micro_batch_size = p->micro_batch_size;
  qp->micro_batches = p->micro_batches;
  for (int k = 0, out = 0; k <= p->nstages; k++) {
    if (k == at)
      for (int d = 0; d < added; d++, out++)
        hx_stage_init(&sa, &qp->stages[out], one ? idle : idle + d, one ? n : 1, 0, 0, false);
    if (k < p->nstages)
      hx_stage_init(&sa, &qp->stages[out++], p->stages[k].devices, p->stages[k].ndevices, 0, 0,
                    false);
  }
  struct hx_plan *done = complete_below(s, q, fresh, beat);
  hx_arena_free(&sa);
  return done;
}

/* What a polish move must beat to be taken: plan's time, less 1e-9 of it. */
static double improvement(const struct hx_plan *plan) { return plan->sim.iteration_s * (1 - 1e-9); }

/* Tries putting every partly idle machine's idle devices into some pipeline
 * at some position; the first that scores better. */
static struct hx_plan *try_add(struct search *s, struct hx_plan *plan, int *budget) {
  for (int node = 0; node < s->ctx->cluster.nnodes; node++)
    for (int i = 0; i < plan->npipelines; i++)
      for (int at = 0; at <= plan->pipelines[i].nstages && *budget > 0 && !stopped(s); at++) {
        bool fresh;
        struct hx_plan *q = add_machine(s, plan, i, node, at, &fresh, improvement(plan));
        if (!q && at == 0)
          break; /* nothing idle there */
        (*budget)--;
        s->evaluated++;
        if (q && q->sim.iteration_s < improvement(plan))
          return q;
      }
  return NULL;
}

/* First-improvement hill climbing over the stage moves of every pipeline. */
static struct hx_plan *polish(struct search *s, struct hx_plan *plan, int budget) {
  bool improved = true;
  while (improved && budget > 0 && !stopped(s)) {
    improved = false;
    if (hx_plan_used_devices(plan) < plan->ndevices) {
      struct hx_plan *q = try_add(s, plan, &budget);
      if (q) {
        plan = q;
        improved = true;
        continue;
      }
    }
    for (int op = 0; op < NOPS && !improved; op++)
      for (int i = 0; i < plan->npipelines && !improved; i++)
        for (int st = 0; st < plan->pipelines[i].nstages && !improved; st++)
          for (int to = 0;
               to < plan->pipelines[i].nstages && !improved && budget > 0 && !stopped(s); to++) {
            if (!op_applies(s, plan, i, st, to, (enum stage_op)op))
              continue;
            bool fresh;
            struct hx_plan *q =
                stage_move(s, plan, i, st, to, (enum stage_op)op, &fresh, improvement(plan));
            budget--;
            s->evaluated++;
            if (q && q->sim.iteration_s < improvement(plan)) {
              plan = q;
              improved = true;
            }
          }
    progress(s);
  }
  return plan;
}

static void polish_top(struct search *s) {
  int n = s->ntop;
  struct hx_plan *start[TOP];
  struct hx_sched_split *split[TOP];
  for (int i = 0; i < n; i++) {
    start[i] = s->top[i];
    split[i] = s->top_split[i];
  }
  for (int i = 0; i < n; i++) {
    struct hx_plan *p = polish(s, start[i], s->b.polish_moves);
    if (p != start[i])
      consider(s, p, split[i]);
  }
}

/* ---- local search over structures (small clusters) -------------------------- */

/* What the local search learnt of a structure: its simulated time, or (not
 * exact) a time it cannot beat. */
struct score {
  double t;
  bool exact;
};

/* The local search's pricing: the simulated time only, memoised apart from
 * the completed plans (the climbs price tens of thousands of structures; the
 * few they keep are completed again by complete()). A structure that cannot
 * beat `beat` is remembered as such, without simulating all its settings. */
static double price_skeleton(void *cookie, const struct hx_plan *skeleton, double beat,
                             bool *fresh) {
  struct search *s = cookie;
  int n = skeleton_key(skeleton, s->keybuf);
  struct hx_sched_memo_entry *e = hx_sched_memo_get(s->a, &s->scores, s->keybuf, n);
  struct score *sc = e->value;
  *fresh = !sc || (!sc->exact && sc->t < beat);
  if (!*fresh)
    return sc->t;
  if (stopped(s)) {
    *fresh = false;
    return NAN; /* ends the local search */
  }
  s->limit.evals++;
  if (!sc)
    e->value = sc = HX_NEW(s->a, struct score);
  e->set = true;
  struct hx_arena tmp;
  hx_arena_init(&tmp);
  struct hx_plan *p = complete_by_simulation(s, &tmp, skeleton, beat);
  sc->exact = p != NULL || beat == INFINITY;
  sc->t = p ? p->sim.iteration_s : beat;
  hx_arena_free(&tmp);
  return sc->t;
}

/* Climbs from each of the best plans and from the best plan of each
 * pipeline count (a snapshot: the lists change as the climbs find better
 * plans) with sched_local.c's moves. */
static void climb_top(struct search *s) {
  if (!s->sim_score || s->ctx->cluster.ndevices > HX_LOCAL_MAX_DEVICES)
    return;
  int n = 0;
  struct hx_plan *start[TOP + HX_LOCAL_MAX_DEVICES + 1];
  struct hx_sched_split *split[TOP + HX_LOCAL_MAX_DEVICES + 1];
  for (int i = 0; i < s->ntop; i++, n++) {
    start[n] = s->top[i];
    split[n] = s->top_split[i];
  }
  for (int dp = 1; dp <= HX_LOCAL_MAX_DEVICES; dp++) {
    bool in_top = false;
    for (int i = 0; i < s->ntop; i++)
      in_top = in_top || s->top[i] == s->best_by_dp[dp];
    if (s->best_by_dp[dp] && !in_top) {
      start[n] = s->best_by_dp[dp];
      split[n++] = s->best_by_dp_split[dp];
    }
  }
  for (int i = 0; i < n && !stopped(s); i++) {
    struct hx_plan *sk = hx_sched_local_search(s->ctx, s->a, start[i], s->b.climb_pricings,
                                               s->b.climb_kicks, price_skeleton, s);
    bool fresh;
    struct hx_plan *p = sk ? complete(s, sk, &fresh) : NULL;
    if (p)
      consider(s, p, split[i]);
    progress(s);
  }
}

/* ---- choosing -------------------------------------------------------------- */

static bool simulated(const struct hx_ctx *ctx, struct hx_plan *p) {
  if (p && !p->sim.valid)
    hx_simulate(ctx, p, NULL);
  return p && p->sim.valid;
}

struct hx_plan *hx_sched_baseline_seed(const struct hx_ctx *ctx) {
  struct hx_plan *all = ctx->baseline, *subset = ctx->baseline_subset;
  bool has_all = simulated(ctx, all), has_subset = simulated(ctx, subset);
  if (has_subset && (!has_all || subset->sim.iteration_s < all->sim.iteration_s))
    return subset;
  return has_all ? all : NULL;
}

/* ZeRO-1 where it helps: a sharded finalist's twin without the shards (its
 * state whole: no all-gather after the optimizer), when that fits too; the
 * simulator picks (ties: the sharded one, listed first). NULL otherwise. */
static struct hx_plan *unsharded(struct hx_ctx *ctx, const struct hx_plan *p) {
  if (!hx_plan_sharded(p))
    return NULL;
  struct hx_plan *whole = hx_plan_copy(&ctx->arena, p);
  whole->optimizer_sharding = HX_SHARD_NONE;
  for (int g = 0; g < whole->ngroups; g++)
    whole->groups[g].shard_ppm = NULL;
  return hx_plan_memory_fits(ctx, whole, NULL, NULL) ? whole : NULL;
}

static struct hx_plan *finish(struct search *s) {
  struct hx_ctx *ctx = s->ctx;
  struct hx_plan *best = NULL;
  struct hx_plan *cand[FINAL + TOP];
  int ncand = 0;
  /* past the best TOP, finalists while the simulations stay small: at a
   * global batch of 4096 each is some 10^5 tasks */
  int64_t tasks = 0;
  for (int i = 0; i < s->nfinal; i++) {
    tasks += hx_sim_task_bound(ctx, s->final[i]);
    if (i < TOP || tasks <= FINAL_TASKS)
      cand[ncand++] = s->final[i];
  }
  for (int i = 0; i < s->nkept; i++) {
    bool dup = false;
    for (int j = 0; j < ncand; j++)
      dup = dup || cand[j] == s->kept[i];
    if (!dup)
      cand[ncand++] = s->kept[i];
  }
  /* the same choice (least time, ties to the earlier candidate) as
   * simulating all, with simulations pruned by lower bounds */
  struct hx_plan *plans[2 * (FINAL + TOP)];
  int nplans = ncand;
  for (int i = 0; i < ncand; i++) {
    struct hx_plan *p = hx_plan_copy(&ctx->arena, cand[i]);
    hx_sched_build_groups(ctx, &ctx->arena, p);
    p->description = hx_sprintf(&ctx->arena, "dp=%d, %d of %d devices", p->npipelines,
                                hx_plan_used_devices(p), ctx->cluster.ndevices);
    plans[i] = p;
    struct hx_plan *whole = unsharded(ctx, p);
    if (whole)
      plans[nplans++] = whole;
  }
  int best_at = hx_simulate_fastest(ctx, plans, nplans);
  if (best_at >= 0)
    best = plans[best_at];
  /* placements the completions could not compare; not where the exact
   * planner runs, whose space (completions of skeletons) relabelled splits
   * leave, so that it stays a bound on what hexic returns */
  if (best && s->sim_score && ctx->cluster.ndevices > HX_EXHAUSTIVE_MAX_DEVICES)
    best = hx_sched_relabel(ctx, &ctx->arena, best, RELABEL_TRIES);
  /* the faster symmetric baseline (all devices or a subset) is a candidate */
  struct hx_plan *base = hx_sched_baseline_seed(ctx);
  if (base && (!best || base->sim.iteration_s <= best->sim.iteration_s)) {
    best = hx_plan_copy(&ctx->arena, base);
    best->strategy = "symmetric";
  }
  return best;
}

/* The first plan (regardless of the limits), then the exploration of every
 * pool while the limits allow. */
static void explore_pools(struct search *s, const struct pool *pools, int npools) {
  s->first_phase = true;
  for (int i = 0; i < npools && s->ntop == 0; i++)
    first_plan(s, &pools[i]);
  s->first_phase = false;
  for (int i = 0; i < npools && !stopped(s); i++)
    explore_pool(s, &pools[i]);
}

/* Memo keys: a skeleton's is one marker per pipeline and per stage plus its
 * devices; a grouping's the devices plus one. */
static int longest_key(const struct hx_ctx *ctx) { return 3 * ctx->cluster.ndevices + 16; }

struct hx_plan *hx_sched_search(struct hx_ctx *ctx) {
  struct hx_arena scratch;
  hx_arena_init(&scratch);
  struct search s = {.ctx = ctx, .a = &scratch, .tau = hx_sched_tau(&ctx->opt)};
  s.b = budgets_for(ctx->cluster.ndevices);
  s.nsettings = hx_sched_settings(ctx, s.mbs, s.recompute);
  s.pieces = hx_sched_pieces_new(&scratch);
  s.sim_score = ctx->cluster.ndevices <= SIM_SCORE_MAX;
  s.rng.state = 0x4865786953636c65ull; /* fixed: same inputs, same plan */
  s.keybuf = HX_NEW_ARRAY(&scratch, int, longest_key(ctx));
  hx_search_limit_init(&s.limit, &ctx->opt);
  s.progress_start = s.last_progress = hx_search_now_s();
  struct pool *pools = HX_NEW_ARRAY(&scratch, struct pool, s.b.pools);
  int npools = make_pools(&s, pools, s.b.pools);
  explore_pools(&s, pools, npools);
  if (s.ntop == 0) {
    /* nothing fits with TP inside islands: let TP span slower links */
    s.tp_any_link = true;
    explore_pools(&s, pools, npools);
  }
  refine(&s);
  struct recipe *recipes[TOP];
  int nrecipes = 0;
  for (int i = 0; i < s.ntop; i++)
    if (s.top_recipe[i])
      recipes[nrecipes++] = s.top_recipe[i];
  polish_top(&s);
  climb_top(&s);
  for (s.nkept = 0; s.nkept < s.ntop; s.nkept++)
    s.kept[s.nkept] = s.top[s.nkept];
  refine_k(&s, recipes, nrecipes);
  mix_micro_batches(&s);
  struct hx_plan *best = finish(&s);
  hx_arena_free(&s.candidates);
  hx_arena_free(&scratch);
  hx_search_limit_report(&s.limit, "the plan search");
  return best;
}
