/* --strategy=exhaustive: the exact planner for clusters of at most 8
 * devices, the test oracle of the HexiScale search.
 *
 * The plan space, and the plan returned: the one of least *simulated*
 * iteration time (hx_simulate) among
 *  - the two symmetric baselines (all devices, best subset), and
 *  - every structure the plan IR expresses with cp = hp = 1: any subset of
 *    the devices used; the used ones in any number of pipelines (any
 *    multiset of device sets); each pipeline's devices in any sequence of
 *    stages (any grouping, any TP degree that divides the query heads, TP
 *    across any link, any order, at most `layers` stages);
 *  - completed, for every (micro-batch size, recompute) setting of
 *    hx_sched_settings, by hx_sched_complete_setting: TP ranks in ascending
 *    device order, leaders by hx_sched_set_leaders, the exact min-max layer
 *    split and the exact batch split; gradient groups by
 *    hx_sched_build_groups.
 * hexic's search completes its skeletons with the same routine, so every
 * plan it can return lies in this space: a hexic plan faster than this one
 * is a bug in one of the two.
 *
 * Symmetry: devices of one machine are interchangeable (same GPU, same
 * links), so a structure is a list of per-machine device counts. Machines
 * that are twins (same GPU type, count and own link, and the same links to
 * every other machine) are interchangeable too: used counts are enumerated
 * non-increasing over twins, and structures are reduced to a canonical form
 * (twin machines and pipelines sorted) and skipped when seen before. Both
 * only drop structures that are relabelings of one kept, whose simulated
 * times are equal.
 *
 * Pruning, sound against the simulator: a structure is skipped when its
 * bound (structure_bound: pipeline i computing n_i of the B sequences takes
 * at least n_i * c_i, c_i its least possible per-sequence bottleneck, and at
 * least W_i + (n_i - 1) * d_i, the fill of one micro-batch through every
 * stage and hop before its last stage computes all n_i; costs are affine in
 * the micro-batch size, so no setting does better; with measured profiles,
 * which need not be, each stage's least over the sizes tried) is no better than the
 * best simulated plan so far; c, W and d are computed once per stage
 * sequence, and whole subtrees of the enumeration are skipped when even
 * their pipelines' best sequences cannot beat it. A completed setting is
 * simulated only when hx_sim_lower_bound is below the best. Two passes: the
 * first finds, per pipeline count, the structures of best bound and
 * simulates them, so the second prunes against a good incumbent from its
 * start. Both bounds are checked against every simulation (an internal
 * error if one is ever above it).
 *
 * Exact unless --search-budget's clock runs out during the second pass
 * (with a warning): then the best plan so far. It counts no evaluations.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "passes/cost/cost.h"
#include "ir/plan_util.h"
#include "sched.h"

enum { MAXN = HX_EXHAUSTIVE_MAX_DEVICES, SEEDS = 8 };

/* Relative slack for comparing a bound with a simulated time: the two sum
 * the same durations in different orders. */
#define BOUND_SLACK 1e-9

/* Devices per machine: a vector over the cluster's nodes. */
struct vec {
  unsigned char c[MAXN];
};

struct seqs {              /* every stage sequence of one pipeline vector */
  int n, cap;
  struct vec *stages;      /* n sequences, each `len[i]` stages at stages[at[i]] */
  int *at, *len;
  int nstage_vecs, cap_vecs;
  double *cost;            /* per sequence: its pipeline's bound c (see
                              pipeline_cost), <= 0 when it never completes */
  double *work, *last;     /* per sequence: W and d of pipeline_cost */
  double best_rate;        /* the largest 1 / cost over the sequences */
};

/* One structure: pipelines (vectors) and the stage sequence of each. */
struct structure {
  int npipes;
  struct vec pipes[MAXN];
  int choice[MAXN];
  double bound;
};

/* Canonical forms already seen (only built when the cluster has twins). */
struct seen_set {
  uint64_t *hash;
  unsigned char **key; /* key[0] = length */
  int cap, n;
};

struct ex {
  struct hx_ctx *ctx;
  struct hx_search_limit limit; /* the clock may cut the second pass short */
  struct hx_arena *a;
  int nnodes;
  struct vec all;
  int twin_of[MAXN];       /* the lowest-numbered twin of each machine */
  bool has_twins;
  struct seqs *memo;
  int nmemo, cap_memo;
  int *memo_at;            /* by vec_index: index into memo, -1 when none */
  struct structure cur;
  /* settings */
  int nsettings;
  int64_t mbs[HX_SCHED_MAX_SETTINGS];
  bool recompute[HX_SCHED_MAX_SETTINGS];
  int64_t largest_mbs;
  /* pass state */
  bool seeding;            /* pass 1: collect seeds; pass 2: price */
  struct structure seeds[MAXN + 1][SEEDS]; /* per pipeline count */
  int nseeds[MAXN + 1];
  struct seen_set seen;
  struct hx_plan *best;    /* in e->a */
  double best_s;
  long structures, simulated;
};

