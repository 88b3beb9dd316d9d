/* The context x head parallel cost model (see cost.h for the formulas).
 * Like cost.c every pricing function is a closed form that allocates
 * nothing: the scheduler's coordinate descent calls them many thousand
 * times. Per-group figures are recomputed on the fly, group by group. */
#include "cost.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>


/* fmax / fmin are libm calls (NaN rules) and the pricing loops are hot: the
 * scheduler prices each layout thousands of times. No NaN reaches these. */
static inline double max2(double a, double b) { return a > b ? a : b; }
static inline double min2(double a, double b) { return a < b ? a : b; }

/* ---- layout ------------------------------------------------------------ */

struct hx_seq_layout *hx_seq_layout_new(struct hx_arena *a, int tp, int nunits, int ngroups) {
  struct hx_seq_layout *l = HX_NEW(a, struct hx_seq_layout);
  l->tp = tp;
  l->nunits = nunits;
  l->ngroups = ngroups;
  l->order = HX_NEW_ARRAY(a, int, nunits);
  l->group_start = HX_NEW_ARRAY(a, int, ngroups + 1);
  l->group_of = HX_NEW_ARRAY(a, int, nunits);
  l->tokens = HX_NEW_ARRAY(a, int64_t, nunits);
  l->first = HX_NEW_ARRAY(a, int64_t, nunits);
  l->heads = HX_NEW_ARRAY(a, int, nunits);
  l->unit_flops = HX_NEW_ARRAY(a, double, nunits);
  l->unit_bwd_flops = HX_NEW_ARRAY(a, double, nunits);
  l->unit_head_flops = HX_NEW_ARRAY(a, double, nunits);
  l->unit_head_bwd_flops = HX_NEW_ARRAY(a, double, nunits);
  l->unit_memory = HX_NEW_ARRAY(a, double, nunits);
  l->unit_bw = HX_NEW_ARRAY(a, double, nunits);
  l->unit_lat = HX_NEW_ARRAY(a, double, nunits);
  l->group_bw = HX_NEW_ARRAY(a, double, ngroups);
  l->group_lat = HX_NEW_ARRAY(a, double, ngroups);
  l->hop_bw = HX_NEW_ARRAY(a, double, ngroups);
  l->hop_lat = HX_NEW_ARRAY(a, double, ngroups);
  return l;
}

struct hx_seq_layout *hx_seq_layout_grouped(struct hx_arena *a, int tp, int nunits, int ngroups,
                                            const int *group_of) {
  struct hx_seq_layout *l = hx_seq_layout_new(a, tp, nunits, ngroups);
  int k = 0;
  for (int g = 0; g < ngroups; g++) {
    l->group_start[g] = k;
    for (int u = 0; u < nunits; u++)
      if (group_of[u] == g) {
        l->order[k++] = u;
        l->group_of[u] = g;
      }
  }
  l->group_start[ngroups] = k;
  return l;
}

#define COPY_INTO(dst, src, n) memcpy((dst), (src), sizeof *(src) * (size_t)(n))

struct hx_seq_layout *hx_seq_layout_copy(struct hx_arena *a, const struct hx_seq_layout *src) {
  struct hx_seq_layout *l = hx_seq_layout_new(a, src->tp, src->nunits, src->ngroups);
  int n = src->nunits, g = src->ngroups;
  COPY_INTO(l->order, src->order, n);
  COPY_INTO(l->group_start, src->group_start, g + 1);
  COPY_INTO(l->group_of, src->group_of, n);
  COPY_INTO(l->tokens, src->tokens, n);
  COPY_INTO(l->first, src->first, n);
  COPY_INTO(l->heads, src->heads, n);
  COPY_INTO(l->unit_flops, src->unit_flops, n);
  COPY_INTO(l->unit_bwd_flops, src->unit_bwd_flops, n);
  COPY_INTO(l->unit_head_flops, src->unit_head_flops, n);
  COPY_INTO(l->unit_head_bwd_flops, src->unit_head_bwd_flops, n);
  COPY_INTO(l->unit_memory, src->unit_memory, n);
  COPY_INTO(l->unit_bw, src->unit_bw, n);
  COPY_INTO(l->unit_lat, src->unit_lat, n);
  COPY_INTO(l->group_bw, src->group_bw, g);
  COPY_INTO(l->group_lat, src->group_lat, g);
  COPY_INTO(l->hop_bw, src->hop_bw, g);
  COPY_INTO(l->hop_lat, src->hop_lat, g);
  return l;
}

/* The first device of unit u (the TP rank 0 that talks to other units). */
static int unit_device(const int *stage_devices, const struct hx_seq_layout *l, int u) {
  return stage_devices[u * l->tp];
}

/* A unit's rate is its slowest device's at the unit's TP degree: FLOP/s x
 * its type's tp_efficiency curve, as HexiScale prices a TP stage's layer
 * (cost.c, layer_compute): TP t does not run t times faster. */
