/* Gradient synchronisation across pipelines (and the TP ranks that hold a
 * tensor whole): each group of the rank's table names tensor parts; the rank
 * turns them into ranges of its flat gradient buffer once, at start-up, and
 * every step packs them on the device, all-reduces the pack over the group
 * (the transport) and unpacks. See hexic_rt.h (struct hx_rt_group) for what
 * is summed where.
 *
 * Overlap with the backward (what passes/cost/sim.c charges): a group's
 * gradients are cut into buckets, one per decoder layer it covers, plus one
 * for the head (final_norm, lm_head) or, when the group holds tok_emb, one
 * for tok_emb with the head. A bucket's gradient is complete when the step's
 * last backward has passed its layer (the head's: when that backward starts,
 * its forward having run the head; tok_emb's: when it ends), and it is packed
 * and its all-reduce started right then, so it runs under the backward of
 * the layers below; the GRAD_SYNC op waits for all of them, then clipping
 * and AdamW follow. Every rank starts and waits its buckets in one order:
 * by when the backward frees them (head, layers from the last down, tok_emb)
 * and then by group id. The backward frees a rank's buckets in that order,
 * and the order is the same for every pair of buckets two ranks share, so
 * collectives that block (the staged CUDA transport, one NCCL stream) can
 * never wait on each other in a cycle. HEXIC_SYNC_OVERLAP=0 starts them all
 * at GRAD_SYNC instead, in the same order on the same buckets: the same sums
 * bit for bit. HEXIC_SYNC_TRACE=1 prints, per step and rank, the order in
 * which the last backward passed its layers and the buckets started. */
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rt_exec_internal.h"
#include "rt_init.h"

void rt_runs_add(struct rt_runs *r, long off, long n) {
  if (n <= 0)
    return;
  r->floats += n;
  if (r->n > 0 && r->items[r->n - 1].off + r->items[r->n - 1].n == off) {
    r->items[r->n - 1].n += n; /* adjacent: one longer copy */
    return;
  }
  if (r->n == r->cap) {
    int cap = r->cap ? 2 * r->cap : 16;
    struct rt_run *items = hx_rt_calloc((size_t)cap, sizeof *items);
    if (r->n)
      memcpy(items, r->items, (size_t)r->n * sizeof *items);
    free(r->items);
    r->items = items;
    r->cap = cap;
  }
  r->items[r->n++] = (struct rt_run){off, n};
}

/* Fails loudly when a group names a slice this rank does not hold: the
 * tables of the ranks would then disagree, and summing would corrupt. */
static void check_within(const struct hx_rt_group *g, const char *what, int begin, int end,
                         int own_begin, int own_end) {
  if (begin < own_begin || end > own_end)
    hx_rt_fatal(HX_RT_EXIT_ERROR,
                "internal: gradient group %d names %s [%d, %d) but this rank holds [%d, %d)",
                g->id, what, begin, end, own_begin, own_end);
}

/* The rows [r0, r1) of a [rows, cols] tensor at off: one run. */
static void add_rows(struct rt_runs *r, long off, long cols, long r0, long r1) {
  rt_runs_add(r, off + r0 * cols, (r1 - r0) * cols);
}

/* Columns [c0, c1) of a [rows, cols] tensor at off: one run per row. */
static void add_cols(struct rt_runs *r, long off, long rows, long cols, long c0, long c1) {
  for (long row = 0; row < rows; row++)
    rt_runs_add(r, off + row * cols + c0, c1 - c0);
}

static void add_layer_parts(const struct rt_exec *e, const struct hx_rt_group *g, int l,
                            struct rt_runs *r) {
  const struct hxk_shard *s = &e->shard;
  long dim = e->dims.dim, hd = e->dims.head_dim;
  long nq = s->q_end - s->q_begin, nf = s->ffn_end - s->ffn_begin;
  if (g->parts & HX_RT_PART_NORMS) {
    rt_runs_add(r, rt_layer_tensor(e, l, HXK_ATTN_NORM), dim);
    rt_runs_add(r, rt_layer_tensor(e, l, HXK_MLP_NORM), dim);
  }
  if (g->parts & HX_RT_PART_HEADS) {
    long h0 = g->head_begin - s->q_begin, h1 = g->head_end - s->q_begin;
    add_rows(r, rt_layer_tensor(e, l, HXK_WQ), dim, h0 * hd, h1 * hd);
    add_cols(r, rt_layer_tensor(e, l, HXK_WO), dim, nq * hd, h0 * hd, h1 * hd);
  }
  if (g->parts & HX_RT_PART_KV) {
    long k0 = g->kv_begin - s->kv_begin, k1 = g->kv_end - s->kv_begin;
    add_rows(r, rt_layer_tensor(e, l, HXK_WK), dim, k0 * hd, k1 * hd);
    add_rows(r, rt_layer_tensor(e, l, HXK_WV), dim, k0 * hd, k1 * hd);
  }
  if (g->parts & HX_RT_PART_FFN) {
    long f0 = g->ffn_begin - s->ffn_begin, f1 = g->ffn_end - s->ffn_begin;
    add_rows(r, rt_layer_tensor(e, l, HXK_W_GATE), dim, f0, f1);
    add_rows(r, rt_layer_tensor(e, l, HXK_W_UP), dim, f0, f1);
    add_cols(r, rt_layer_tensor(e, l, HXK_W_DOWN), dim, nf, f0, f1);
  }
}