static int vsum(const struct vec *v, int n) {
  int s = 0;
  for (int i = 0; i < n; i++)
    s += v->c[i];
  return s;
}

/* ---- stage sequences of one pipeline --------------------------------------- */

static void seq_push(struct ex *e, struct seqs *q, const struct vec *cur, int len) {
  if (q->n == q->cap) {
    int cap = q->cap ? 2 * q->cap : 64;
    int *at = HX_NEW_ARRAY(e->a, int, cap), *ln = HX_NEW_ARRAY(e->a, int, cap);
    if (q->n) {
      memcpy(at, q->at, sizeof(int) * (size_t)q->n);
      memcpy(ln, q->len, sizeof(int) * (size_t)q->n);
    }
    q->at = at;
    q->len = ln;
    q->cap = cap;
  }
  if (q->nstage_vecs + len > q->cap_vecs) {
    int cap = 2 * (q->cap_vecs + len);
    struct vec *v = HX_NEW_ARRAY(e->a, struct vec, cap);
    if (q->nstage_vecs)
      memcpy(v, q->stages, sizeof(struct vec) * (size_t)q->nstage_vecs);
    q->stages = v;
    q->cap_vecs = cap;
  }
  q->at[q->n] = q->nstage_vecs;
  q->len[q->n++] = len;
  memcpy(q->stages + q->nstage_vecs, cur, sizeof(struct vec) * (size_t)len);
  q->nstage_vecs += len;
}

/* Every non-zero sub-vector `part` of `left` whose size is a legal degree,
 * as the next stage; recursion on the rest. */
static void stage_rec(struct ex *e, struct seqs *q, struct vec *left, struct vec *cur, int len,
                      struct vec *part, int node) {
  if (node == e->nnodes) {
    int t = vsum(part, e->nnodes);
    if (t == 0 || !hx_sched_tp_legal(&e->ctx->model, t) || len >= e->ctx->model.layers)
      return;
    cur[len] = *part;
    for (int i = 0; i < e->nnodes; i++)
      left->c[i] = (unsigned char)(left->c[i] - part->c[i]);
    if (vsum(left, e->nnodes) == 0) {
      seq_push(e, q, cur, len + 1);
    } else {
      struct vec next = {{0}};
      stage_rec(e, q, left, cur, len + 1, &next, 0);
    }
    for (int i = 0; i < e->nnodes; i++)
      left->c[i] = (unsigned char)(left->c[i] + part->c[i]);
    return;
  }
  for (int k = 0; k <= left->c[node]; k++) {
    part->c[node] = (unsigned char)k;
    stage_rec(e, q, left, cur, len, part, node + 1);
  }
  part->c[node] = 0;
}

static void sequence_costs(struct ex *e, struct seqs *q);

/* A pipeline vector's number in mixed radix (machine i has all.c[i] + 1
 * digits): the structures ask for their pipelines' sequences millions of
 * times, so the lookup is an index, not a search. */
static int vec_index(const struct ex *e, const struct vec *v) {
  int at = 0;
  for (int i = 0; i < e->nnodes; i++)
    at = at * (e->all.c[i] + 1) + v->c[i];
  return at;
}

static struct seqs *sequences(struct ex *e, const struct vec *pipe) {
  int *slot = &e->memo_at[vec_index(e, pipe)];
  if (*slot >= 0)
    return &e->memo[*slot];
  *slot = e->nmemo;
  if (e->nmemo == e->cap_memo) {
    int cap = e->cap_memo ? 2 * e->cap_memo : 32;
    struct seqs *m = HX_NEW_ARRAY(e->a, struct seqs, cap);
    if (e->nmemo)
      memcpy(m, e->memo, sizeof(struct seqs) * (size_t)e->nmemo);
    e->memo = m;
    e->cap_memo = cap;
  }
  struct seqs *q = &e->memo[e->nmemo++];
  memset(q, 0, sizeof *q);
  struct vec left = *pipe, part = {{0}}, cur[MAXN];
  stage_rec(e, q, &left, cur, 0, &part, 0);
  sequence_costs(e, q);
  return q;
}