static void unit_links(const struct hx_ctx *ctx, const int *devs, struct hx_seq_layout *l, int u) {
  const struct hx_cluster *c = &ctx->cluster;
  double flops = INFINITY, bwd_flops = INFINITY, mem = INFINITY;
  double head = INFINITY, head_bwd = INFINITY; /* the LM head, as the unit prices it */
  for (int k = 0; k < l->tp; k++) {
    int r = devs[u * l->tp + k];
    const struct hx_gpu_type *g = &c->gpus[c->devices[r].gpu_type];
    double f = hx_device_flops(c, r) * hx_tp_efficiency(g, l->tp), m = (double)g->memory_bytes;
    double b = hx_device_backward_flops(c, r) * hx_tp_efficiency(g, l->tp);
    flops = f < flops ? f : flops;
    bwd_flops = b < bwd_flops ? b : bwd_flops;
    head = fmin(head, hx_device_head_flops(c, r, false) * hx_tp_efficiency(g, l->tp));
    head_bwd = fmin(head_bwd, hx_device_head_flops(c, r, true) * hx_tp_efficiency(g, l->tp));
    mem = m < mem ? m : mem;
  }
  l->unit_flops[u] = flops;
  l->unit_bwd_flops[u] = bwd_flops;
  l->unit_head_flops[u] = head;
  l->unit_head_bwd_flops[u] = head_bwd;
  l->unit_memory[u] = mem;
  l->unit_bw[u] = INFINITY;
  l->unit_lat[u] = 0;
  if (l->tp > 1)
    hx_group_links(c, devs + u * l->tp, l->tp, &l->unit_bw[u], &l->unit_lat[u]);
}

/* Per group, the ring hop into it from the previous group in ring order:
 * the slowest link and largest latency between a unit of that group and one
 * of this (each unit's K/V heads may come from any unit: sub-rings). */
static void ring_links(const struct hx_ctx *ctx, const int *devs, struct hx_seq_layout *l) {
  for (int g = 0; g < l->ngroups; g++) {
    int prev = (g + l->ngroups - 1) % l->ngroups;
    double bw = INFINITY, lat = 0;
    for (int x = l->group_start[prev]; x < l->group_start[prev + 1]; x++)
      for (int y = l->group_start[g]; y < l->group_start[g + 1]; y++) {
        int a = unit_device(devs, l, l->order[x]), b = unit_device(devs, l, l->order[y]);
        if (a == b)
          continue;
        bw = min2(bw, hx_bw(&ctx->cluster, a, b));
        lat = max2(lat, hx_lat(&ctx->cluster, a, b));
      }
    l->hop_bw[g] = bw;
    l->hop_lat[g] = lat;
  }
}

void hx_seq_layout_links(const struct hx_ctx *ctx, const int *devs, struct hx_seq_layout *l) {
  for (int u = 0; u < l->nunits; u++)
    unit_links(ctx, devs, l, u);
  enum { MAX_GROUP = 4096 };
  int members[MAX_GROUP];
  for (int g = 0; g < l->ngroups; g++) {
    int n = 0;
    for (int k = l->group_start[g]; k < l->group_start[g + 1] && n < MAX_GROUP; k++)
      members[n++] = unit_device(devs, l, l->order[k]);
    l->group_bw[g] = INFINITY;
    l->group_lat[g] = 0;
    if (n > 1)
      hx_group_links(&ctx->cluster, members, n, &l->group_bw[g], &l->group_lat[g]);
  }
  ring_links(ctx, devs, l);
}

/* ---- geometry ---------------------------------------------------------- */

int64_t hx_seq_group_tokens(const struct hx_seq_layout *l, int g) {
  int64_t t = 0;
  for (int k = l->group_start[g]; k < l->group_start[g + 1]; k++)
    t += l->tokens[l->order[k]];
  return t;
}

int hx_seq_largest_group(const struct hx_seq_layout *l) {
  int most = 0;
  for (int g = 0; g < l->ngroups; g++) {
    int n = l->group_start[g + 1] - l->group_start[g];
    most = n > most ? n : most;
  }
  return most;
}

static int64_t group_front(const struct hx_seq_layout *l, int g) {
  int64_t t = 0;
  for (int k = l->group_start[g]; k < l->group_start[g + 1]; k++)
    t += l->first[l->order[k]];
  return t;
}

/* Where group g's chunks lie: front [*a, *a + *A), back [*b, *b + *B). */
struct chunks {
  int64_t a, A, b, B;
};

/* Walks the groups in ring order keeping the running offsets. */
struct walker {
  int64_t front_used, back_used;
};

static struct chunks next_chunks(const struct hx_seq_layout *l, int64_t seq_len, int g,
                                 struct walker *w) {
  struct chunks c;
  int64_t total = hx_seq_group_tokens(l, g);
  c.A = group_front(l, g);
  c.B = total - c.A;
  c.a = w->front_used;
  c.b = seq_len - w->back_used - c.B;
  w->front_used += c.A;
  w->back_used += c.B;
  return c;
}

int hx_seq_unit_ranges(const struct hx_seq_layout *l, int64_t seq_len, int u,
                       struct hx_range out[2]) {
  struct walker w = {0, 0};
  struct chunks c = {0, 0, 0, 0};
  for (int g = 0; g <= l->group_of[u]; g++)
    c = next_chunks(l, seq_len, g, &w);
  int64_t front = c.a, back_end = c.b + c.B;
  for (int k = l->group_start[l->group_of[u]];; k++) {
    int v = l->order[k];
    if (v == u)
      break;
    front += l->first[v];
    back_end -= l->tokens[v] - l->first[v];
  }
  int n = 0;
  if (l->first[u] > 0)
    out[n++] = (struct hx_range){front, front + l->first[u]};
  int64_t back = l->tokens[u] - l->first[u];
  if (back > 0)
    out[n++] = (struct hx_range){back_end - back, back_end};
  return n;
}