enum { HEAD_KEY = INT_MAX, EMB_KEY = -1 };

/* ---- the buckets, planned once ---- */

struct bucket_list {
  int n, cap;
  struct rt_bucket *items;
};

static struct rt_bucket *new_bucket(struct bucket_list *l, int group_index, int handle, int key,
                                    int ready) {
  if (l->n == l->cap) {
    int cap = l->cap ? 2 * l->cap : 16;
    struct rt_bucket *items = hx_rt_calloc((size_t)cap, sizeof *items);
    if (l->n)
      memcpy(items, l->items, (size_t)l->n * sizeof *items);
    free(l->items);
    l->items = items;
    l->cap = cap;
  }
  struct rt_bucket *b = &l->items[l->n++];
  *b = (struct rt_bucket){.group_index = group_index, .handle = handle, .key = key,
                          .ready = ready};
  return b;
}

static void check_group(const struct rt_exec *e, const struct hx_rt_group *g) {
  const struct rt_layout *p = &e->p.lay;
  const struct hxk_shard *s = &e->shard;
  if ((g->parts & HX_RT_PART_TOK_EMB) && p->tok_emb < 0)
    hx_rt_fatal(HX_RT_EXIT_ERROR, "internal: gradient group %d sums tok_emb, not held here",
                g->id);
  if ((g->parts & HX_RT_PART_HEAD) && p->final_norm < 0)
    hx_rt_fatal(HX_RT_EXIT_ERROR, "internal: gradient group %d sums the head, not held here",
                g->id);
  if (g->parts & HX_RT_PART_HEADS)
    check_within(g, "query heads", g->head_begin, g->head_end, s->q_begin, s->q_end);
  if (g->parts & HX_RT_PART_KV)
    check_within(g, "kv heads", g->kv_begin, g->kv_end, s->kv_begin, s->kv_end);
  if (g->parts & HX_RT_PART_FFN)
    check_within(g, "ffn columns", g->ffn_begin, g->ffn_end, s->ffn_begin, s->ffn_end);
  if (g->parts & (HX_RT_PART_NORMS | HX_RT_PART_HEADS | HX_RT_PART_KV | HX_RT_PART_FFN))
    check_within(g, "layers", g->layer_begin, g->layer_end, e->cfg->layer_begin,
                 e->cfg->layer_end);
}

/* Group i's buckets on this rank: the parts of each of its layers (in the
 * order of the spec's tensors, the same on every member), and tok_emb and
 * the head together. */
static void plan_group(const struct rt_exec *e, int i, int handle, struct bucket_list *out) {
  const struct hx_rt_group *g = &e->cfg->groups[i];
  const struct rt_layout *p = &e->p.lay;
  long vd = (long)e->dims.vocab * e->dims.dim;
  check_group(e, g);
  if (g->parts & (HX_RT_PART_NORMS | HX_RT_PART_HEADS | HX_RT_PART_KV | HX_RT_PART_FFN))
    for (int l = g->layer_begin; l < g->layer_end; l++) {
      int local = l - e->cfg->layer_begin;
      add_layer_parts(e, g, local, &new_bucket(out, i, handle, l, local)->runs);
    }
  if (!(g->parts & (HX_RT_PART_TOK_EMB | HX_RT_PART_HEAD)))
    return;
  bool emb = g->parts & HX_RT_PART_TOK_EMB;
  struct rt_bucket *b =
      new_bucket(out, i, handle, emb ? EMB_KEY : HEAD_KEY, emb ? -1 : p->nlayers);
  if (emb)
    rt_runs_add(&b->runs, p->tok_emb, vd);
  if (g->parts & HX_RT_PART_HEAD) {
    rt_runs_add(&b->runs, p->final_norm, e->dims.dim);
    if (p->lm_head >= 0)
      rt_runs_add(&b->runs, p->lm_head, vd);
  }
}

/* The one order: by when the backward frees a bucket, then by group. */
static int bucket_order(const void *pa, const void *pb) {
  const struct rt_bucket *a = pa, *b = pb;
  if (a->key != b->key)
    return a->key > b->key ? -1 : 1;
  return (a->group_index > b->group_index) - (a->group_index < b->group_index);
}

