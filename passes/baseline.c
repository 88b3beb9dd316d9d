/* baseline: the two symmetric plans hexic's plan is compared with, under the
 * same simulator as every hexic plan. With train.optimizer_sharding = zero1
 * (the default) both run Megatron's distributed optimizer: the optimizer
 * state split in EVEN shards over each data-parallel group.
 *
 * 1. ctx->baseline, what Megatron-LM would run on this cluster — the fastest
 *    symmetric plan (uniform dp, tp, pp and micro-batch size) on EVERY device:
 *  - Megatron runs one world of dp * tp * pp ranks; it has no notion of
 *    leaving slow GPUs out;
 *  - tp never crosses a node and divides both heads and kv_heads;
 *  - pp divides the layers (equal layers per stage);
 *  - the global batch splits exactly into dp pipelines of m micro-batches of
 *    mbs sequences (train.micro_batch fixes mbs; otherwise powers of two);
 *  - recompute = auto tries both with and without full recompute.
 *    On a mixed cluster the slowest GPU of every group sets the pace, which
 *    the simulator models by itself.
 * 2. ctx->baseline_subset, what an engineer who leaves the slow GPUs out
 *    would run: the same rules on a SUBSET of the devices (see "Subsets"
 *    below for which ones and why they are enough). It includes the whole
 *    cluster, so it is never slower than 1. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "passes/cost/cost.h"
#include "ir/plan_util.h"
#include "ir/units.h"
#include "passes/schedule/sched.h"
#include "passes.h"

/* Whether every TP group of consecutive Megatron ranks stays in one node. */
static bool tp_inside_nodes(const struct hx_cluster *c, const int *ranks, int n, int tp) {
  for (int r = 0; r < n; r += tp)
    for (int k = 1; k < tp; k++)
      if (c->devices[ranks[r + k]].node != c->devices[ranks[r]].node)
        return false;
  return true;
}

/* The shape rules that do not depend on the devices. */
static bool shape_divides(const struct hx_ctx *ctx, int dp, int tp, int pp, int64_t mbs) {
  const struct hx_model *m = &ctx->model;
  if (m->heads % tp || m->kv_heads % tp || m->layers % pp)
    return false;
  return ctx->train.global_batch % ((int64_t)dp * mbs) == 0;
}

/* A symmetric plan whose Megatron rank k is device ranks[k] (ranks[0..dp *
 * tp * pp), in rank order); the cluster's other devices are unused. */
static struct hx_plan *symmetric_on(struct hx_ctx *ctx, struct hx_arena *a, const int *ranks,
                                    int dp, int tp, int pp, int64_t mbs, bool recompute) {
  int n = dp * tp * pp;
  if (!shape_divides(ctx, dp, tp, pp, mbs) || !tp_inside_nodes(&ctx->cluster, ranks, n, tp))
    return NULL;
  struct hx_plan *p = hx_plan_new(a, ctx->cluster.ndevices, dp);
  p->strategy = "symmetric";
  p->description = hx_sprintf(a, "dp=%d tp=%d pp=%d mbs=%lld%s", dp, tp, pp, (long long)mbs,
                              recompute ? " recompute=full" : "");
  if (n < ctx->cluster.ndevices)
    p->description =
        hx_sprintf(a, "%s, %d of %d devices", p->description, n, ctx->cluster.ndevices);
  p->schedule = ctx->train.schedule;
  int per_stage = (int)(ctx->model.layers / pp);
  int *group = HX_NEW_ARRAY(a, int, tp);
  for (int d = 0; d < dp; d++) {
    struct hx_pipeline *pl = &p->pipelines[d];
    hx_pipeline_init(a, pl, pp);
    pl->micro_batch_size = mbs;
    pl->micro_batches = ctx->train.global_batch / ((int64_t)dp * mbs);
    for (int s = 0; s < pp; s++) {
      for (int t = 0; t < tp; t++)
        group[t] = ranks[(s * dp + d) * tp + t];
      hx_stage_init(a, &pl->stages[s], group, tp, s * per_stage, (s + 1) * per_stage, recompute);
    }
  }
  hx_plan_fill_devices(a, p, &ctx->model);
  /* Megatron's distributed optimizer (ZeRO-1): the optimizer state split
   * evenly over each data-parallel group, which needs the sync groups */
  if (ctx->train.optimizer_sharding == HX_SHARD_ZERO1 && dp > 1) {
    hx_sched_build_groups_sharded(ctx, a, p, true);
  }
  return p;
}