/* Heads before unit u in its group (its offset in the TP share). */
static int64_t head_offset(const struct hx_seq_layout *l, int u) {
  int64_t off = 0;
  for (int k = l->group_start[l->group_of[u]]; l->order[k] != u; k++)
    off += l->heads[l->order[k]];
  return off;
}

struct hx_range hx_seq_device_heads(const struct hx_seq_layout *l, const struct hx_model *m, int u,
                                    int tp_rank) {
  int64_t share = m->heads / l->tp;
  int64_t begin = tp_rank * share + head_offset(l, u);
  return (struct hx_range){begin, begin + l->heads[u]};
}

static int64_t kv_heads_at(const struct hx_model *m, int64_t offset, int64_t k) {
  if (k <= 0)
    return 0;
  int64_t per_kv = m->heads / m->kv_heads; /* query heads sharing one K/V head */
  return (offset + k - 1) / per_kv - offset / per_kv + 1;
}

int64_t hx_seq_kv_heads_used(const struct hx_seq_layout *l, const struct hx_model *m, int u) {
  return kv_heads_at(m, head_offset(l, u), l->heads[u]);
}

double hx_causal_pairs(int64_t begin, int64_t len) {
  double b = (double)begin, n = (double)len;
  return n * b + n * (n + 1) / 2;
}

/* Causal (query, key) pairs of queries [q0, q0 + nq) against keys
 * [k0, k0 + nk): key <= query. Queries inside the key range see a triangle,
 * queries past it see every key. */
static double pairs_between(int64_t q0, int64_t nq, int64_t k0, int64_t nk) {
  if (nq <= 0 || nk <= 0)
    return 0;
  double q_lo = (double)q0, q_hi = (double)(q0 + nq), k_lo = (double)k0, k_hi = (double)(k0 + nk);
  double lo = max2(q_lo, k_lo), hi = min2(q_hi, k_hi), tri = 0;
  if (hi > lo)
    tri = (hi - lo) * (lo - k_lo + 1) + (hi - lo) * (hi - lo - 1) / 2;
  double past = q_hi - max2(q_lo, k_hi);
  return tri + (past > 0 ? past * (double)nk : 0);
}

/* Pairs of group chunks q's queries against group chunks k's keys. */
static double chunk_pairs(struct chunks q, struct chunks k) {
  return pairs_between(q.a, q.A, k.a, k.A) + pairs_between(q.a, q.A, k.b, k.B) +
         pairs_between(q.b, q.B, k.a, k.A) + pairs_between(q.b, q.B, k.b, k.B);
}

/* ---- pricing ----------------------------------------------------------- */

static double elem(const struct hx_ctx *ctx) { return hx_elem_bytes(&ctx->train); }

static double unit_allreduce_s(const struct hx_seq_layout *l, int u, double bytes) {
  int n = l->tp;
  if (n <= 1)
    return 0;
  return 2.0 * (n - 1) / n * bytes / l->unit_bw[u] + 2.0 * (n - 1) * l->unit_lat[u];
}

/* FLOPs per token of a decoder layer outside attention's score/mix part. */
static double other_flops_per_token(const struct hx_model *m) {
  return m->flops_layer_fwd - 2.0 * (double)m->hidden * ((double)m->seq_len + 1);
}

/* Sums over a group for the ragged all-to-all. */
struct group_sums {
  double tokens;   /* sum of n_v */
  double in_bytes; /* sum of (k_v + 2 kvh_v) hd e: per-token bytes into each member */
  double heads;    /* sum of k_v */
};

static struct group_sums sums_of(const struct hx_ctx *ctx, const struct hx_seq_layout *l, int g) {
  const struct hx_model *m = &ctx->model;
  struct group_sums s = {0, 0, 0};
  int64_t off = 0;
  for (int k = l->group_start[g]; k < l->group_start[g + 1]; k++) {
    int u = l->order[k];
    int64_t kvh = kv_heads_at(m, off, l->heads[u]);
    off += l->heads[u];
    s.tokens += (double)l->tokens[u];
    s.heads += l->heads[u];
    s.in_bytes += (double)(l->heads[u] + 2 * kvh) * (double)m->head_dim * elem(ctx);
  }
  return s;
}

double hx_seq_a2a_s(const struct hx_ctx *ctx, const struct hx_seq_layout *l, int g, int64_t mbs) {
  int n = l->group_start[g + 1] - l->group_start[g];
  if (n <= 1)
    return 0;
  const struct hx_model *m = &ctx->model;
  struct group_sums s = sums_of(ctx, l, g);
  double hd_e = (double)m->head_dim * elem(ctx), in_max = 0, out_max = 0;
  int64_t off = 0;
  for (int k = l->group_start[g]; k < l->group_start[g + 1]; k++) {
    int u = l->order[k];
    double nu = (double)l->tokens[u], ku = l->heads[u];
    double in_u = (ku + 2.0 * (double)kv_heads_at(m, off, l->heads[u])) * hd_e;
    off += l->heads[u];
    double send_in = nu * (s.in_bytes - in_u), recv_in = in_u * (s.tokens - nu);
    double send_out = ku * hd_e * (s.tokens - nu), recv_out = nu * hd_e * (s.heads - ku);
    in_max = max2(in_max, max2(send_in, recv_in));
    out_max = max2(out_max, max2(send_out, recv_out));
  }
  double bytes = (in_max + out_max) * (double)mbs;
  return bytes / l->group_bw[g] + 2.0 * (n - 1) * l->group_lat[g];
}