/* The replicated ranges (sorted, merged: list_replicated) inside b's runs. */
static void find_replicated(const struct rt_runs *rep, struct rt_bucket *b) {
  for (int k = 0; k < b->runs.n; k++) {
    long lo = b->runs.items[k].off, hi = lo + b->runs.items[k].n;
    int a = 0, z = rep->n; /* the first replicated run ending after lo */
    while (a < z) {
      int mid = a + (z - a) / 2;
      if (rep->items[mid].off + rep->items[mid].n <= lo)
        a = mid + 1;
      else
        z = mid;
    }
    for (int j = a; j < rep->n && rep->items[j].off < hi; j++) {
      long from = rep->items[j].off > lo ? rep->items[j].off : lo;
      long to = rep->items[j].off + rep->items[j].n < hi ? rep->items[j].off + rep->items[j].n : hi;
      rt_runs_add(&b->zero, from, to - from);
    }
  }
}

static int run_order(const void *pa, const void *pb) {
  const struct rt_run *a = pa, *b = pb;
  return (a->off > b->off) - (a->off < b->off);
}

/* The replicated ranges no bucket holds (the groups are disjoint): zeroed at
 * GRAD_SYNC off TP rank 0, as every replicated range was before buckets. */
static void find_leftover(struct rt_exec *e) {
  struct rt_sync_state *s = &e->sync;
  struct rt_runs held = {0};
  for (int i = 0; i < s->nbuckets; i++)
    for (int k = 0; k < s->buckets[i].zero.n; k++)
      rt_runs_add(&held, s->buckets[i].zero.items[k].off, s->buckets[i].zero.items[k].n);
  if (held.n > 1)
    qsort(held.items, (size_t)held.n, sizeof *held.items, run_order);
  int h = 0;
  for (int k = 0; k < e->replicated.n; k++) {
    long at = e->replicated.items[k].off, end = at + e->replicated.items[k].n;
    for (; h < held.n && held.items[h].off < end; h++) {
      if (held.items[h].off > at)
        rt_runs_add(&s->leftover, at, held.items[h].off - at);
      long past = held.items[h].off + held.items[h].n;
      if (past > at)
        at = past;
    }
    if (at < end)
      rt_runs_add(&s->leftover, at, end - at);
  }
  free(held.items);
}

static bool flag_from_env(const char *name, bool fallback) {
  const char *v = getenv(name);
  if (!v || !*v)
    return fallback;
  if (strcmp(v, "0") && strcmp(v, "1"))
    hx_rt_fatal(HX_RT_EXIT_ERROR, "%s='%s' is neither 0 nor 1", name, v);
  return v[0] == '1';
}

/* The micro-batch of the step's last backward, after which no forward runs
 * (so the head's gradient is complete when it starts); -1 when the
 * schedule has no such backward: the buckets then start at GRAD_SYNC. */
static int last_backward(const struct hx_rt_rank_config *c) {
  int mb = -1;
  for (int i = 0; i < c->nops; i++) {
    if (c->schedule[i].kind == HX_RT_BACKWARD)
      mb = c->schedule[i].micro_batch;
    else if (c->schedule[i].kind == HX_RT_FORWARD)
      mb = -1;
  }
  return mb;
}

/* ---- ZeRO-1: the shards (docs: /work/notes/zero1_api.md's split rule) ----
 *
 * A sharded group's packed sequence is the concatenation of its buckets in
 * the order plan_group makes them (its layers up, then tok_emb and the
 * head), the same on every member. Member i (the group's ranks, increasing)
 * owns [floor(n S_i / 1e6), floor(n S_{i+1} / 1e6)) of it, S_i the sum of
 * shard_ppm[0..i). Each bucket is one contiguous piece of that sequence, so
 * its reduce-scatter and all-gather have per-member counts (some zero). */

static long split_at(long n, const int32_t *ppm, int i) {
  int64_t s = 0;
  for (int k = 0; k < i; k++)
    s += ppm[k];
  return (long)((int64_t)n * s / 1000000);
}

static void check_shards(const struct hx_rt_group *g) {
  int64_t sum = 0;
  for (int i = 0; i < g->nranks; i++) {
    if (g->shard_ppm[i] < 0)
      hx_rt_fatal(HX_RT_EXIT_ERROR, "internal: gradient group %d: shard %d is negative", g->id, i);
    sum += g->shard_ppm[i];
  }
  if (sum != 1000000)
    hx_rt_fatal(HX_RT_EXIT_ERROR,
                "internal: gradient group %d: its shards sum to %lld parts per million, not "
                "1000000",
                g->id, (long long)sum);
}

static int member_index(const struct hx_rt_rank_config *c, const struct hx_rt_group *g) {
  for (int i = 0; i < g->nranks; i++)
    if (g->ranks[i] == c->rank)
      return i;
  hx_rt_fatal(HX_RT_EXIT_ERROR, "internal: rank %d is not a member of its group %d", c->rank,
              g->id);
}