static const int *all_ranks(struct hx_ctx *ctx) {
  int n = ctx->cluster.ndevices;
  int *ranks = HX_NEW_ARRAY(&ctx->arena, int, n);
  for (int r = 0; r < n; r++)
    ranks[r] = r;
  return ranks;
}

struct hx_plan *hx_symmetric_plan(struct hx_ctx *ctx, int dp, int tp, int pp, int64_t mbs,
                                  bool recompute) {
  if ((int64_t)dp * tp * pp != ctx->cluster.ndevices)
    return NULL;
  return symmetric_on(ctx, &ctx->arena, all_ranks(ctx), dp, tp, pp, mbs, recompute);
}

/* Every (dp, tp, pp, mbs, recompute) over n devices, in a fixed order. */
struct shape {
  int dp, tp, pp;
  int64_t mbs;
  bool recompute;
};

typedef void (*shape_fn)(struct hx_ctx *ctx, const struct shape *sh, void *state);

static void for_each_shape(struct hx_ctx *ctx, int n, bool both_recompute, shape_fn fn,
                           void *state) {
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

/* ---- Subsets ---------------------------------------------------------------
 *
 * Which subsets. In a symmetric plan every stage holds the same layers and
 * every pipeline the same batch, so the slowest device of the plan sets the
 * pace of the stage it is in, and with it of every pipeline (they meet at
 * the gradient sync). For a world of n devices the candidates worth trying
 * are therefore the n FASTEST devices, taken machine by machine (ties by
 * rank, so TP groups of consecutive ranks stay inside machines): replacing a
 * device by a faster one of the same machine shape never slows a stage. What
 * speed alone misses is the links: the n fastest devices may sit on machines
 * joined by a slow network where n slower ones on one machine would not. So
 * the lists are the n fastest devices, for every legal world size n (a
 * product dp * tp * pp of legal factors), of each of these machine sets:
 *  - the whole cluster (every speed threshold is a prefix of its order);
 *  - the machines joined by links of at least b, for every distinct link
 *    bandwidth b (the components of the machine graph; on clusters of more
 *    than MAX_COMPONENT_NODES machines only the whole cluster and single
 *    machines, as the HexiScale search's pools do);
 *  - each single machine, one per distinct machine shape (GPU type, count,
 *    bandwidth, latency: two machines alike give equal plans).
 * The HexiScale search reaches all of these device sets (its pools are the
 * same components and speed cuts, and it may leave devices idle).
 *
 * Bounded time. Each candidate (list, shape) gets a sound lower bound
 * without building a plan: the stage holding the list's slowest device
 * computes m micro-batches of pp-th of the layers, forward and backward, at
 * that device's speed (hx_stage_times without communication, of a
 * middle stage; a real stage only adds to it). Candidates are visited in the
 * order of that bound, and the visit stops at the first bound above the best
 * simulated time; a candidate that fits memory is priced by the simulator's
 * own lower bound before it is simulated. */
enum { MAX_COMPONENT_NODES = 64 };

struct device_list {
  int *ranks; /* the fastest first */
  int n;
};

struct lists {
  struct device_list *items;
  int n, cap;
};

/* Adds the devices of the machines in[] as a list, fastest first. */
static void add_machines(struct hx_ctx *ctx, struct hx_arena *a, struct lists *l, const bool *in) {
  const struct hx_cluster *c = &ctx->cluster;
  int *ranks = HX_NEW_ARRAY(a, int, c->ndevices > 0 ? c->ndevices : 1), n = 0;
  for (int d = 0; d < c->ndevices; d++)
    if (in[c->devices[d].node])
      ranks[n++] = d;
  hx_sched_sort_fastest_first(c, a, ranks, n);
  if (l->n == l->cap) {
    l->cap = l->cap ? 2 * l->cap : 16;
    struct device_list *items = HX_NEW_ARRAY(a, struct device_list, l->cap);
    if (l->n)
      memcpy(items, l->items, sizeof *items * (size_t)l->n);
    l->items = items;
  }
  l->items[l->n++] = (struct device_list){ranks, n};
}

static int find_root(int *parent, int x) {
  while (parent[x] != x)
    x = parent[x] = parent[parent[x]];
  return x;
}

/* The slower direction of the link between two machines. */
static double machine_link(const struct hx_cluster *c, int a, int b) {
  int da = c->nodes[a].first_device, db = c->nodes[b].first_device;
  return fmin(hx_bw(c, da, db), hx_bw(c, db, da));
}

/* The components of the machine graph with the links of at least `bw`, each
 * with more than one machine and fewer than all (those are listed apart). */
static void add_components(struct hx_ctx *ctx, struct hx_arena *a, struct lists *l, double bw) {
  const struct hx_cluster *c = &ctx->cluster;
  int nn = c->nnodes;
  int *parent = HX_NEW_ARRAY(a, int, nn), *size = HX_NEW_ARRAY(a, int, nn);
  bool *in = HX_NEW_ARRAY(a, bool, nn);
  for (int i = 0; i < nn; i++)
    parent[i] = i;
  for (int x = 0; x < nn; x++)
    for (int y = x + 1; y < nn; y++)
      if (machine_link(c, x, y) >= bw)
        parent[find_root(parent, y)] = find_root(parent, x);
  for (int i = 0; i < nn; i++)
    size[find_root(parent, i)]++;
  for (int root = 0; root < nn; root++) {
    if (find_root(parent, root) != root || size[root] <= 1 || size[root] == nn)
      continue;
    for (int i = 0; i < nn; i++)
      in[i] = find_root(parent, i) == root;
    add_machines(ctx, a, l, in);
  }
}

static int cmp_double(const void *x, const void *y) {
  double a = *(const double *)x, b = *(const double *)y;
  return (a > b) - (a < b);
}

/* Whether machine x is one of the single machines listed before it. */
static bool machine_seen(const struct hx_cluster *c, int x) {
  const struct hx_node *nx = &c->nodes[x];
  for (int y = 0; y < x; y++) {
    const struct hx_node *ny = &c->nodes[y];
    if (ny->gpu_type == nx->gpu_type && ny->gpus == nx->gpus && ny->bandwidth == nx->bandwidth &&
        ny->latency == nx->latency)
      return true;
  }
  return false;
}

static void machine_sets(struct hx_ctx *ctx, struct hx_arena *a, struct lists *l) {
  const struct hx_cluster *c = &ctx->cluster;
  int nn = c->nnodes;
  bool *in = HX_NEW_ARRAY(a, bool, nn);
  for (int i = 0; i < nn; i++)
    in[i] = true;
  add_machines(ctx, a, l, in);
  if (nn > 1 && nn <= MAX_COMPONENT_NODES) {
    double *bws = HX_NEW_ARRAY(a, double, nn * nn);
    int nbw = 0;
    for (int x = 0; x < nn; x++)
      for (int y = x + 1; y < nn; y++)
        bws[nbw++] = machine_link(c, x, y);
    qsort(bws, (size_t)nbw, sizeof(double), cmp_double);
    for (int k = 0; k < nbw; k++)
      if (k == 0 || bws[k] != bws[k - 1])
        add_components(ctx, a, l, bws[k]);
  }
  for (int x = 0; nn > 1 && x < nn; x++) {
    if (machine_seen(c, x))
      continue;
    for (int i = 0; i < nn; i++)
      in[i] = i == x;
    add_machines(ctx, a, l, in);
  }
}

/* One candidate: the first n devices of a list, one shape. */
struct candidate {
  double bound;
  int list, index; /* index: enumeration order, for ties */
  struct shape sh;
};

struct candidates {
  struct candidate *items;
  int n, cap;
  struct hx_arena *a;
};

static void push_candidate(struct candidates *cs, struct candidate c) {
  if (cs->n == cs->cap) {
    cs->cap = cs->cap ? 2 * cs->cap : 256;
    struct candidate *items = HX_NEW_ARRAY(cs->a, struct candidate, cs->cap);
    if (cs->n)
      memcpy(items, cs->items, sizeof *items * (size_t)cs->n);
    cs->items = items;
  }
  c.index = cs->n;
  cs->items[cs->n++] = c;
}

/* The first n devices of list l in rank order (Megatron's order). */
static void prefix_in_rank_order(const struct device_list *l, int n, int *out) {
  memcpy(out, l->ranks, sizeof(int) * (size_t)n);
  hx_sched_sort_ranks(out, n);
}

/* The compute alone of the stage that holds the prefix's slowest device
 * (the list's n-th, the prefix being fastest first): its TP group in
 * Megatron's order, a middle stage of pp-th of the layers, m micro-batches. */
static double compute_bound(const struct hx_ctx *ctx, const int *prefix, int slowest,
                            const struct shape *sh) {
  int at = 0;
  while (prefix[at] != slowest)
    at++;
  struct hx_stage st;
  memset(&st, 0, sizeof st);
  st.devices = (int *)&prefix[at / sh->tp * sh->tp];
  st.ndevices = st.tp = sh->tp;
  st.cp = st.hp = 1;
  st.layer_begin = 0;
  st.layer_end = (int)(ctx->model.layers / sh->pp);
  st.recompute = sh->recompute;
  st.leader = st.devices[0];
  struct hx_stage_times t;
  hx_stage_times(ctx, &st, false, false, sh->mbs, false, &t);
  double m = (double)(ctx->train.global_batch / ((int64_t)sh->dp * sh->mbs));
  return m * (t.fwd + t.bwd);
}

struct enumerate_state {
  struct candidates *cs;
  const struct device_list *list;
  int list_index;
  int *prefix;
};

static void add_candidate(struct hx_ctx *ctx, const struct shape *sh, void *state) {
  struct enumerate_state *e = state;
  int n = sh->dp * sh->tp * sh->pp;
  if (!shape_divides(ctx, sh->dp, sh->tp, sh->pp, sh->mbs) ||
      !tp_inside_nodes(&ctx->cluster, e->prefix, n, sh->tp))
    return;
  struct candidate c = {0};
  c.list = e->list_index;
  c.sh = *sh;
  c.bound = compute_bound(ctx, e->prefix, e->list->ranks[n - 1], sh);
  push_candidate(e->cs, c);
}

/* Whether lists[li]'s first n devices are, as a set, some earlier list's
 * first n (the same candidates again). */
static bool prefix_seen(const struct lists *l, int li, int n, const int *sorted, int *buf) {
  for (int k = 0; k < li; k++) {
    if (l->items[k].n < n)
      continue;
    prefix_in_rank_order(&l->items[k], n, buf);
    if (!memcmp(buf, sorted, sizeof(int) * (size_t)n))
      return true;
  }
  return false;
}

static int by_bound(const void *x, const void *y) {
  const struct candidate *a = x, *b = y;
  if (a->bound != b->bound)
    return a->bound < b->bound ? -1 : 1;
  return (a->index > b->index) - (a->index < b->index);
}

/* Whether some dp * tp * pp = n with legal factors: tp divides the heads,
 * pp the layers, dp the global batch. */
static bool world_size(const struct hx_ctx *ctx, int n) {
  for (int tp = 1; tp <= n; tp++)
    for (int pp = 1; n % tp == 0 && pp <= n / tp; pp++)
      if ((n / tp) % pp == 0 && shape_divides(ctx, n / tp / pp, tp, pp, 1))
        return true;
  return false;
}

/* ctx->baseline when the subset candidate (ranks[0..n), shape sh) is that
 * very plan (every device in rank order, the same shape): symmetric_on
 * builds both alike and the baseline was simulated already, so its figures
 * stand for a second simulation, which grows with the batch (0.2 s at
 * 4096 micro-batches on each of 16 pipelines). NULL otherwise. */
static const struct hx_plan *same_as_baseline(const struct hx_ctx *ctx, const int *ranks, int n,
                                              const struct shape *sh) {
  const struct hx_plan *b = ctx->baseline;
  if (!b || !b->sim.valid || n != ctx->cluster.ndevices || b->npipelines != sh->dp)
    return NULL;
  for (int r = 0; r < n; r++)
    if (ranks[r] != r)
      return NULL;
  const struct hx_pipeline *p = &b->pipelines[0];
  if (p->nstages != sh->pp || p->stages[0].tp != sh->tp || p->micro_batch_size != sh->mbs ||
      p->stages[0].recompute != sh->recompute)
    return NULL;
  return b;
}

static struct hx_plan *best_subset(struct hx_ctx *ctx) {
  struct hx_arena scratch;
  hx_arena_init(&scratch);
  struct lists l = {0};
  machine_sets(ctx, &scratch, &l);
  struct candidates cs = {.a = &scratch};
  int nd = ctx->cluster.ndevices;
  int *sorted = HX_NEW_ARRAY(&scratch, int, nd), *buf = HX_NEW_ARRAY(&scratch, int, nd);
  int **prefixes = HX_NEW_ARRAY(&scratch, int *, (int64_t)l.n * (nd + 1));
  for (int li = 0; li < l.n; li++)
    for (int n = 1; n <= l.items[li].n; n++) {
      if (!world_size(ctx, n))
        continue;
      prefix_in_rank_order(&l.items[li], n, sorted);
      if (prefix_seen(&l, li, n, sorted, buf))
        continue;
      int *prefix = HX_NEW_ARRAY(&scratch, int, n);
      memcpy(prefix, sorted, sizeof(int) * (size_t)n);
      prefixes[(int64_t)li * (nd + 1) + n] = prefix;
      struct enumerate_state e = {&cs, &l.items[li], li, prefix};
      for_each_shape(ctx, n, false, add_candidate, &e);
    }
  qsort(cs.items, (size_t)cs.n, sizeof *cs.items, by_bound);
  struct hx_plan *best = NULL;
  for (int k = 0; k < cs.n; k++) {
    const struct candidate *c = &cs.items[k];
    if (best && c->bound > best->sim.iteration_s)
      break; /* this one and every later one cannot beat or tie the best */
    int n = c->sh.dp * c->sh.tp * c->sh.pp;
    struct hx_arena one;
    hx_arena_init(&one);
    struct hx_plan *p = symmetric_on(ctx, &one, prefixes[(int64_t)c->list * (nd + 1) + n], c->sh.dp,
                                     c->sh.tp, c->sh.pp, c->sh.mbs, c->sh.recompute);
    if (p && hx_plan_memory_fits(ctx, p, NULL, NULL) &&
        (!best || hx_sim_lower_bound(ctx, p) <= best->sim.iteration_s)) {
      const struct hx_plan *q = same_as_baseline(ctx, prefixes[(int64_t)c->list * (nd + 1) + n],
                                                 n, &c->sh);
      if (!q) {
        hx_simulate(ctx, p, NULL);
        q = p;
      }
      if (q->sim.valid && (!best || q->sim.iteration_s < best->sim.iteration_s)) {
        best = hx_plan_copy(&ctx->arena, q); /* its strings too: `one` goes */
        best->description = hx_sprintf(&ctx->arena, "%s", q->description);
      }
    }
    hx_arena_free(&one);
  }
  hx_arena_free(&scratch);
  return best;
}

bool hx_pass_baseline(struct hx_ctx *ctx) {
  if (!ctx->has_model || !ctx->has_train || ctx->cluster.ndevices <= 0)
    return true;
  struct fitting f = {0};
  for_each_shape(ctx, ctx->cluster.ndevices, false, try_shape, &f);
  ctx->baseline = fastest(ctx, &f);
  ctx->baseline_subset = best_subset(ctx);
  return true;
}

/* The closest a symmetric shape comes to fitting memory: the smallest over
 * the shapes of their largest overshoot (needed - capacity, <= 0 when the
 * shape fits), on which device and with which shape; rank -1: none built. */
struct shortfall {
  double bytes;
  int rank;
  struct shape sh;
};

/* allowed: the shapes the train block's recompute allows (the planner's);
 * forbidden: the recompute shapes of a train block that says none, for the
 * hint that recompute = full would fit. */
struct shortfalls {
  struct shortfall allowed, forbidden;
};

static bool recompute_allowed(const struct hx_ctx *ctx, bool recompute) {
  enum hx_recompute rc = ctx->train.recompute;
  return rc == HX_RECOMPUTE_AUTO || recompute == (rc == HX_RECOMPUTE_FULL);
}

static void measure_shape(struct hx_ctx *ctx, const struct shape *sh, void *state) {
  struct shortfalls *all = state;
  struct hx_plan *p = hx_symmetric_plan(ctx, sh->dp, sh->tp, sh->pp, sh->mbs, sh->recompute);
  double need;
  int rank;
  if (!p)
    return;
  hx_plan_memory_fits(ctx, p, &need, &rank);
  bool allowed = recompute_allowed(ctx, sh->recompute);
  if (!allowed && !sh->recompute)
    return; /* recompute = full: never short of memory for want of not recomputing */
  struct shortfall *s = allowed ? &all->allowed : &all->forbidden;
  if (need < s->bytes)
    *s = (struct shortfall){need, rank, *sh};
}

static const char *shape_text(struct hx_ctx *ctx, const struct shape *sh) {
  return hx_sprintf(&ctx->arena, "dp=%d tp=%d pp=%d mbs=%lld", sh->dp, sh->tp, sh->pp,
                    (long long)sh->mbs);
}

static const char *device_name(const struct hx_ctx *ctx, int rank) {
  return ctx->cluster.devices[rank].name;
}

/* No plan was found although a shape the train block allows fits memory:
 * whatever stopped the search, it is not memory, so no shortfall is
 * printed (it printed "needs at least -2558.9 MiB more"). */
static void report_fits_yet_no_plan(struct hx_ctx *ctx, const struct shortfall *s) {
  hx_error_plain("no plan was found, yet the symmetric shape %s fits in memory (%s to spare on "
                 "%s): memory is not what stops the planner",
                 shape_text(ctx, &s->sh), hx_bytes_text(&ctx->arena, s->bytes),
                 device_name(ctx, s->rank));
}

/* Only recompute, which the train block forbids, makes a shape fit. */
static void report_needs_recompute(struct hx_ctx *ctx, const struct shortfalls *all) {
  const struct shortfall *a = &all->allowed, *f = &all->forbidden;
  const char *without =
      a->rank < 0 ? ""
                  : hx_sprintf(&ctx->arena, ": needs at least %s more on %s",
                               hx_bytes_text(&ctx->arena, a->bytes), device_name(ctx, a->rank));
  hx_error_plain("no plan fits in memory with recompute = none%s; with recompute = full the "
                 "symmetric shape %s fits (%s to spare on %s): set recompute = full or auto in "
                 "the train block",
                 without, shape_text(ctx, &f->sh), hx_bytes_text(&ctx->arena, f->bytes),
                 device_name(ctx, f->rank));
}

void hx_report_no_plan(struct hx_ctx *ctx) {
  struct shortfalls all = {{INFINITY, -1, {0}}, {INFINITY, -1, {0}}};
  for_each_shape(ctx, ctx->cluster.ndevices, true, measure_shape, &all);
  if (all.allowed.rank >= 0 && all.allowed.bytes <= 0) {
    report_fits_yet_no_plan(ctx, &all.allowed);
    return;
  }
  if (all.forbidden.rank >= 0 && all.forbidden.bytes <= 0) {
    report_needs_recompute(ctx, &all);
    return;
  }
  bool can_recompute = ctx->train.recompute == HX_RECOMPUTE_NONE;
  const char *hint = can_recompute ? "try recompute = full, more devices or GPUs with more memory"
                                   : "try more devices or GPUs with more memory";
  bool forbidden_closer = all.forbidden.bytes < all.allowed.bytes;
  const struct shortfall *s = forbidden_closer ? &all.forbidden : &all.allowed;
  if (s->rank < 0) {
    hx_error_plain("no plan fits the cluster: no symmetric shape divides the model and batch "
                   "(%lld layers, %lld heads, global_batch %lld) over %d devices; %s",
                   (long long)ctx->model.layers, (long long)ctx->model.heads,
                   (long long)ctx->train.global_batch, ctx->cluster.ndevices, hint);
    return;
  }
  hx_error_plain("no plan fits in memory: needs at least %s more on %s%s; %s",
                 hx_bytes_text(&ctx->arena, s->bytes), device_name(ctx, s->rank),
                 forbidden_closer ? " (with recompute = full)" : "", hint);
}