/* ---- twins and canonical forms ---------------------------------------------- */

static bool same_links(const struct hx_cluster *c, int da, int db, int dk) {
  return hx_bw(c, da, dk) == hx_bw(c, db, dk) && hx_bw(c, dk, da) == hx_bw(c, dk, db) &&
         hx_lat(c, da, dk) == hx_lat(c, db, dk) && hx_lat(c, dk, da) == hx_lat(c, dk, db);
}

/* Whether swapping machines a and b maps the cluster onto itself. */
static bool twins(const struct hx_cluster *c, int a, int b) {
  const struct hx_node *na = &c->nodes[a], *nb = &c->nodes[b];
  if (na->gpu_type != nb->gpu_type || na->gpus != nb->gpus || na->bandwidth != nb->bandwidth ||
      na->latency != nb->latency)
    return false;
  int da = na->first_device, db = nb->first_device;
  if (hx_bw(c, da, db) != hx_bw(c, db, da) || hx_lat(c, da, db) != hx_lat(c, db, da))
    return false;
  for (int k = 0; k < c->nnodes; k++)
    if (k != a && k != b && !same_links(c, da, db, c->nodes[k].first_device))
      return false;
  return true;
}

static void find_twins(struct ex *e) {
  const struct hx_cluster *c = &e->ctx->cluster;
  for (int i = 0; i < e->nnodes; i++) {
    e->twin_of[i] = i;
    for (int j = 0; j < i && e->twin_of[i] == i; j++)
      if (e->twin_of[j] == j && twins(c, j, i)) {
        e->twin_of[i] = j;
        e->has_twins = true;
      }
  }
}

/* The stage rows of the current structure, pipeline by pipeline. */
struct rows {
  int nrows, npipes;
  int first[MAXN], len[MAXN]; /* per pipeline: its rows */
  struct vec row[MAXN];
};

static int block_cmp(const struct rows *r, int p, int q, int nn) {
  if (r->len[p] != r->len[q])
    return r->len[p] > r->len[q] ? -1 : 1;
  for (int k = 0; k < r->len[p]; k++) {
    int c = memcmp(r->row[r->first[p] + k].c, r->row[r->first[q] + k].c, (size_t)nn);
    if (c)
      return c > 0 ? -1 : 1;
  }
  return 0;
}

/* Column of machine j compared with column of machine k (descending). */
static int column_cmp(const struct rows *r, int j, int k) {
  for (int i = 0; i < r->nrows; i++)
    if (r->row[i].c[j] != r->row[i].c[k])
      return r->row[i].c[j] > r->row[i].c[k] ? -1 : 1;
  return 0;
}

static void swap_columns(struct rows *r, int j, int k) {
  for (int i = 0; i < r->nrows; i++) {
    unsigned char t = r->row[i].c[j];
    r->row[i].c[j] = r->row[i].c[k];
    r->row[i].c[k] = t;
  }
}

/* Twin machines' columns in descending order (insertion sort within each
 * twin class: a relabeling of twins, so the same plan up to symmetry). */
static void sort_twin_columns(const struct ex *e, struct rows *r) {
  for (int rep = 0; rep < e->nnodes; rep++) {
    if (e->twin_of[rep] != rep)
      continue;
    int m[MAXN], n = 0;
    for (int j = rep; j < e->nnodes; j++)
      if (e->twin_of[j] == rep)
        m[n++] = j;
    for (int i = 1; i < n; i++)
      for (int k = i; k > 0 && column_cmp(r, m[k - 1], m[k]) > 0; k--)
        swap_columns(r, m[k - 1], m[k]);
  }
}

static void sort_pipelines(const struct ex *e, struct rows *r) {
  struct rows out = *r;
  int order[MAXN];
  for (int p = 0; p < r->npipes; p++) {
    int at = p;
    while (at > 0 && block_cmp(r, order[at - 1], p, e->nnodes) > 0) {
      order[at] = order[at - 1];
      at--;
    }
    order[at] = p;
  }
  int n = 0;
  for (int p = 0; p < r->npipes; p++) {
    out.first[p] = n;
    out.len[p] = r->len[order[p]];
    for (int k = 0; k < r->len[order[p]]; k++)
      out.row[n++] = r->row[r->first[order[p]] + k];
  }
  *r = out;
}

/* A canonical key of the current structure: key[0] its length. Sorting twin
 * columns and pipelines alternately is not a perfect canonical form, but
 * every step is a symmetry, so equal keys mean equivalent structures. */
