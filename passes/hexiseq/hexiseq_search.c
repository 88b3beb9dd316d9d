/* The HexiSeq scheduler's stages 1-3 on one pipeline stage: METIS groups,
 * capability splits, coordinate descent (see hexiseq.h). */
#include <math.h>
#include <string.h>

#include "passes/cost/cost.h"
#include "hexiseq.h"
#include "passes/schedule/sched.h"

/* ---- stage 1: all-to-all groups along fast links ------------------------ */

enum { METIS_SEED = 7 };

/* Bandwidth between units u and v: their first devices (TP rank 0), the
 * faster direction, so the matrix is symmetric as METIS needs. */
static double *unit_bandwidths(struct hx_arena *a, const struct hx_ctx *ctx, const int *ranks,
                               int tp, int units) {
  double *bw = HX_NEW_ARRAY(a, double, (long)units * units);
  for (int u = 0; u < units; u++)
    for (int v = 0; v < units; v++)
      if (u != v) {
        int du = ranks[u * tp], dv = ranks[v * tp];
        bw[(long)u * units + v] = fmax(hx_bw(&ctx->cluster, du, dv), hx_bw(&ctx->cluster, dv, du));
      }
  return bw;
}

/* The complete graph over the units for hx_sched_partition, edges the
 * bandwidth scaled linearly into [1, 1e6] so METIS keeps the fast links
 * inside groups; vertex weights equal (groups of equal size) or, with
 * flops, each unit's compute (groups of equal compute). */
static struct hx_sched_graph *unit_graph(struct hx_arena *a, const double *bw, const double *flops,
                                         int units) {
  struct hx_sched_graph *g = HX_NEW(a, struct hx_sched_graph);
  long nedges = (long)units * (units - 1);
  g->nvertices = units;
  g->xadj = HX_NEW_ARRAY(a, int64_t, units + 1);
  g->adjncy = HX_NEW_ARRAY(a, int64_t, nedges);
  g->adjwgt = HX_NEW_ARRAY(a, int64_t, nedges);
  g->vwgt = HX_NEW_ARRAY(a, int64_t, units);
  double top = 0, strongest = 0;
  for (long i = 0; i < (long)units * units; i++)
    top = fmax(top, bw[i]);
  for (int u = 0; flops && u < units; u++)
    strongest = fmax(strongest, flops[u]);
  int64_t e = 0;
  for (int u = 0; u < units; u++) {
    /* 1000 for the strongest unit: resolution enough, far from overflow */
    int64_t vw = flops ? (int64_t)llround(1000.0 * flops[u] / strongest) : 1;
    g->vwgt[u] = vw < 1 ? 1 : vw;
    g->xadj[u] = e;
    for (int v = 0; v < units; v++) {
      if (u == v)
        continue;
      double w = top > 0 ? bw[(long)u * units + v] / top * 1e6 : 1;
      g->adjncy[e] = v;
      g->adjwgt[e++] = w < 1 ? 1 : (int64_t)w;
    }
  }
  g->xadj[units] = e;
  return g;
}

/* Each unit's compute: its slowest device's FLOP/s (a TP group's pace). */
static double *unit_compute(struct hx_arena *a, const struct hx_ctx *ctx, const int *ranks, int tp,
                            int units) {
  double *flops = HX_NEW_ARRAY(a, double, units);
  for (int u = 0; u < units; u++) {
    flops[u] = INFINITY;
    for (int k = 0; k < tp; k++)
      flops[u] = fmin(flops[u], hx_device_flops(&ctx->cluster, ranks[u * tp + k]));
  }
  return flops;
}

/* link[u * ngroups + g]: unit u's summed bandwidth to the units of group g
 * (itself excluded). */
static double *group_links(struct hx_arena *a, const double *bw, int units, int ngroups,
                           const int *group_of) {
  double *link = HX_NEW_ARRAY(a, double, (long)units * ngroups);
  for (int u = 0; u < units; u++)
    for (int v = 0; v < units; v++)
      link[(long)u * ngroups + group_of[v]] += bw[(long)u * units + v];
  return link;
}

/* The unit of a largest group whose move into group `to` keeps the most
 * bandwidth inside groups: most bandwidth to `to`'s units minus to the
 * units it leaves; ties to the lower unit. */