/* The flat ranges of packed floats [lo, hi) of runs. */
static void slice_runs(const struct rt_runs *runs, long lo, long hi, struct rt_runs *out) {
  long at = 0;
  for (int k = 0; k < runs->n && at < hi; k++) {
    long n = runs->items[k].n, from = lo > at ? lo - at : 0, to = hi - at < n ? hi - at : n;
    if (to > from)
      rt_runs_add(out, runs->items[k].off + from, to - from);
    at += n;
  }
}

/* Bucket b, the piece [at, at + b->runs.floats) of its group's sequence of
 * n floats: every member's count and this rank's block. */
static void shard_bucket(const struct rt_exec *e, struct rt_bucket *b, long at, long n) {
  const struct hx_rt_group *g = &e->cfg->groups[b->group_index];
  int me = member_index(e->cfg, g);
  long end = at + b->runs.floats;
  b->counts = hx_rt_calloc((size_t)g->nranks, sizeof *b->counts);
  for (int i = 0; i < g->nranks; i++) {
    long lo = split_at(n, g->shard_ppm, i), hi = split_at(n, g->shard_ppm, i + 1);
    lo = lo > at ? lo : at;
    hi = hi < end ? hi : end;
    b->counts[i] = hi > lo ? hi - lo : 0;
    if (i < me)
      b->own_at += b->counts[i];
  }
  slice_runs(&b->runs, b->own_at, b->own_at + b->counts[me], &b->own);
}

static void shard_buckets(struct rt_exec *e, struct bucket_list *list) {
  int ng = e->cfg->ngroups;
  long *total = hx_rt_calloc((size_t)(ng > 0 ? ng : 1), sizeof *total);
  long *at = hx_rt_calloc((size_t)(ng > 0 ? ng : 1), sizeof *at);
  for (int k = 0; k < list->n; k++)
    total[list->items[k].group_index] += list->items[k].runs.floats;
  for (int k = 0; k < list->n; k++) { /* still in plan_group's order */
    struct rt_bucket *b = &list->items[k];
    const struct hx_rt_group *g = &e->cfg->groups[b->group_index];
    if (g->shard_ppm) {
      shard_bucket(e, b, at[b->group_index], total[b->group_index]);
      e->sync.sharded = true;
    }
    at[b->group_index] += b->runs.floats;
  }
  free(total);
  free(at);
}

static struct rt_runs sorted_copy(const struct rt_runs *r) {
  struct rt_runs out = {0};
  for (int k = 0; k < r->n; k++)
    rt_runs_add(&out, r->items[k].off, r->items[k].n);
  if (out.n > 1)
    qsort(out.items, (size_t)out.n, sizeof *out.items, run_order);
  return out;
}

/* a minus b, both sorted by offset and disjoint within themselves. */
static void subtract_runs(const struct rt_run *a, int na, const struct rt_runs *b,
                          struct rt_runs *out) {
  int j = 0;
  for (int k = 0; k < na; k++) {
    long at = a[k].off, end = at + a[k].n;
    while (j < b->n && b->items[j].off + b->items[j].n <= at)
      j++;
    for (int i = j; i < b->n && b->items[i].off < end; i++) {
      if (b->items[i].off > at)
        rt_runs_add(out, at, b->items[i].off - at);
      long past = b->items[i].off + b->items[i].n;
      if (past > at)
        at = past;
    }
    if (at < end)
      rt_runs_add(out, at, end - at);
  }
}

/* Sharded ranges this rank holds (all) and owns (own), sorted. */
static void sharded_ranges(const struct rt_sync_state *s, struct rt_runs *all,
                           struct rt_runs *own) {
  struct rt_runs a = {0}, o = {0};
  for (int i = 0; i < s->nbuckets; i++)
    if (s->buckets[i].counts) {
      for (int k = 0; k < s->buckets[i].runs.n; k++)
        rt_runs_add(&a, s->buckets[i].runs.items[k].off, s->buckets[i].runs.items[k].n);
      for (int k = 0; k < s->buckets[i].own.n; k++)
        rt_runs_add(&o, s->buckets[i].own.items[k].off, s->buckets[i].own.items[k].n);
    }
  *all = sorted_copy(&a);
  *own = sorted_copy(&o);
  free(a.items);
  free(o.items);
}

/* The optimizer table: every tensor less the sharded ranges another member
 * owns, each piece's moments packed one after the other; and the norm: what
 * rt_for_each_owned counts less the sharded ranges, plus the own shards
 * (after the reduce-scatter each element's sum is on exactly one member). */