static void canonical_key(struct ex *e, unsigned char *key) {
  struct rows r = {0};
  r.npipes = e->cur.npipes;
  for (int i = 0; i < e->cur.npipes; i++) {
    struct seqs *q = sequences(e, &e->cur.pipes[i]);
    r.first[i] = r.nrows;
    r.len[i] = q->len[e->cur.choice[i]];
    for (int s = 0; s < r.len[i]; s++)
      r.row[r.nrows++] = q->stages[q->at[e->cur.choice[i]] + s];
  }
  for (int round = 0; round < 3; round++) {
    sort_twin_columns(e, &r);
    sort_pipelines(e, &r);
  }
  int n = 1;
  key[n++] = (unsigned char)r.npipes;
  for (int p = 0; p < r.npipes; p++)
    key[n++] = (unsigned char)r.len[p];
  for (int i = 0; i < r.nrows; i++)
    for (int j = 0; j < e->nnodes; j++)
      key[n++] = r.row[i].c[j];
  key[0] = (unsigned char)n;
}

static uint64_t key_hash(const unsigned char *key) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (int i = 0; i < key[0]; i++) {
    h ^= key[i];
    h *= 0x100000001b3ull;
  }
  return h ^ (h >> 31);
}

/* True when key was seen before; records it otherwise. */
static bool seen_before(struct ex *e, const unsigned char *key) {
  struct seen_set *s = &e->seen;
  if (2 * (s->n + 1) > s->cap) {
    int cap = s->cap ? 2 * s->cap : 4096;
    uint64_t *hash = HX_NEW_ARRAY(e->a, uint64_t, cap);
    unsigned char **keys = HX_NEW_ARRAY(e->a, unsigned char *, cap);
    for (int i = 0; i < s->cap; i++) {
      if (!s->key[i])
        continue;
      int at = (int)(s->hash[i] & (uint64_t)(cap - 1));
      while (keys[at])
        at = (at + 1) & (cap - 1);
      keys[at] = s->key[i];
      hash[at] = s->hash[i];
    }
    s->hash = hash;
    s->key = keys;
    s->cap = cap;
  }
  uint64_t h = key_hash(key);
  for (int at = (int)(h & (uint64_t)(s->cap - 1));; at = (at + 1) & (s->cap - 1)) {
    if (!s->key[at]) {
      s->key[at] = HX_NEW_ARRAY(e->a, unsigned char, key[0]);
      memcpy(s->key[at], key, key[0]);
      s->hash[at] = h;
      s->n++;
      return false;
    }
    if (s->hash[at] == h && !memcmp(s->key[at], key, key[0]))
      return true;
  }
}

/* ---- skeletons, bounds, simulation ----------------------------------------- */

/* The skeleton of structure st in arena a: each stage's devices are the
 * lowest unused ones of each machine it spans. */
static struct hx_plan *skeleton(struct ex *e, struct hx_arena *a, const struct structure *st) {
  const struct hx_cluster *c = &e->ctx->cluster;
  struct hx_plan *sk = hx_plan_new(a, c->ndevices, st->npipes);
  sk->strategy = "exhaustive";
  sk->schedule = e->ctx->train.schedule;
  int next[MAXN] = {0}, ranks[MAXN];
  for (int i = 0; i < st->npipes; i++) {
    struct seqs *q = sequences(e, &st->pipes[i]);
    const struct vec *stages = q->stages + q->at[st->choice[i]];
    int ns = q->len[st->choice[i]];
    hx_pipeline_init(a, &sk->pipelines[i], ns);
    for (int s = 0; s < ns; s++) {
      int n = 0;
      for (int node = 0; node < e->nnodes; node++)
        for (int k = 0; k < stages[s].c[node]; k++)
          ranks[n++] = c->nodes[node].first_device + next[node]++;
      hx_stage_init(a, &sk->pipelines[i].stages[s], ranks, n, 0, 0, false);
    }
  }
  return sk;
}

/* Forward + backward seconds per sequence of stage s holding n layers at
 * micro-batch size mbs, without recompute. */
static double per_sequence_at(const struct ex *e, struct hx_stage st, bool first, bool last, int n,
                              int64_t mbs) {
  st.layer_begin = 0;
  st.layer_end = n;
  st.recompute = false;
  return (hx_stage_fwd_s(e->ctx, &st, first, last, mbs) +
          hx_stage_bwd_s(e->ctx, &st, first, last, mbs)) /
         (double)mbs;
}