/* The K/V ring of a layout, step by step. At step s (1 .. G-1) every hop
 * moves one block: the hop into group g carries the block of group g - s
 * (its tokens x 2 K/V heads x hd x e for the receivers' K/V heads), so the
 * step is paced by its slowest (block, hop) pair; group g meanwhile computes
 * its queries against the block it got at step s - 1 (its own at step 0).
 * A group's attention is sum over s of max(compute_s, transfer_{s+1}).
 * That is O(G^2) per pricing, and the scheduler prices thousands of
 * layouts, so rings of more than RING_EXACT_MAX groups use a bound instead:
 * every step takes the slowest step's time (the largest block over the
 * slowest hop), overlapped with all the non-own attention at once. */
enum { RING_GROUPS_MAX = 4096, RING_EXACT_MAX = 16 };
struct ring_steps {
  int ngroups;
  bool exact;
  double slowest_step; /* the bound's step time (when !exact) */
  struct chunks chunk[RING_GROUPS_MAX];
  double step[RING_GROUPS_MAX + 1]; /* step[s]: transfer of step s; step[0], step[G]: 0 */
  double total;                     /* sum of the transfers */
};

static double group_kv_bytes(const struct hx_ctx *ctx, const struct hx_seq_layout *l, int g,
                             int64_t mbs) {
  int64_t most = 0, off = 0;
  for (int k = l->group_start[g]; k < l->group_start[g + 1]; k++) {
    int64_t kvh = kv_heads_at(&ctx->model, off, l->heads[l->order[k]]);
    off += l->heads[l->order[k]];
    most = kvh > most ? kvh : most;
  }
  return 2.0 * (double)most * (double)ctx->model.head_dim * elem(ctx) * (double)mbs;
}

/* Fills r for the layout (comm = 0: transfers free). A ring of more than
 * RING_GROUPS_MAX groups is an internal error (groups are units, and the
 * scheduler's cells hold at most 4096 devices). */
static void ring_prepare(const struct hx_ctx *ctx, const struct hx_seq_layout *l, int64_t mbs,
                         double comm, struct ring_steps *r) {
  int G = l->ngroups;
  if (G > RING_GROUPS_MAX)
    hx_internal_error("a ring of %d groups (at most %d)", G, RING_GROUPS_MAX);
  r->ngroups = G;
  struct walker w = {0, 0};
  double kvb[RING_GROUPS_MAX];
  for (int g = 0; g < G; g++) {
    r->chunk[g] = next_chunks(l, ctx->model.seq_len, g, &w);
    kvb[g] = comm * group_kv_bytes(ctx, l, g, mbs);
  }
  r->step[0] = r->step[G] = r->total = 0;
  r->exact = G <= RING_EXACT_MAX;
  if (!r->exact) {
    int64_t largest = 0;
    for (int g = 0; g < G; g++)
      largest = r->chunk[g].A + r->chunk[g].B > largest ? r->chunk[g].A + r->chunk[g].B : largest;
    r->slowest_step = 0;
    for (int g = 0; g < G; g++)
      if (kvb[g] > 0)
        r->slowest_step = max2(r->slowest_step, (double)largest * kvb[g] / l->hop_bw[g] +
                                                    comm * l->hop_lat[g]);
    r->total = (G - 1) * r->slowest_step;
    return;
  }
  for (int s = 1; s < G; s++) {
    double slowest = 0;
    for (int g = 0; g < G; g++) {
      struct chunks from = r->chunk[(g - s + G) % G];
      double t = (double)(from.A + from.B) * kvb[g] / l->hop_bw[g] + comm * l->hop_lat[g];
      slowest = max2(slowest, kvb[g] > 0 ? t : 0);
    }
    r->step[s] = slowest;
    r->total += slowest;
  }
}

/* Attention of group g's queries on a device doing `per_pair` seconds per
 * causal pair (its heads over its FLOP/s), the ring overlapped per step. */
static double ring_attention_s(const struct ring_steps *r, int g, double per_pair) {
  int G = r->ngroups;
  if (!r->exact) {
    struct chunks c = r->chunk[g];
    double own = chunk_pairs(c, c);
    double all = hx_causal_pairs(c.a, c.A) + hx_causal_pairs(c.b, c.B);
    return per_pair * own + max2(per_pair * (all - own), r->total);
  }
  double t = 0;
  for (int s = 0; s < G; s++) {
    double compute = per_pair * chunk_pairs(r->chunk[g], r->chunk[(g - s + G) % G]);
    t += max2(compute, r->step[s + 1]);
  }
  return t;
}

double hx_seq_ring_s(const struct hx_ctx *ctx, const struct hx_seq_layout *l, int64_t mbs) {
  static _Thread_local struct ring_steps r; /* 160 KiB: off the stack */
  ring_prepare(ctx, l, mbs, 1, &r);
  return r.total;
}