static void plan_optimizer(struct rt_exec *e) {
  struct rt_layout *p = &e->p.lay;
  struct rt_runs all = {0}, own = {0}, others = {0};
  if (e->sync.sharded)
    sharded_ranges(&e->sync, &all, &own);
  subtract_runs(all.items, all.n, &own, &others);
  struct rt_runs pieces = {0};
  int cap = 0, n = 0;
  struct rt_tensor *opt = NULL;
  long moments = 0;
  for (int i = 0; i < p->ntensors; i++) {
    const struct rt_tensor *t = &p->tensors[i];
    struct rt_run whole = {t->off, t->n};
    pieces.n = 0;
    pieces.floats = 0;
    subtract_runs(&whole, 1, &others, &pieces);
    for (int k = 0; k < pieces.n; k++) {
      if (n == cap) {
        cap = cap ? 2 * cap : 64;
        struct rt_tensor *grown = hx_rt_calloc((size_t)cap, sizeof *grown);
        if (n)
          memcpy(grown, opt, (size_t)n * sizeof *grown);
        free(opt);
        opt = grown;
      }
      opt[n++] = (struct rt_tensor){pieces.items[k].off, pieces.items[k].n, t->decay, moments};
      moments += pieces.items[k].n;
    }
  }
  e->sync.opt = opt;
  p->opt = opt;
  p->nopt = n;
  p->moments = moments;
  if (e->sync.sharded) {
    struct rt_runs counted = sorted_copy(&e->in_norm), norm = {0};
    subtract_runs(counted.items, counted.n, &all, &norm);
    for (int k = 0; k < own.n; k++)
      rt_runs_add(&norm, own.items[k].off, own.items[k].n);
    free(counted.items);
    free(e->in_norm.items);
    e->in_norm = norm;
    p->norm = norm.items;
    p->nnorm = norm.n;
  }
  free(pieces.items);
  free(all.items);
  free(own.items);
  free(others.items);
}

/* The buckets of every group (no communication yet), their places in the
 * packs, and ZeRO-1's shards and optimizer table. */
void rt_sync_plan(struct rt_exec *e) {
  const struct hx_rt_rank_config *c = e->cfg;
  struct rt_sync_state *s = &e->sync;
  struct bucket_list list = {0};
  for (int i = 0; i < c->ngroups; i++) {
    if (c->groups[i].shard_ppm)
      check_shards(&c->groups[i]);
    plan_group(e, i, -1, &list);
  }
  shard_buckets(e, &list);
  if (list.n > 1) /* qsort wants a non-NULL base even for nothing */
    qsort(list.items, (size_t)list.n, sizeof *list.items, bucket_order);
  s->buckets = list.items;
  s->nbuckets = list.n;
  long floats = 0, recv = 0;
  for (int i = 0; i < s->nbuckets; i++) {
    s->buckets[i].pack_off = floats;
    floats += s->buckets[i].runs.floats;
    s->buckets[i].recv_off = recv;
    recv += s->buckets[i].own.floats;
    if (c->tp_rank != 0)
      find_replicated(&e->replicated, &s->buckets[i]);
  }
  if (c->tp_rank != 0)
    find_leftover(e);
  plan_optimizer(e);
}

/* The transport's groups, opened in increasing group id order on every
 * member (the opening is collective over the group only, and this order
 * makes overlapping groups safe); the packs. */
void rt_sync_init(struct rt_exec *e) {
  const struct hx_rt_rank_config *c = e->cfg;
  struct rt_sync_state *s = &e->sync;
  if (s->sharded && (!e->tr->group_reduce_scatter_start || !e->tr->group_allgather_start))
    hx_rt_fatal(HX_RT_EXIT_ERROR,
                "the plan shards the optimizer state (zero1) but the %s transport of the %s "
                "backend has no reduce-scatter and all-gather: run it with HEXIC_TRANSPORT=mpi "
                "(CUDA) or compile the plan with train { optimizer_sharding = none }",
                e->tr->name, e->dev->backend);
  for (int i = 0; i < c->ngroups; i++) {
    int handle = e->tr->group_open(&c->groups[i]);
    for (int k = 0; k < s->nbuckets; k++)
      if (s->buckets[k].group_index == i)
        s->buckets[k].handle = handle;
    hx_rt_progress();
  }
  long floats = 0, recv = 0;
  for (int i = 0; i < s->nbuckets; i++) {
    floats += s->buckets[i].runs.floats;
    recv += s->buckets[i].own.floats;
  }
  e->pack = e->dev->alloc((size_t)(floats > 0 ? floats : 1) * sizeof(float));
  if (s->sharded)
    s->recv = e->dev->alloc((size_t)(recv > 0 ? recv : 1) * sizeof(float));
  s->overlap = flag_from_env("HEXIC_SYNC_OVERLAP", true);
  s->trace = flag_from_env("HEXIC_SYNC_TRACE", false);
  s->last_backward_mb = s->overlap ? last_backward(c) : -1;
  s->norm_sum_mb = e->model.sp_size > 1 ? last_backward(c) : -1;
}