/* The least a stage costs per sequence in any setting, as extra (with no
 * layer) + per_layer x layers. The FLOP model's micro-batch costs are
 * affine in the size with intercepts >= 0, so the largest size costs least
 * per sequence. Measured profiles (issue 18) need not be: then each part
 * is its least over every size the settings try, a lower bound on every
 * setting's cost for any number of layers. */
static void least_per_sequence(const struct ex *e, struct hx_stage st, bool first, bool last,
                               double *extra, double *per_layer) {
  int64_t only = e->largest_mbs;
  bool profiled = e->ctx->cluster.nprofiles > 0;
  *extra = *per_layer = INFINITY;
  for (int k = 0; k < (profiled ? e->nsettings : 1); k++) {
    int64_t mbs = profiled ? e->mbs[k] : only;
    double t0 = per_sequence_at(e, st, first, last, 0, mbs);
    *extra = fmin(*extra, t0);
    *per_layer = fmin(*per_layer, per_sequence_at(e, st, first, last, 1, mbs) - t0);
  }
}

/* The cheapest hop from stage a to stage b at one sequence, over every
 * choice of the two leaders (hx_sched_set_leaders picks some pair). */
static double least_hop_s(const struct ex *e, struct hx_stage *a, struct hx_stage *b) {
  double best = INFINITY;
  int la = a->leader, lb = b->leader;
  for (int i = 0; i < a->ndevices; i++)
    for (int j = 0; j < b->ndevices; j++) {
      a->leader = a->devices[i];
      b->leader = b->devices[j];
      best = fmin(best, hx_hop_s(e->ctx, a, b, 1));
    }
  a->leader = la;
  b->leader = lb;
  return best;
}

/* The bounds of one stage sequence, from per-sequence stage costs p_s (at
 * the largest micro-batch size, no recompute: the least any setting costs
 * per sequence) with every stage holding at least one layer:
 *   c  the least possible bottleneck max_s p_s (the exact min-max layer
 *      split, no memory limits), -1 when the split fails;
 *   W  the least possible sum_s p_s plus both ways of every hop (one
 *      micro-batch passes every stage and link; a hop at one sequence, with
 *      the cheapest leaders, is the least any micro-batch size costs);
 *   d  the least possible p of the last stage.
 * The devices are the lowest of each machine: machine-mates cost the same,
 * so these depend on the sequence alone and are computed once per sequence,
 * not per structure. */
static double pipeline_cost(struct ex *e, struct hx_arena *a, const struct vec *stages, int ns,
                            double *work, double *last) {
  const struct hx_cluster *c = &e->ctx->cluster;
  int L = (int)e->ctx->model.layers;
  struct hx_stage_cost cost[MAXN];
  int counts[MAXN], next[MAXN] = {0}, ranks[MAXN];
  double least_per_layer = INFINITY;
  struct hx_stage sts[MAXN];
  *work = 0;
  for (int s = 0; s < ns; s++) {
    int n = 0;
    for (int node = 0; node < e->nnodes; node++)
      for (int k = 0; k < stages[s].c[node]; k++)
        ranks[n++] = c->nodes[node].first_device + next[node]++;
    struct hx_stage st;
    hx_stage_init(a, &st, ranks, n, 0, 0, false);
    sts[s] = st;
    if (s > 0)
      *work += 2 * least_hop_s(e, &sts[s - 1], &sts[s]);
    bool first = s == 0, last_stage = s == ns - 1;
    least_per_sequence(e, st, first, last_stage, &cost[s].extra, &cost[s].per_layer);
    cost[s].max_layers = L;
    *work += cost[s].extra + cost[s].per_layer;
    least_per_layer = fmin(least_per_layer, cost[s].per_layer);
  }
  /* the layers beyond one per stage go where they cost least; affine costs
   * take their least at an end of the range */
  int spare = L - ns;
  *work += spare > 0 ? fmin(0, least_per_layer * spare) + fmax(0, least_per_layer) * spare : 0;
  const struct hx_stage_cost *z = &cost[ns - 1];
  *last = fmin(z->extra + z->per_layer, z->extra + z->per_layer * (spare > 0 ? spare + 1 : 1));
  return hx_sched_split_layers(cost, ns, L, counts);
}