/* Seconds per causal pair of unit u's devices (4 hd FLOPs per head) at
 * `flops` (the unit's forward or backward rate). */
static double unit_per_pair(const struct hx_ctx *ctx, const struct hx_seq_layout *l, int u,
                            int64_t mbs, double flops) {
  return 4.0 * (double)ctx->model.head_dim * l->heads[u] * (double)mbs / flops;
}

/* Per-unit pieces of one layer outside attention: the forward's compute,
 * the backward's (2x the FLOPs at the backward's rate), one TP all-reduce
 * pair. */
struct unit_cost {
  double other, other_bwd, tp;
};

static struct unit_cost unit_cost(const struct hx_ctx *ctx, const struct hx_seq_layout *l, int u,
                                  int64_t mbs, double comm) {
  const struct hx_model *m = &ctx->model;
  struct unit_cost uc;
  double n = (double)l->tokens[u] * (double)mbs, f = l->unit_flops[u];
  uc.other = n * other_flops_per_token(m) / (l->tp * f);
  uc.other_bwd = 2 * (n * other_flops_per_token(m) / (l->tp * l->unit_bwd_flops[u]));
  uc.tp = comm * 2 * unit_allreduce_s(l, u, n * (double)m->hidden * elem(ctx));
  return uc;
}

void hx_seq_stage_cost(const struct hx_ctx *ctx, const struct hx_stage *st, int64_t mbs,
                       bool with_comm, struct hx_seq_stage_cost *out) {
  const struct hx_seq_layout *l = st->seq_layout;
  const struct hx_model *m = &ctx->model;
  double comm = with_comm ? 1 : 0;
  double other_f = 0, other_b = 0, a2a = 0, attn_f = 0, attn_b = 0, head = 0, head_b = 0, embed = 0;
  static _Thread_local struct ring_steps r; /* 160 KiB: off the stack */
  ring_prepare(ctx, l, mbs, comm, &r);
  for (int g = 0; g < l->ngroups; g++) {
    a2a = max2(a2a, comm * hx_seq_a2a_s(ctx, l, g, mbs));
    double per_pair = 0, per_pair_b = 0; /* the group's slowest device per pair sets its pace */
    for (int k = l->group_start[g]; k < l->group_start[g + 1]; k++) {
      int u = l->order[k];
      struct unit_cost uc = unit_cost(ctx, l, u, mbs, comm);
      other_f = max2(other_f, uc.other + uc.tp);
      other_b = max2(other_b, uc.other_bwd + uc.tp);
      per_pair = max2(per_pair, unit_per_pair(ctx, l, u, mbs, l->unit_flops[u]));
      per_pair_b = max2(per_pair_b, unit_per_pair(ctx, l, u, mbs, l->unit_bwd_flops[u]));
      double n = (double)l->tokens[u] * (double)mbs;
      head = max2(head, n * m->flops_head_fwd / (l->tp * l->unit_head_flops[u]));
      head_b = max2(head_b, n * m->flops_head_fwd / (l->tp * l->unit_head_bwd_flops[u]));
      embed = max2(embed, comm * unit_allreduce_s(l, u, n * (double)m->hidden * elem(ctx)));
    }
    attn_f = max2(attn_f, ring_attention_s(&r, g, per_pair));
    attn_b = max2(attn_b, ring_attention_s(&r, g, per_pair_b));
  }
  out->other_s = other_f;
  out->a2a_s = a2a;
  out->attn_s = attn_f;
  out->ring_s = r.total;
  out->layer_fwd = other_f + a2a + attn_f;
  /* backward: twice the FLOPs at the backward's rate, the ring twice (K/V
   * again, dK/dV back) */
  out->layer_bwd = other_b + a2a + 2 * attn_b + (st->recompute ? out->layer_fwd : 0);
  out->head_fwd = head;
  out->head_bwd = 2 * head_b;
  out->embed_fwd = embed;
}

void hx_seq_unit_loads(const struct hx_ctx *ctx, const struct hx_seq_layout *l, int64_t mbs,
                       double *token_load, double *head_load) {
  static _Thread_local struct ring_steps r;
  ring_prepare(ctx, l, mbs, 1, &r);
  for (int g = 0; g < l->ngroups; g++)
    for (int k = l->group_start[g]; k < l->group_start[g + 1]; k++) {
      int u = l->order[k];
      struct unit_cost uc = unit_cost(ctx, l, u, mbs, 1);
      token_load[u] = uc.other + uc.tp;
      head_load[u] = ring_attention_s(&r, g, unit_per_pair(ctx, l, u, mbs, l->unit_flops[u]));
    }
}

double hx_seq_stage_step_s(const struct hx_ctx *ctx, const struct hx_stage *st, bool first,
                           bool last, int64_t mbs) {
  struct hx_seq_stage_cost c;
  hx_seq_stage_cost(ctx, st, mbs, true, &c);
  int nl = st->layer_end - st->layer_begin;
  return nl * (c.layer_fwd + c.layer_bwd) + (last ? c.head_fwd + c.head_bwd : 0) +
         (first ? c.embed_fwd : 0);
}

/* ---- memory ------------------------------------------------------------ */

static int64_t max_group_tokens(const struct hx_seq_layout *l) {
  int64_t best = 0;
  for (int g = 0; g < l->ngroups; g++) {
    int64_t t = hx_seq_group_tokens(l, g);
    best = t > best ? t : best;
  }
  return best;
}