int64_t rt_model_state_bytes(const struct rt_exec *e) {
  return (int64_t)sizeof(float) * (2 * (int64_t)e->p.lay.n + 2 * (int64_t)e->p.lay.moments);
}

/* ---- every step ---- */

__attribute__((format(printf, 2, 3))) static void trace(struct rt_sync_state *s,
                                                        const char *fmt, ...) {
  if (!s->trace)
    return;
  char item[64];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(item, sizeof item, fmt, ap);
  va_end(ap);
  if (n < 0)
    return;
  if (s->trace_len + (size_t)n + 2 > s->trace_cap) {
    size_t cap = 2 * (s->trace_cap + (size_t)n + 2);
    char *text = hx_rt_calloc(cap, 1);
    if (s->trace_len)
      memcpy(text, s->trace_text, s->trace_len);
    free(s->trace_text);
    s->trace_text = text;
    s->trace_cap = cap;
  }
  s->trace_len += (size_t)snprintf(s->trace_text + s->trace_len, s->trace_cap - s->trace_len,
                                   "%s%s", s->trace_len ? " " : "", item);
}

static void trace_start(struct rt_exec *e, const struct rt_bucket *b) {
  int id = e->cfg->groups[b->group_index].id;
  if (b->key == HEAD_KEY)
    trace(&e->sync, "s%d@head", id);
  else if (b->key == EMB_KEY)
    trace(&e->sync, "s%d@emb", id);
  else
    trace(&e->sync, "s%d@%d", id, b->key);
}

/* The bucket's collective on the emulated link: a ring all-reduce of its
 * pack, or ZeRO-1's reduce-scatter (and all-gather) of the group's largest
 * share of it, as the simulator prices a group (a bucket's own counts can
 * be far more uneven: a bucket inside one member's shard is all its). */
static double emu_bucket_s(const struct rt_exec *e, const struct rt_bucket *b) {
  const struct hx_rt_group *g = &e->cfg->groups[b->group_index];
  const struct hx_rt_link *l = &e->emu.fig->groups[b->group_index];
  double bytes = (double)b->runs.floats * sizeof(float);
  if (!b->counts || !g->shard_ppm)
    return rt_emu_ring_s(l, g->nranks, bytes);
  int32_t most = 0;
  for (int i = 0; i < g->nranks; i++)
    most = g->shard_ppm[i] > most ? g->shard_ppm[i] : most;
  return rt_emu_shard_s(l, g->nranks, bytes * most / 1e6);
}

/* Off TP rank 0 the replicated tensors enter as zeros (hexic_rt.h), then
 * the pack, then the all-reduce on it. */
static void start_bucket(struct rt_exec *e, struct rt_bucket *b) {
  const struct rt_device *d = e->dev;
  if (e->cfg->tp_rank != 0)
    for (int k = 0; k < b->zero.n; k++)
      d->zero(e->p.dev.g + b->zero.items[k].off, (size_t)b->zero.items[k].n * sizeof(float));
  float *pack = e->pack + b->pack_off;
  d->pack(pack, e->p.dev.g, b->runs.items, b->runs.n);
  b->start_s = rt_emu_clock(e);
  if (e->emu.on) { /* one gradient link per rank: its all-reduces queue on it */
    b->emu_begin_s = b->start_s > e->sync.emu_link_free_s ? b->start_s : e->sync.emu_link_free_s;
    e->sync.emu_link_free_s = b->emu_begin_s + emu_bucket_s(e, b);
  }
  if (b->counts)
    b->req = e->tr->group_reduce_scatter_start(b->handle, pack, e->sync.recv + b->recv_off,
                                               b->counts, "gradient reduce-scatter");
  else
    b->req = e->tr->group_allreduce_start(b->handle, pack, b->runs.floats, "gradient all-reduce");
  trace_start(e, b);
}

static void start_ready(struct rt_exec *e, int done) {
  struct rt_sync_state *s = &e->sync;
  while (s->started < s->nbuckets && s->buckets[s->started].ready >= done)
    start_bucket(e, &s->buckets[s->started++]);
}

/* Sequence parallelism: a layer's two norm gains' gradients hold this TP
 * rank's rows' part only (kernels/cpu/llama.h); summed over the TP group
 * once per step, before any bucket packs them, they are whole and the same
 * on every TP rank again, as without SP (the replicated tensors' rule). */
static void sum_norm_gains(struct rt_exec *e, int l) {
  static const enum hxk_param gains[2] = {HXK_ATTN_NORM, HXK_MLP_NORM};
  for (int k = 0; k < 2; k++) {
    double t0 = hx_rt_now_s();
    e->tr->tp_allreduce(e->p.dev.g + rt_layer_tensor(e, l, gains[k]), e->dims.dim, RT_FP32,
                        "sum a norm gain's gradient over the TP group");
    rt_emu_allreduce_done(e, -1, e->cfg->tp, (double)e->dims.dim * sizeof(float), t0);
  }
}