static void sequence_costs(struct ex *e, struct seqs *q) {
  struct hx_arena tmp;
  hx_arena_init(&tmp);
  int n = q->n > 0 ? q->n : 1;
  q->cost = HX_NEW_ARRAY(e->a, double, n);
  q->work = HX_NEW_ARRAY(e->a, double, n);
  q->last = HX_NEW_ARRAY(e->a, double, n);
  q->best_rate = 0;
  for (int k = 0; k < q->n; k++) {
    q->cost[k] = pipeline_cost(e, &tmp, q->stages + q->at[k], q->len[k], &q->work[k], &q->last[k]);
    if (q->cost[k] > 0 && 1.0 / q->cost[k] > q->best_rate)
      q->best_rate = 1.0 / q->cost[k];
  }
  hx_arena_free(&tmp);
}

/* Sequences pipeline i can take within T seconds: n with n * c <= T (its
 * busiest stage computes all of them) and W + (n - 1) * d <= T (its last
 * stage starts after one micro-batch passed the others, then computes all);
 * 0 when not even one fits. */
static double capacity(double T, double c, double W, double d) {
  if (T < c || T < W)
    return 0;
  double n = T / c;
  if (d > 0)
    n = fmin(n, (T - W) / d + 1);
  return n;
}

/* A lower bound on every setting's simulated time. Pipeline i computing n_i
 * sequences (sum_i n_i = B, n_i >= 1) takes at least n_i * c_i (the busiest
 * stage) and W_i + (n_i - 1) * d_i (micro-batches of b >= 1 sequences:
 * the last stage starts after the first micro-batch went through the
 * others, costing at least W_i - d_i, then computes all n_i; the micro-batch
 * costs are affine in b with intercepts >= 0, so b sequences cost at least b
 * times the per-sequence cost at the largest size). The least T at which the
 * pipelines can take all B sequences is found by bisection; the infeasible
 * end is returned. Without the fill term this is B / sum_i(1 / c_i), which
 * starts the bracket (and decides alone when it already prunes). */
static double structure_bound(struct ex *e, const struct structure *st) {
  double B = (double)e->ctx->train.global_batch, rate = 0, lo = 0, hi = 0;
  double c[MAXN], W[MAXN], d[MAXN];
  for (int i = 0; i < st->npipes; i++) {
    struct seqs *q = sequences(e, &st->pipes[i]);
    int k = st->choice[i];
    c[i] = q->cost[k];
    if (c[i] <= 0)
      return INFINITY; /* more stages than layers: never completes */
    W[i] = q->work[k];
    d[i] = q->last[k];
    rate += 1.0 / c[i];
    lo = fmax(lo, fmax(c[i], W[i]));
    hi = fmax(hi, fmax(B * c[i], W[i] + (B - 1) * d[i]));
  }
  lo = fmax(lo, B / rate);
  if (lo * (1 - BOUND_SLACK) >= e->best_s && !e->seeding)
    return lo;
  for (int iter = 0; iter < 48 && hi > lo * (1 + 1e-12); iter++) {
    double mid = 0.5 * (lo + hi), n = 0;
    for (int i = 0; i < st->npipes; i++)
      n += capacity(mid, c[i], W[i], d[i]);
    if (n >= B)
      hi = mid;
    else
      lo = mid;
  }
  return lo;
}

static void check_bound(const char *what, double bound, double simulated) {
  if (simulated < bound * (1 - BOUND_SLACK))
    hx_internal_error("exhaustive planner: the %s lower bound %.9g s is above the simulated "
                      "%.9g s",
                      what, bound, simulated);
}

/* Every setting of the structure: completed, bounded, simulated when the
 * bound leaves it a chance; the best kept in e->a. */
static void price(struct ex *e, const struct structure *st) {
  struct hx_ctx *ctx = e->ctx;
  struct hx_arena tmp; /* per structure, so memory stays flat */
  hx_arena_init(&tmp);
  struct hx_plan *sk = skeleton(e, &tmp, st);
  for (int k = 0; k < e->nsettings; k++) {
    struct hx_plan *p = hx_sched_complete_setting(ctx, &tmp, sk, e->mbs[k], e->recompute[k]);
    if (!p)
      continue;
    /* the groups first: the bound prices their gradient sync and ZeRO-1's
     * shards (shard_ppm), which shorten the optimizer step */
    hx_sched_build_groups(ctx, &tmp, p);
    /* the quick bound first: never above the full one, so what it rules
     * out the full one would too, at a fraction of the cost */
    if (hx_sim_quick_bound(ctx, p) * (1 - BOUND_SLACK) >= e->best_s)
      continue;
    double bound = hx_sim_lower_bound(ctx, p);
    if (bound * (1 - BOUND_SLACK) >= e->best_s)
      continue;
    /* long pipelines' steady states extrapolated, as the search prices its
     * candidates (the winner is simulated step by step below) */
    struct hx_sim_options o = {.steady_all = true};
    hx_simulate(ctx, p, &o);
    e->simulated++;
    if (!p->sim.valid)
      continue;
    check_bound("plan", bound, p->sim.iteration_s);
    check_bound("structure", st->bound, p->sim.iteration_s);
    if (p->sim.iteration_s < e->best_s) {
      e->best_s = p->sim.iteration_s;
      e->best = hx_plan_copy(e->a, p);
    }
  }
  hx_arena_free(&tmp);
}