/* ---- memory by kind: the runtime's buffers ------------------------------ */

/* rtlib/seq/rt_seq_attn.c's sizes, from the layout as codegen writes its
 * table (the cp_ring in layout order, heads in group order, every TP rank's
 * share cut alike): a unit's tokens of one sequence, its query heads
 * [h0, h0 + nh) of the TP share and the kv heads [kv0, kv0 + nkv) they read
 * (rt_seq.c's member_of). */
struct seq_member {
  double tokens;
  int64_t h0, nh, kv0, nkv;
};

/* Unit u whose heads start at h0 of its group's (head_offset). */
static struct seq_member member_from(const struct hx_model *m, const struct hx_seq_layout *l, int u,
                                     int64_t h0) {
  int64_t per_kv = m->heads / m->kv_heads;
  struct seq_member x = {(double)l->tokens[u], h0, l->heads[u], 0, 0};
  if (x.nh > 0) {
    x.kv0 = x.h0 / per_kv;
    x.nkv = (x.h0 + x.nh - 1) / per_kv + 1 - x.kv0;
  }
  return x;
}

static struct seq_member member_at(const struct hx_model *m, const struct hx_seq_layout *l, int u) {
  int64_t per_kv = m->heads / m->kv_heads;
  struct seq_member x = {(double)l->tokens[u], head_offset(l, u), l->heads[u], 0, 0};
  if (x.nh > 0) {
    x.kv0 = x.h0 / per_kv;
    x.nkv = (x.h0 + x.nh - 1) / per_kv + 1 - x.kv0;
  }
  return x;
}

static bool member_reads(const struct seq_member *x, int64_t k) {
  return k >= x->kv0 && k < x->kv0 + x->nkv;
}

/* The unit of group g that first reads share kv head k (rt_seq.c's
 * owner_of): it forwards k's K/V around the ring. */
static int kv_owner(const struct hx_model *m, const struct hx_seq_layout *l, int g, int64_t k) {
  for (int i = l->group_start[g]; i < l->group_start[g + 1]; i++) {
    struct seq_member x = member_at(m, l, l->order[i]);
    if (member_reads(&x, k))
      return l->order[i];
  }
  return -1;
}

/* Kv heads on the ring link from unit w (group g - 1) to unit v (group g),
 * K/V and dK/dV accumulators together (rt_seq.c's link_of). */
static int64_t link_heads(const struct hx_model *m, const struct hx_seq_layout *l, int w, int v) {
  struct seq_member mw = member_at(m, l, w), mv = member_at(m, l, v);
  int64_t n = 0;
  for (int64_t k = 0; k < m->kv_heads / l->tp; k++) {
    n += member_reads(&mv, k) && kv_owner(m, l, l->group_of[w], k) == w;
    n += member_reads(&mw, k) && kv_owner(m, l, l->group_of[v], k) == v;
  }
  return n;
}

enum { MAX_KV_OWNERS = 1024 };

/* kv_owner of every kv head of group g in one walk of its members; false
 * when there are more kv heads than owner[] holds. */
static bool group_kv_owners(const struct hx_model *m, const struct hx_seq_layout *l, int g,
                            int *owner) {
  int64_t nkv = m->kv_heads / l->tp, h0 = 0;
  if (nkv > MAX_KV_OWNERS)
    return false;
  for (int64_t k = 0; k < nkv; k++)
    owner[k] = -1;
  for (int i = l->group_start[g]; i < l->group_start[g + 1]; i++) {
    struct seq_member x = member_from(m, l, l->order[i], h0);
    h0 += l->heads[l->order[i]];
    for (int64_t k = x.kv0; x.nh > 0 && k < x.kv0 + x.nkv && k < nkv; k++)
      if (owner[k] < 0)
        owner[k] = l->order[i];
  }
  return true;
}

/* Floats of unit u's ring send (out) or receive buffer: every link at the
 * largest group's block (rt_seq_attn.c's ring_floats). link_heads counts a
 * link's heads the same way in both directions; with the owners of both
 * groups found once (the fit check prices every unit of every searched
 * layout) the sum costs the other group's members times its kv heads. */
static double ring_buffer_floats(const struct hx_model *m, const struct hx_seq_layout *l, int u,
                                 bool out) {
  if (l->ngroups < 2)
    return 0;
  int g = l->group_of[u], other = (g + (out ? 1 : l->ngroups - 1)) % l->ngroups;
  double heads = 0;
  int own_g[MAX_KV_OWNERS], own_o[MAX_KV_OWNERS];
  if (group_kv_owners(m, l, g, own_g) && group_kv_owners(m, l, other, own_o)) {
    struct seq_member me = member_at(m, l, u);
    int64_t h0 = 0, nkv = m->kv_heads / l->tp;
    for (int i = l->group_start[other]; i < l->group_start[other + 1]; i++) {
      int v = l->order[i];
      struct seq_member x = member_from(m, l, v, h0);
      h0 += l->heads[v];
      for (int64_t k = 0; k < nkv; k++)
        heads += (double)((member_reads(&x, k) && own_g[k] == u) +
                          (member_reads(&me, k) && own_o[k] == v));
    }
  } else {
    for (int i = l->group_start[other]; i < l->group_start[other + 1]; i++)
      heads += (double)(out ? link_heads(m, l, u, l->order[i]) : link_heads(m, l, l->order[i], u));
  }
  return 2.0 * (double)max_group_tokens(l) * (double)m->head_dim * heads;
}

