/* Gradient synchronisation across pipelines (and the TP ranks that hold a
 * tensor whole): each group of the rank's table names tensor parts; the rank
 * turns them into ranges of its flat gradient buffer once, at start-up, and
 * every step packs them on the device, all-reduces the pack over the group
 * (the transport) and unpacks. See hexic_rt.h (struct hx_rt_group) for what
 * is summed where. */
#include <stdlib.h>
#include <string.h>

#include "rt_exec_internal.h"
#include "rt_init.h"
#include "rt_log.h"

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

/* The ranges of p.g that group g sums on this rank, in a fixed order (the
 * same on every member: parts in the order of the spec's tensors). */
static void plan_group(const struct rt_exec *e, const struct hx_rt_group *g, struct rt_runs *r) {
  const struct rt_layout *p = &e->p.lay;
  const struct hxk_shard *s = &e->shard;
  long vd = (long)e->dims.vocab * e->dims.dim;
  if (g->parts & HX_RT_PART_TOK_EMB) {
    if (p->tok_emb < 0)
      hx_rt_fatal(HX_RT_EXIT_ERROR, "internal: gradient group %d sums tok_emb, not held here",
                  g->id);
    rt_runs_add(r, p->tok_emb, vd);
  }
  if (g->parts & HX_RT_PART_HEADS)
    check_within(g, "query heads", g->head_begin, g->head_end, s->q_begin, s->q_end);
  if (g->parts & HX_RT_PART_KV)
    check_within(g, "kv heads", g->kv_begin, g->kv_end, s->kv_begin, s->kv_end);
  if (g->parts & HX_RT_PART_FFN)
    check_within(g, "ffn columns", g->ffn_begin, g->ffn_end, s->ffn_begin, s->ffn_end);
  if (g->parts & (HX_RT_PART_NORMS | HX_RT_PART_HEADS | HX_RT_PART_KV | HX_RT_PART_FFN)) {
    check_within(g, "layers", g->layer_begin, g->layer_end, e->cfg->layer_begin,
                 e->cfg->layer_end);
    for (int l = g->layer_begin; l < g->layer_end; l++)
      add_layer_parts(e, g, l - e->cfg->layer_begin, r);
  }
  if (g->parts & HX_RT_PART_HEAD) {
    if (p->final_norm < 0)
      hx_rt_fatal(HX_RT_EXIT_ERROR, "internal: gradient group %d sums the head, not held here",
                  g->id);
    rt_runs_add(r, p->final_norm, e->dims.dim);
    if (p->lm_head >= 0)
      rt_runs_add(r, p->lm_head, vd);
  }
}

/* One transport group per table entry, opened in increasing group id order
 * on every member (the opening is collective over the group only, and this
 * order makes overlapping groups safe), and the group's ranges. */
void rt_sync_init(struct rt_exec *e) {
  const struct hx_rt_rank_config *c = e->cfg;
  e->syncs = hx_rt_calloc((size_t)c->ngroups, sizeof *e->syncs);
  long largest = 1;
  for (int i = 0; i < c->ngroups; i++) {
    const struct hx_rt_group *g = &c->groups[i];
    e->syncs[i].group = e->tr->group_open(g);
    plan_group(e, g, &e->syncs[i].runs);
    if (e->syncs[i].runs.floats > largest)
      largest = e->syncs[i].runs.floats;
    hx_rt_progress();
  }
  e->pack = e->dev->alloc((size_t)largest * sizeof(float));
}

static void sync_one(struct rt_exec *e, int index, const struct rt_sync *s) {
  e->dev->pack(e->pack, e->p.dev.g, s->runs.items, s->runs.n);
  double t0 = hx_rt_now_s();
  e->tr->group_allreduce(s->group, e->pack, s->runs.floats, "gradient all-reduce");
  rt_emu_allreduce_done(e, index, e->cfg->groups[index].nranks,
                        (double)s->runs.floats * sizeof(float), t0);
  e->dev->unpack(e->p.dev.g, e->pack, s->runs.items, s->runs.n);
}

/* The loss carries the global 1/(B*T), so plain sums weigh every sequence
 * the same. Off TP rank 0, the tensors every TP rank computed identically are
 * zeroed first, so each pipeline contributes them once. */
void rt_sync_gradients(struct rt_exec *e) {
  if (e->cfg->tp_rank != 0)
    for (int k = 0; k < e->replicated.n; k++)
      e->dev->zero(e->p.dev.g + e->replicated.items[k].off,
                   (size_t)e->replicated.items[k].n * sizeof(float));
  for (int i = 0; i < e->cfg->ngroups; i++) {
    sync_one(e, i, &e->syncs[i]);
    hx_rt_progress();
  }
}

void rt_tp_allreduce(void *buf, long n, void *arg) {
  struct rt_exec *e = arg;
  double t0 = hx_rt_now_s();
  e->tr->tp_allreduce(buf, n, e->dev->dtype, "tensor-parallel all-reduce");
  rt_emu_allreduce_done(e, -1, e->cfg->tp, (double)n * rt_dtype_bytes(e->dev->dtype), t0);
  hx_rt_progress();
}