/* Pass 1 keeps, for each pipeline count, the SEEDS structures of least bound
 * (ties: the first). Per count, because the bound ignores the gradient sync:
 * the least bounds overall are many-pipeline plans that a slow network makes
 * slow, and a good incumbent early is what lets pass 2 prune. */
static void keep_seed(struct ex *e) {
  struct structure *seeds = e->seeds[e->cur.npipes];
  int *nseeds = &e->nseeds[e->cur.npipes];
  int at = *nseeds;
  while (at > 0 && e->cur.bound < seeds[at - 1].bound)
    at--;
  if (at >= SEEDS)
    return;
  int last = *nseeds < SEEDS ? *nseeds : SEEDS - 1;
  for (int i = last; i > at; i--)
    seeds[i] = seeds[i - 1];
  seeds[at] = e->cur;
  if (*nseeds < SEEDS)
    (*nseeds)++;
}

static void visit_structure(struct ex *e) {
  if (e->has_twins) {
    unsigned char key[2 + MAXN + MAXN * MAXN];
    canonical_key(e, key);
    if (seen_before(e, key))
      return;
  }
  e->structures++;
  e->cur.bound = structure_bound(e, &e->cur);
  if (e->seeding)
    keep_seed(e);
  else if (e->cur.bound * (1 - BOUND_SLACK) < e->best_s && !hx_search_limit_stop(&e->limit))
    price(e, &e->cur); /* cut short by the clock: the best so far, not the optimum */
}

/* Whether no structure completing the current one from pipeline i on can
 * be kept: pipelines 0..i-1 run at `rate` sequences per second at best, the
 * others at most at their best sequence's rate, so every completion's bound
 * is at least B / (rate + their best rates). Nothing is skipped that
 * visit_structure would keep (the factor 2 * BOUND_SLACK covers the other
 * order of summation), so the result is the same, only found sooner. */
static bool subtree_hopeless(struct ex *e, int i, double rate) {
  for (int j = i; j < e->cur.npipes; j++)
    rate += sequences(e, &e->cur.pipes[j])->best_rate;
  double bound = (double)e->ctx->train.global_batch / rate * (1 - 2 * BOUND_SLACK);
  if (e->seeding)
    return e->nseeds[e->cur.npipes] == SEEDS &&
           bound >= e->seeds[e->cur.npipes][SEEDS - 1].bound;
  return bound >= e->best_s;
}

/* Every combination of stage sequences of the chosen pipelines; equal
 * pipeline vectors take non-decreasing sequence indices (the pipelines of
 * a plan are a multiset). `rate`: the sum of 1 / c of pipelines 0..i-1. */
static void choose_sequences(struct ex *e, int i, double rate) {
  if (i == e->cur.npipes) {
    visit_structure(e);
    return;
  }
  if (subtree_hopeless(e, i, rate))
    return;
  struct seqs *q = sequences(e, &e->cur.pipes[i]);
  int from = 0;
  if (i > 0 && !memcmp(&e->cur.pipes[i], &e->cur.pipes[i - 1], sizeof(struct vec)))
    from = e->cur.choice[i - 1];
  for (int k = from; k < q->n; k++) {
    e->cur.choice[i] = k;
    /* a sequence that never completes bounds nothing below: no pruning */
    choose_sequences(e, i + 1, q->cost[k] > 0 ? rate + 1.0 / q->cost[k] : INFINITY);
  }
}

/* ---- pipelines: multiset partitions of the used devices -------------------- */

static int vcmp(const struct vec *a, const struct vec *b, int n) {
  for (int i = 0; i < n; i++)
    if (a->c[i] != b->c[i])
      return a->c[i] < b->c[i] ? -1 : 1;
  return 0;
}

/* Splits `left` into pipelines in non-increasing order (each vector <= the
 * previous one), so each multiset of pipelines is seen once. */