/* Floats unit u sends (send) or receives in the group's all-to-all of each
 * kind (rt_seq_attn.c's a2a_total), the largest of the four: forward
 * q/k/v in and o/lse out, backward q/k/v/dO/lse/delta in, dq/dk/dv out. */
static double a2a_buffer_floats(const struct hx_model *m, const struct hx_seq_layout *l, int u,
                                bool send) {
  double hd = (double)m->head_dim, most = 0;
  struct seq_member me = member_at(m, l, u);
  for (int kind = 0; kind < 4; kind++) {
    bool to_heads = kind == 0 || kind == 2, me_tokens = to_heads == send;
    double n = 0;
    int64_t h0 = 0; /* the members' head offsets, walked in group order */
    for (int i = l->group_start[l->group_of[u]]; i < l->group_start[l->group_of[u] + 1]; i++) {
      struct seq_member x = member_from(m, l, l->order[i], h0);
      h0 += l->heads[l->order[i]];
      const struct seq_member *tok = me_tokens ? &me : &x, *hs = me_tokens ? &x : &me;
      double nh = (double)hs->nh, nkv = (double)hs->nkv;
      double per = kind == 1   ? nh * (hd + 1)
                   : kind == 2 ? hd * (2 * nh + 2 * nkv) + 2 * nh
                               : hd * (nh + 2 * nkv);
      n += tok->tokens * per;
    }
    most = max2(most, n);
  }
  return most;
}

/* The CPU block kernel's scratch (kernels/cpu/attention_block.c: tiles of
 * HXK_ATTN_TILE = 64 queries x keys, whatever the tokens). */
static double block_scratch_floats(double hd) {
  const double tile = 64;
  return 2 * tile * tile + tile * hd + 2 * tile;
}

double hx_seq_hook_scratch_floats(const struct hx_model *m, const struct hx_seq_layout *l, int u) {
  struct seq_member me = member_at(m, l, u);
  double hd = (double)m->head_dim, rows = (double)hx_seq_group_tokens(l, l->group_of[u]);
  double qn = rows * (double)me.nh * hd, kvn = rows * (double)me.nkv * hd,
         hn = rows * (double)me.nh;
  double block = (double)max_group_tokens(l) * (double)me.nkv * hd;
  double common = a2a_buffer_floats(m, l, u, true) + a2a_buffer_floats(m, l, u, false) +
                  ring_buffer_floats(m, l, u, true) + ring_buffer_floats(m, l, u, false) +
                  block_scratch_floats(hd) + qn + 2 * kvn + hn;
  bool ring = l->ngroups > 1;
  double forward = common + (ring ? 2 * 2 * block : 0) + qn; /* two ring blocks' K/V; o */
  /* K/V and dK/dV ring blocks; dO, delta, dq, dk, dv; hook_backward's delta of the own tokens */
  double backward = common + (ring ? 2 * 4 * block : 0) + qn + hn + qn + 2 * kvn +
                    me.tokens * (double)(m->heads / l->tp);
  return max2(forward, backward);
}

void hx_seq_rank_buffers(const struct hx_ctx *ctx, const struct hx_plan *plan,
                         const struct hx_stage *st, int r, double *tokens, double *attention,
                         double *gathered) {
  const struct hx_seq_layout *l = st->seq_layout;
  int u = 0;
  for (int k = 0; k < st->ndevices; k++)
    if (st->devices[k] == r)
      u = k / l->tp;
  *tokens = (double)l->tokens[u];
  *attention = hx_seq_hook_scratch_floats(&ctx->model, l, u);
  const struct hx_pipeline *pl = &plan->pipelines[plan->devices[r].pipeline];
  /* the stage leader gathers and scatters whole activations across a hop
   * (rtlib/rt_exec_ops.c's rt_hexiseq_init) */
  bool hops = pl->nstages > 1;
  *gathered = hops && st->leader == r ? (double)pl->micro_batch_size * (double)ctx->model.seq_len *
                                            (double)ctx->model.hidden
                                      : 0;
}

/* ---- hops -------------------------------------------------------------- */

static int64_t max_unit_tokens(const struct hx_ctx *ctx, const struct hx_stage *st) {
  if (!st->seq_layout)
    return ctx->model.seq_len;
  int64_t best = 0;
  for (int u = 0; u < st->seq_layout->nunits; u++)
    best = st->seq_layout->tokens[u] > best ? st->seq_layout->tokens[u] : best;
  return best;
}

double hx_seq_hop_s(const struct hx_ctx *ctx, const struct hx_stage *from, const struct hx_stage *to,
                    int64_t mbs) {
  int64_t a = max_unit_tokens(ctx, from), b = max_unit_tokens(ctx, to);
  double bytes = (double)(a > b ? a : b) * (double)mbs * (double)ctx->model.hidden * elem(ctx);
  int nf = from->ndevices / from->tp, nt = to->ndevices / to->tp;
  int pairs = nf > nt ? nf : nt;
  double bw = INFINITY, lat = 0;
  for (int j = 0; j < pairs; j++) {
    int x = from->devices[(j % nf) * from->tp], y = to->devices[(j % nt) * to->tp];
    if (x == y)
      continue;
    bw = min2(bw, hx_bw(&ctx->cluster, x, y));
    lat = max2(lat, hx_lat(&ctx->cluster, x, y));
  }
  return isinf(bw) ? 0 : lat + bytes / bw;
}