static int unit_to_move(const double *link, const int *size, int units, int ngroups,
                        const int *group_of, int to) {
  int most = 0, pick = -1;
  double pick_gain = 0;
  for (int g = 0; g < ngroups; g++)
    most = size[g] > most ? size[g] : most;
  for (int u = 0; u < units; u++) {
    int from = group_of[u];
    if (size[from] != most)
      continue;
    double gain = link[(long)u * ngroups + to] - link[(long)u * ngroups + from];
    if (pick < 0 || gain > pick_gain) {
      pick = u;
      pick_gain = gain;
    }
  }
  return pick;
}

/* METIS balances only approximately and on small graphs leaves groups empty
 * (8 units into 4 groups: two groups of 4); refilling those one unit at a
 * time gives groups of 3, 1, 3, 1, and a stage's lockstep pays for its
 * largest all-to-all group. So units move from the largest groups to the
 * smallest (lowest index first) until sizes differ by at most one, each
 * move the unit that keeps the most bandwidth inside groups: a too-large
 * island is split along its fast links. */
static void balance_groups(struct hx_arena *a, const double *bw, int units, int ngroups,
                           int *group_of) {
  int *size = HX_NEW_ARRAY(a, int, ngroups);
  for (int u = 0; u < units; u++)
    size[group_of[u]]++;
  double *link = group_links(a, bw, units, ngroups, group_of);
  for (;;) {
    int small = 0, large = 0;
    for (int g = 1; g < ngroups; g++) {
      small = size[g] < size[small] ? g : small;
      large = size[g] > size[large] ? g : large;
    }
    if (size[large] - size[small] <= 1)
      return;
    int u = unit_to_move(link, size, units, ngroups, group_of, small);
    int from = group_of[u];
    for (int v = 0; v < units; v++) {
      link[(long)v * ngroups + from] -= bw[(long)v * units + u];
      link[(long)v * ngroups + small] += bw[(long)v * units + u];
    }
    size[from]--;
    size[small]++;
    group_of[u] = small;
  }
}

void hx_seq_partition(struct hx_arena *a, const struct hx_ctx *ctx, const int *ranks, int tp,
                      int units, int ngroups, int *group_of, int *by_compute_of) {
  if (ngroups <= 1 || ngroups >= units) {
    for (int u = 0; u < units; u++)
      group_of[u] = by_compute_of[u] = ngroups <= 1 ? 0 : u;
    return;
  }
  double *bw = unit_bandwidths(a, ctx, ranks, tp, units);
  hx_sched_partition(a, unit_graph(a, bw, NULL, units), ngroups, NULL, METIS_SEED, group_of);
  balance_groups(a, bw, units, ngroups, group_of);
  double *flops = unit_compute(a, ctx, ranks, tp, units);
  hx_sched_partition(a, unit_graph(a, bw, flops, units), ngroups, NULL, METIS_SEED,
                     by_compute_of);
}

/* ---- stage 2: capability splits ----------------------------------------- */

/* Largest remainder: out[i] ~ total * w[i] / sum(w), summing to total, ties
 * to the lower index. */
static void apportion(const double *w, int n, int64_t total, int64_t *out, struct hx_arena *a) {
  double sum = 0;
  for (int i = 0; i < n; i++)
    sum += w[i];
  double *rem = HX_NEW_ARRAY(a, double, n);
  int64_t given = 0;
  for (int i = 0; i < n; i++) {
    double exact = sum > 0 ? (double)total * w[i] / sum : (double)total / n;
    out[i] = (int64_t)floor(exact);
    rem[i] = exact - (double)out[i];
    given += out[i];
  }
  for (; given < total; given++) {
    int best = 0;
    for (int i = 1; i < n; i++)
      if (rem[i] > rem[best])
        best = i;
    out[best]++;
    rem[best] = -1;
  }
}

/* Water-filling: tokens ~ w under per-unit caps (when the caps allow). */
static void capped_apportion(const double *w, const int64_t *cap, int n, int64_t total,
                             int64_t *out, struct hx_arena *a) {
  int64_t room = 0;
  for (int i = 0; i < n; i++)
    room += cap[i];
  if (room < total) {
    apportion(w, n, total, out, a);
    return;
  }
  double *live = HX_NEW_ARRAY(a, double, n);
  memcpy(live, w, sizeof *w * (size_t)n);
  for (bool again = true; again;) {
    again = false;
    int64_t fixed = 0;
    for (int i = 0; i < n; i++)
      fixed += live[i] == 0 && w[i] > 0 ? cap[i] : 0;
    apportion(live, n, total - fixed, out, a);
    for (int i = 0; i < n; i++) {
      if (live[i] == 0 && w[i] > 0)
        out[i] = cap[i];
      else if (out[i] > cap[i]) {
        live[i] = 0;
        again = true;
      }
    }
  }
}