void rt_sync_backward_point(struct rt_exec *e, int m, int done) {
  struct rt_sync_state *s = &e->sync;
  if (m == s->norm_sum_mb && m >= 0 && done >= 0 && done < e->p.lay.nlayers)
    sum_norm_gains(e, done);
  if (m != s->last_backward_mb || m < 0)
    return;
  if (done == e->p.lay.nlayers)
    trace(s, "B");
  else if (done >= 0)
    trace(s, "b%d", e->cfg->layer_begin + done);
  else
    trace(s, "E");
  start_ready(e, done);
  /* the oldest in flight: a test moves every request of the transport on */
  for (int i = 0; i < s->started; i++)
    if (s->buckets[i].req) {
      e->tr->group_allreduce_test(s->buckets[i].req);
      break;
    }
  hx_rt_progress();
}

static void finish_bucket(struct rt_exec *e, struct rt_bucket *b) {
  e->tr->group_allreduce_wait(b->req);
  b->req = NULL;
  rt_emu_collective_done(e, b->group_index, b->emu_begin_s, e->emu.on ? emu_bucket_s(e, b) : 0);
  if (b->counts) /* ZeRO-1: only the own block is summed here; the rest is left as is */
    e->dev->unpack(e->p.dev.g, e->sync.recv + b->recv_off, b->own.items, b->own.n);
  else
    e->dev->unpack(e->p.dev.g, e->pack + b->pack_off, b->runs.items, b->runs.n);
  /* from its start (on the emulated device's clock) to its sum's unpack */
  rt_trace_event(e, RT_TRACE_ALLREDUCE, -1, b->key == HEAD_KEY || b->key == EMB_KEY ? -1 : b->key,
                 e->cfg->groups[b->group_index].id, b->start_s, rt_trace_now());
  hx_rt_progress();
}

static void print_trace(struct rt_exec *e) {
  struct rt_sync_state *s = &e->sync;
  if (!s->trace)
    return;
  fprintf(stderr, "hexic-rt: rank %d: sync trace step %lld: %s\n", e->cfg->rank,
          (long long)e->step + 1, s->trace_len ? s->trace_text : "");
  fflush(stderr);
  s->trace_len = 0;
}

/* The loss carries the global 1/(B*T), so plain sums weigh every sequence
 * the same. Off TP rank 0, the tensors every TP rank computed identically are
 * zeroed first (each bucket's as it starts), so each pipeline contributes
 * them once. */
void rt_sync_gradients(struct rt_exec *e) {
  struct rt_sync_state *s = &e->sync;
  if (e->model.sp_size > 1 && s->norm_sum_mb < 0)
    for (int l = 0; l < e->p.lay.nlayers; l++)
      sum_norm_gains(e, l);
  if (e->cfg->tp_rank != 0)
    for (int k = 0; k < s->leftover.n; k++)
      e->dev->zero(e->p.dev.g + s->leftover.items[k].off,
                   (size_t)s->leftover.items[k].n * sizeof(float));
  trace(s, "W");
  start_ready(e, INT_MIN);
  for (int i = 0; i < s->nbuckets; i++)
    finish_bucket(e, &s->buckets[i]);
  s->started = 0;
  print_trace(e);
}

void rt_tp_allreduce(void *buf, long n, void *arg) {
  struct rt_exec *e = arg;
  double t0 = hx_rt_now_s();
  e->tr->tp_allreduce(buf, n, e->dev->dtype, "tensor-parallel all-reduce");
  rt_emu_allreduce_done(e, -1, e->cfg->tp, (double)n * rt_dtype_bytes(e->dev->dtype), t0);
  hx_rt_progress();
}

/* The elements of each TP rank in a collective of n rows of width. */
static const long *sp_counts(const struct rt_exec *e, long n, int width) {
  for (int i = 0; i < e->cfg->tp; i++) {
    long begin = 0, end = 0;
    hxk_sp_rows(n, e->cfg->tp, i, &begin, &end);
    e->sp_counts[i] = (end - begin) * width;
  }
  return e->sp_counts;
}

/* --emulate: a reduce-scatter or all-gather of n rows that began at t0
 * ends tp - 1 steps of the largest TP rank's rows later on the emulated TP
 * link, as passes/cost/cost.c's sp_collective_s prices it. */
static void sp_emulated(struct rt_exec *e, long n, int width, double t0) {
  if (!e->emu.on)
    return;
  long rows = (n + e->cfg->tp - 1) / e->cfg->tp;
  double bytes = (double)rows * width * (double)rt_dtype_bytes(e->dev->dtype);
  rt_emu_collective_done(e, -1, t0, rt_emu_shard_s(&e->emu.fig->tp, e->cfg->tp, bytes));
}