/* ---- checks ------------------------------------------------------------ */

static int range_cmp(const void *x, const void *y) {
  const struct hx_range *a = x, *b = y;
  if (a->begin != b->begin)
    return a->begin < b->begin ? -1 : 1;
  return (a->end > b->end) - (a->end < b->end);
}

/* NULL when ranges[0..n) cover [begin, end) exactly once. */
static const char *exact_cover(struct hx_range *r, int n, int64_t begin, int64_t end) {
  qsort(r, (size_t)n, sizeof *r, range_cmp);
  int64_t at = begin;
  for (int i = 0; i < n; i++) {
    if (r[i].begin > at)
      return "misses";
    if (r[i].begin < at)
      return "repeats";
    at = r[i].end;
  }
  return at == end ? NULL : at < end ? "misses" : "runs past";
}

static const char *check_ring(struct hx_arena *a, const struct hx_ctx *ctx,
                              const struct hx_plan *plan, const struct hx_group *g) {
  int total = 0;
  for (int k = 0; k < g->nranks; k++)
    total += plan->devices[g->ranks[k]].nseq;
  struct hx_range *r = HX_NEW_ARRAY(a, struct hx_range, total > 0 ? total : 1);
  int n = 0;
  for (int k = 0; k < g->nranks; k++) {
    const struct hx_device_plan *d = &plan->devices[g->ranks[k]];
    for (int i = 0; i < d->nseq; i++)
      r[n++] = d->seq[i];
  }
  const char *why = exact_cover(r, n, 0, ctx->model.seq_len);
  return why ? hx_sprintf(a, "cp ring of rank %d %s a token of the sequence", g->ranks[0], why)
             : NULL;
}

static const char *check_heads(struct hx_arena *a, const struct hx_ctx *ctx,
                               const struct hx_plan *plan, const struct hx_group *g) {
  const struct hx_device_plan *d0 = &plan->devices[g->ranks[0]];
  if (d0->pipeline < 0)
    return hx_sprintf(a, "hp group of unused rank %d", g->ranks[0]);
  int tp = plan->pipelines[d0->pipeline].stages[d0->stage].tp;
  int64_t share = ctx->model.heads / tp;
  struct hx_range *r = HX_NEW_ARRAY(a, struct hx_range, g->nranks);
  int n = 0;
  for (int k = 0; k < g->nranks; k++) {
    const struct hx_device_plan *d = &plan->devices[g->ranks[k]];
    if (d->tp_rank != d0->tp_rank)
      return hx_sprintf(a, "hp group of rank %d mixes TP ranks", g->ranks[0]);
    if (d->heads.end > d->heads.begin)
      r[n++] = d->heads;
  }
  const char *why = exact_cover(r, n, d0->tp_rank * share, (d0->tp_rank + 1) * share);
  return why ? hx_sprintf(a, "hp group of rank %d %s a head", g->ranks[0], why) : NULL;
}

/* Every device of a stage with a layout sits in exactly one ring and one
 * all-to-all group. */
static const char *check_membership(struct hx_arena *a, const struct hx_plan *plan) {
  int *ring = HX_NEW_ARRAY(a, int, plan->ndevices), *a2a = HX_NEW_ARRAY(a, int, plan->ndevices);
  for (int g = 0; g < plan->ngroups; g++)
    for (int k = 0; k < plan->groups[g].nranks; k++) {
      if (plan->groups[g].kind == HX_GROUP_CP_RING)
        ring[plan->groups[g].ranks[k]]++;
      if (plan->groups[g].kind == HX_GROUP_HP_A2A)
        a2a[plan->groups[g].ranks[k]]++;
    }
  for (int i = 0; i < plan->npipelines; i++)
    for (int s = 0; s < plan->pipelines[i].nstages; s++) {
      const struct hx_stage *st = &plan->pipelines[i].stages[s];
      for (int k = 0; st->seq_layout && k < st->ndevices; k++)
        if (ring[st->devices[k]] != 1 || a2a[st->devices[k]] != 1)
          return hx_sprintf(a, "rank %d is in %d cp rings and %d hp groups", st->devices[k],
                            ring[st->devices[k]], a2a[st->devices[k]]);
    }
  return NULL;
}

const char *hx_seq_check_plan(struct hx_arena *a, const struct hx_ctx *ctx,
                              const struct hx_plan *plan) {
  for (int g = 0; g < plan->ngroups; g++) {
    const struct hx_group *gr = &plan->groups[g];
    const char *why = NULL;
    if (gr->nranks <= 0 && (gr->kind == HX_GROUP_CP_RING || gr->kind == HX_GROUP_HP_A2A))
      return "an empty cp ring or hp group";
    if (gr->kind == HX_GROUP_CP_RING)
      why = check_ring(a, ctx, plan, gr);
    else if (gr->kind == HX_GROUP_HP_A2A)
      why = check_heads(a, ctx, plan, gr);
    if (why)
      return why;
  }
  return check_membership(a, plan);
}