/* Heads by compute inside every group. */
static void split_heads(struct hx_arena *a, const struct hx_ctx *ctx, struct hx_seq_layout *l) {
  int64_t share = ctx->model.heads / l->tp;
  int64_t *out = HX_NEW_ARRAY(a, int64_t, l->nunits);
  double *w = HX_NEW_ARRAY(a, double, l->nunits);
  for (int g = 0; g < l->ngroups; g++) {
    int first = l->group_start[g], n = l->group_start[g + 1] - first;
    for (int k = 0; k < n; k++)
      w[k] = l->unit_flops[l->order[first + k]];
    apportion(w, n, share, out, a);
    for (int k = 0; k < n; k++)
      l->heads[l->order[first + k]] = (int)out[k];
  }
}

/* Tokens per group by the rule's weight, then by compute inside groups. */
static void split_tokens_by_groups(struct hx_arena *a, const struct hx_ctx *ctx,
                                   struct hx_seq_layout *l, bool sqrt_rule) {
  double *gw = HX_NEW_ARRAY(a, double, l->ngroups), *w = HX_NEW_ARRAY(a, double, l->nunits);
  int64_t *gt = HX_NEW_ARRAY(a, int64_t, l->ngroups), *out = HX_NEW_ARRAY(a, int64_t, l->nunits);
  for (int u = 0; u < l->nunits; u++)
    gw[l->group_of[u]] += l->unit_flops[u];
  for (int g = 0; sqrt_rule && g < l->ngroups; g++)
    gw[g] = sqrt(gw[g]);
  apportion(gw, l->ngroups, ctx->model.seq_len, gt, a);
  for (int g = 0; g < l->ngroups; g++) {
    int first = l->group_start[g], n = l->group_start[g + 1] - first;
    for (int k = 0; k < n; k++)
      w[k] = l->unit_flops[l->order[first + k]];
    apportion(w, n, gt[g], out, a);
    for (int k = 0; k < n; k++)
      l->tokens[l->order[first + k]] = out[k];
  }
}

/* Tokens by compute over all units, capped by what each unit's memory holds. */
static void split_tokens_capped(struct hx_arena *a, const struct hx_ctx *ctx,
                                const struct hx_stage *st, struct hx_seq_layout *l, bool first,
                                bool last, int64_t mbs, int64_t in_flight) {
  int64_t *cap = HX_NEW_ARRAY(a, int64_t, l->nunits), *out = HX_NEW_ARRAY(a, int64_t, l->nunits);
  struct hx_stage tmp = *st;
  tmp.seq_layout = l;
  for (int u = 0; u < l->nunits; u++)
    cap[u] = hx_seq_unit_token_capacity(ctx, &tmp, u, first, last, mbs, in_flight);
  capped_apportion(l->unit_flops, cap, l->nunits, ctx->model.seq_len, out, a);
  memcpy(l->tokens, out, sizeof *out * (size_t)l->nunits);
}

struct hx_seq_layout *hx_seq_rule_layout(struct hx_arena *a, const struct hx_ctx *ctx,
                                         const struct hx_stage *st, const int *group_of,
                                         int ngroups, enum hx_seq_rule rule, bool first, bool last,
                                         int64_t mbs, int64_t in_flight) {
  struct hx_seq_layout *l =
      hx_seq_layout_grouped(a, st->tp, st->ndevices / st->tp, ngroups, group_of);
  hx_seq_layout_links(ctx, st->devices, l);
  split_heads(a, ctx, l);
  split_tokens_by_groups(a, ctx, l, rule == HX_SPLIT_SQRT);
  hx_seq_zigzag(l);
  if (rule == HX_SPLIT_MEMORY) {
    split_tokens_capped(a, ctx, st, l, first, last, mbs, in_flight);
    hx_seq_zigzag(l);
  }
  return l;
}

/* ---- stage 3: coordinate descent ---------------------------------------- */

struct move {
  int from, to;
  int64_t front, back; /* tokens moved from each chunk; 0, 0: one head */
};

static void apply(struct hx_seq_layout *l, struct move m, int sign) {
  int from = sign > 0 ? m.from : m.to, to = sign > 0 ? m.to : m.from;
  if (m.front == 0 && m.back == 0) {
    l->heads[from]--;
    l->heads[to]++;
    return;
  }
  l->first[from] -= m.front;
  l->first[to] += m.front;
  l->tokens[from] -= m.front + m.back;
  l->tokens[to] += m.front + m.back;
}