void rt_tp_reduce_scatter(const void *send, void *recv, long n, int width, void *arg) {
  struct rt_exec *e = arg;
  double t0 = hx_rt_now_s();
  e->tr->tp_reduce_scatter(send, recv, sp_counts(e, n, width), e->dev->dtype,
                           "sequence-parallel reduce-scatter");
  sp_emulated(e, n, width, t0);
  hx_rt_progress();
}

void rt_tp_allgather(void *buf, long n, int width, void *arg) {
  struct rt_exec *e = arg;
  double t0 = hx_rt_now_s();
  e->tr->tp_allgather(buf, sp_counts(e, n, width), e->dev->dtype, "sequence-parallel all-gather");
  sp_emulated(e, n, width, t0);
  hx_rt_progress();
}

/* ---- ZeRO-1 after the optimizer step ---- */

/* In the buckets' one order: each sharded bucket's weights packed (the own
 * block freshly updated) and all-gathered in place, then unpacked. */
void rt_sync_gather_weights(struct rt_exec *e) {
  struct rt_sync_state *s = &e->sync;
  if (!s->sharded)
    return;
  double t0 = rt_trace_now(), emu_free = hx_rt_now_s();
  for (int i = 0; i < s->nbuckets; i++) {
    struct rt_bucket *b = &s->buckets[i];
    if (!b->counts)
      continue;
    /* only this rank's block: every transport's all-gather sends a member's
     * own block from its place in the buffer and overwrites the rest (MPI
     * in place, NCCL broadcasts from each root, the staged copy); packing
     * the whole bucket copied every member's weights for nothing (on the
     * CPU, 4 members: 0.6-1.1 ms of the optimizer op's 3-4 ms, measured) */
    e->dev->pack(e->pack + b->pack_off + b->own_at, e->p.dev.w, b->own.items, b->own.n);
    b->req = e->tr->group_allgather_start(b->handle, e->pack + b->pack_off, b->counts,
                                          "weight all-gather");
  }
  for (int i = 0; i < s->nbuckets; i++) {
    struct rt_bucket *b = &s->buckets[i];
    if (!b->counts)
      continue;
    e->tr->group_allreduce_wait(b->req);
    b->req = NULL;
    /* --emulate: the rank's all-gathers queue on its one gradient link */
    if (e->emu.on)
      emu_free = rt_emu_collective_done(e, b->group_index, emu_free, emu_bucket_s(e, b));
    e->dev->unpack(e->p.dev.w, e->pack + b->pack_off, b->runs.items, b->runs.n);
    hx_rt_progress();
  }
  rt_trace_event(e, RT_TRACE_ALLGATHER, -1, -2, -1, t0, rt_trace_now());
  e->dev->weights_changed();
}

static void host_pack(float *dst, const float *src, const struct rt_runs *r) {
  for (int k = 0; k < r->n; k++) {
    memcpy(dst, src + r->items[k].off, (size_t)r->items[k].n * sizeof(float));
    dst += r->items[k].n;
  }
}

static void host_unpack(float *dst, const float *src, const struct rt_runs *r) {
  for (int k = 0; k < r->n; k++) {
    memcpy(dst + r->items[k].off, src, (size_t)r->items[k].n * sizeof(float));
    src += r->items[k].n;
  }
}

/* Each sharded bucket's moments through its place in e->pack and the
 * transport's all-gather (the host copies are host memory, the transport's
 * buffers the device's). Between steps the pack holds nothing (every step
 * packs its gradients afresh), and borrowing it keeps device memory fixed
 * after start: an allocation here, at a checkpoint, could synchronise the
 * device while another communicator's work is in flight. */
void rt_sync_gather_moments(const struct rt_exec *e, float *m, float *v) {
  const struct rt_sync_state *s = &e->sync;
  long cap = 0;
  for (int i = 0; i < s->nbuckets; i++)
    if (s->buckets[i].counts && s->buckets[i].runs.floats > cap)
      cap = s->buckets[i].runs.floats;
  if (cap == 0)
    return;
  float *host = hx_rt_calloc((size_t)cap, sizeof(float));
  for (int i = 0; i < s->nbuckets; i++) {
    const struct rt_bucket *b = &s->buckets[i];
    if (!b->counts)
      continue;
    float *dev = e->pack + b->pack_off;
    size_t bytes = (size_t)b->runs.floats * sizeof(float);
    float *kinds[2] = {m, v};
    for (int k = 0; k < 2; k++) {
      host_pack(host, kinds[k], &b->runs);
      e->dev->upload(dev, host, bytes);
      e->tr->group_allreduce_wait(
          e->tr->group_allgather_start(b->handle, dev, b->counts, "moment all-gather"));
      e->dev->download(host, dev, bytes);
      host_unpack(kinds[k], host, &b->runs);
    }
  }
  free(host);
}