static void pipe_rec(struct ex *e, struct vec *left, struct vec *part, int node) {
  if (node == e->nnodes) {
    if (vsum(part, e->nnodes) == 0)
      return;
    if (e->cur.npipes > 0 && vcmp(part, &e->cur.pipes[e->cur.npipes - 1], e->nnodes) > 0)
      return;
    if (e->cur.npipes >= e->ctx->train.global_batch)
      return;
    e->cur.pipes[e->cur.npipes++] = *part;
    for (int i = 0; i < e->nnodes; i++)
      left->c[i] = (unsigned char)(left->c[i] - part->c[i]);
    if (vsum(left, e->nnodes) == 0) {
      choose_sequences(e, 0, 0);
    } else {
      struct vec next = {{0}};
      pipe_rec(e, left, &next, 0);
    }
    for (int i = 0; i < e->nnodes; i++)
      left->c[i] = (unsigned char)(left->c[i] + part->c[i]);
    e->cur.npipes--;
    return;
  }
  for (int k = left->c[node]; k >= 0; k--) {
    part->c[node] = (unsigned char)k;
    pipe_rec(e, left, part, node + 1);
  }
  part->c[node] = 0;
}

/* The nearest lower-numbered twin of machine `node`, or -1. */
static int previous_twin(const struct ex *e, int node) {
  for (int j = node - 1; j >= 0; j--)
    if (e->twin_of[j] == e->twin_of[node])
      return j;
  return -1;
}

/* Every used subset (per-machine counts, non-increasing over twins), then
 * its pipelines. */
static void used_rec(struct ex *e, struct vec *used, int node) {
  if (node == e->nnodes) {
    if (vsum(used, e->nnodes) == 0)
      return;
    struct vec left = *used, part = {{0}};
    pipe_rec(e, &left, &part, 0);
    return;
  }
  int twin = previous_twin(e, node);
  int most = twin >= 0 ? used->c[twin] : e->all.c[node];
  for (int k = most; k >= 0; k--) {
    used->c[node] = (unsigned char)k;
    used_rec(e, used, node + 1);
  }
}

static void enumerate(struct ex *e) {
  e->seen = (struct seen_set){0};
  e->structures = 0;
  struct vec used = {{0}};
  used_rec(e, &used, 0);
}

struct hx_plan *hx_sched_exhaustive(struct hx_ctx *ctx) {
  const struct hx_cluster *c = &ctx->cluster;
  if (c->ndevices > MAXN || c->nnodes > MAXN)
    return NULL;
  struct hx_arena scratch;
  hx_arena_init(&scratch);
  struct ex *e = HX_NEW(&scratch, struct ex);
  e->ctx = ctx;
  hx_search_limit_init(&e->limit, &ctx->opt);
  e->a = &scratch;
  e->nnodes = c->nnodes;
  e->best_s = INFINITY;
  int nvecs = 1;
  for (int i = 0; i < c->nnodes; i++) {
    e->all.c[i] = (unsigned char)c->nodes[i].gpus;
    nvecs *= c->nodes[i].gpus + 1;
  }
  e->memo_at = HX_NEW_ARRAY(&scratch, int, nvecs);
  for (int i = 0; i < nvecs; i++)
    e->memo_at[i] = -1;
  find_twins(e);
  e->nsettings = hx_sched_settings(ctx, e->mbs, e->recompute);
  for (int k = 0; k < e->nsettings; k++)
    if (e->mbs[k] > e->largest_mbs)
      e->largest_mbs = e->mbs[k];
  struct hx_plan *base = hx_sched_baseline_seed(ctx); /* both symmetric baselines */
  if (base)
    e->best_s = base->sim.iteration_s;
  if (e->nsettings > 0) {
    e->seeding = true;
    enumerate(e);
    for (int np = 1; np <= MAXN; np++)
      for (int i = 0; i < e->nseeds[np]; i++)
        price(e, &e->seeds[np][i]);
    e->seeding = false;
    enumerate(e);
  }
  struct hx_plan *best = NULL;
  if (e->best) {
    best = hx_plan_copy(&ctx->arena, e->best);
    hx_sched_build_groups(ctx, &ctx->arena, best);
    best->description = hx_sprintf(&ctx->arena, "dp=%d, %ld structures, %ld simulated",
                                   best->npipelines, e->structures, e->simulated);
    hx_simulate(ctx, best, NULL);
  } else if (base) {
    best = hx_plan_copy(&ctx->arena, base);
    best->strategy = "symmetric";
  }
  hx_search_limit_report(&e->limit, "the exhaustive search");
  hx_arena_free(&scratch);
  return best;
}