static bool legal(const struct hx_seq_layout *l, struct move m) {
  if (m.from == m.to)
    return false;
  if (m.front == 0 && m.back == 0)
    return l->heads[m.from] > 0 && l->group_of[m.from] == l->group_of[m.to];
  return l->first[m.from] >= m.front && l->tokens[m.from] - l->first[m.from] >= m.back &&
         l->tokens[m.from] - m.front - m.back >= 1;
}

struct descent {
  const struct hx_ctx *ctx;
  struct hx_stage *st;
  struct hx_seq_layout *l;
  bool first, last;
  int64_t mbs, in_flight;
  double best;      /* stage time of the current layout */
  struct move pick; /* the best move of this round */
  double pick_s;
};

static void try_move(struct descent *d, struct move m) {
  if (!legal(d->l, m))
    return;
  apply(d->l, m, 1);
  double t = hx_seq_stage_step_s(d->ctx, d->st, d->first, d->last, d->mbs);
  if (t < d->pick_s * (1 - 1e-9) &&
      hx_seq_stage_memory_fits(d->ctx, d->st, d->first, d->last, d->mbs, d->in_flight, NULL)) {
    d->pick_s = t;
    d->pick = m;
  }
  apply(d->l, m, -1);
}

static int argmax(const double *v, int n) {
  int best = 0;
  for (int i = 1; i < n; i++)
    if (v[i] > v[best])
      best = i;
  return best;
}

/* The unit of group g with the least token load (other than skip). */
static int lightest_in(const struct hx_seq_layout *l, const double *load, int g, int skip) {
  int best = -1;
  for (int k = l->group_start[g]; k < l->group_start[g + 1]; k++) {
    int u = l->order[k];
    if (u != skip && (best < 0 || load[u] < load[best]))
      best = u;
  }
  return best;
}

static void token_moves_from(struct descent *d, int src, int64_t delta, const double *load) {
  const struct hx_seq_layout *l = d->l;
  struct move m = {src, -1, delta / 2, delta - delta / 2};
  for (int k = l->group_start[l->group_of[src]]; k < l->group_start[l->group_of[src] + 1]; k++) {
    m.to = l->order[k];
    try_move(d, m);
  }
  for (int g = 0; g < l->ngroups; g++) {
    if (g == l->group_of[src])
      continue;
    m.to = lightest_in(l, load, g, src);
    if (m.to >= 0)
      try_move(d, m);
  }
}

static void head_moves_from(struct descent *d, int src) {
  const struct hx_seq_layout *l = d->l;
  struct move m = {src, -1, 0, 0};
  for (int k = l->group_start[l->group_of[src]]; k < l->group_start[l->group_of[src] + 1]; k++) {
    m.to = l->order[k];
    try_move(d, m);
  }
}

enum { MAX_ROUNDS = 2000 };

double hx_seq_refine(const struct hx_ctx *ctx, struct hx_stage *st, bool first, bool last,
                     int64_t mbs, int64_t in_flight) {
  struct hx_seq_layout *l = (struct hx_seq_layout *)st->seq_layout; /* the search's own copy */
  struct hx_arena scratch;
  hx_arena_init(&scratch);
  double *tok = HX_NEW_ARRAY(&scratch, double, l->nunits);
  double *head = HX_NEW_ARRAY(&scratch, double, l->nunits);
  struct descent d = {ctx, st, l, first, last, mbs, in_flight, 0, {0, 0, 0, 0}, 0};
  d.best = hx_seq_stage_step_s(ctx, st, first, last, mbs);
  int64_t delta = ctx->model.seq_len / (4 * l->nunits) + 1;
  int64_t finest = ctx->model.seq_len / (512 * l->nunits) + 1;
  for (int round = 0; round < MAX_ROUNDS && delta >= finest; round++) {
    hx_seq_unit_loads(ctx, l, mbs, tok, head);
    d.pick_s = d.best;
    d.pick.from = -1;
    int by_tokens = argmax(tok, l->nunits), by_heads = argmax(head, l->nunits);
    token_moves_from(&d, by_tokens, delta, tok);
    token_moves_from(&d, by_heads, delta, tok);
    head_moves_from(&d, by_heads);
    if (d.pick.from < 0) {
      delta /= 2;
      continue;
    }
    apply(l, d.pick, 1);
    d.best = d.pick_s;
  }
  hx_arena_free(&scratch);
  return d.best;
}
