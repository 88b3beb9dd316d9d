/* --strategy=exhaustive: the exact planner for clusters of at most 8
 * devices, the test oracle of the HexiScale search.
 *
 * It enumerates every plan structure the plan IR expresses with cp = hp = 1:
 * which devices are used, how the used ones form pipelines, how each
 * pipeline's devices form stages (any grouping, any TP degree that divides
 * the query heads, TP across any link) and the order of the stages. Devices
 * of one machine are interchangeable (same GPU, same links), so structures
 * are enumerated as per-machine device counts, which removes only exact
 * duplicates. For each structure the micro-batch size, recompute, layer
 * split and batch split are chosen by hx_sched_complete (exact min-max
 * splits); the best few by the closed-form estimate are simulated, with the
 * baseline, and the fastest simulated plan wins. */
#include <math.h>
#include <string.h>

#include "../ir/cost.h"
#include "../ir/plan_util.h"
#include "../ir/sim.h"
#include "sched.h"

enum { MAXN = HX_EXHAUSTIVE_MAX_DEVICES, KEEP = 8 };

/* Devices per machine: a vector over the cluster's nodes. */
struct vec {
  int c[MAXN];
};

struct seqs {              /* every stage sequence of one pipeline vector */
  struct vec key;
  int n, cap;
  struct vec *stages;      /* n sequences, each `len[i]` stages at stages[at[i]] */
  int *at, *len;
  int nstage_vecs, cap_vecs;
};

struct ex {
  struct hx_ctx *ctx;
  struct hx_arena *a;
  int nnodes;
  struct vec all;
  struct seqs *memo;
  int nmemo, cap_memo;
  /* current structure */
  struct vec pipes[MAXN];
  int npipes;
  int choice[MAXN];        /* sequence index per pipeline */
  struct hx_plan *best[KEEP];
  int nbest;
  long structures;
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
      left->c[i] -= part->c[i];
    if (vsum(left, e->nnodes) == 0) {
      seq_push(e, q, cur, len + 1);
    } else {
      struct vec next = {{0}};
      stage_rec(e, q, left, cur, len + 1, &next, 0);
    }
    for (int i = 0; i < e->nnodes; i++)
      left->c[i] += part->c[i];
    return;
  }
  for (int k = 0; k <= left->c[node]; k++) {
    part->c[node] = k;
    stage_rec(e, q, left, cur, len, part, node + 1);
  }
  part->c[node] = 0;
}

static struct seqs *sequences(struct ex *e, const struct vec *pipe) {
  for (int i = 0; i < e->nmemo; i++)
    if (!memcmp(&e->memo[i].key, pipe, sizeof *pipe))
      return &e->memo[i];
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
  q->key = *pipe;
  struct vec left = *pipe, part = {{0}}, cur[MAXN];
  stage_rec(e, q, &left, cur, 0, &part, 0);
  return q;
}

/* ---- materialising and pricing ---------------------------------------------- */

/* Keeps p (allocated in a short-lived arena) among the KEEP best, copied. */
static void keep_best(struct ex *e, const struct hx_plan *p) {
  if (!p)
    return;
  int at = e->nbest;
  while (at > 0 && p->sim.iteration_s < e->best[at - 1]->sim.iteration_s)
    at--;
  if (at >= KEEP)
    return;
  struct hx_plan *kept = hx_plan_copy(e->a, p);
  kept->sim.iteration_s = p->sim.iteration_s;
  for (int i = (e->nbest < KEEP ? e->nbest : KEEP - 1); i > at; i--)
    e->best[i] = e->best[i - 1];
  e->best[at] = kept;
  if (e->nbest < KEEP)
    e->nbest++;
}

static void price_structure(struct ex *e) {
  struct hx_ctx *ctx = e->ctx;
  const struct hx_cluster *c = &ctx->cluster;
  /* every structure's candidates live in their own arena: only the few
   * kept are copied out, so memory stays flat over 1e5 structures */
  struct hx_arena tmp;
  hx_arena_init(&tmp);
  struct hx_plan *sk = hx_plan_new(&tmp, c->ndevices, e->npipes);
  sk->strategy = "exhaustive";
  sk->schedule = ctx->train.schedule;
  int next[MAXN]; /* next unused device index inside each node */
  memset(next, 0, sizeof next);
  int ranks[MAXN];
  for (int i = 0; i < e->npipes; i++) {
    struct seqs *q = sequences(e, &e->pipes[i]);
    const struct vec *st = q->stages + q->at[e->choice[i]];
    int ns = q->len[e->choice[i]];
    hx_pipeline_init(&tmp, &sk->pipelines[i], ns);
    for (int s = 0; s < ns; s++) {
      int n = 0;
      for (int node = 0; node < e->nnodes; node++)
        for (int k = 0; k < st[s].c[node]; k++)
          ranks[n++] = c->nodes[node].first_device + next[node]++;
      hx_stage_init(&tmp, &sk->pipelines[i].stages[s], ranks, n, 0, 0, false);
    }
  }
  e->structures++;
  keep_best(e, hx_sched_complete(ctx, &tmp, sk));
  hx_arena_free(&tmp);
}

/* Every combination of stage sequences of the chosen pipelines. */
static void choose_sequences(struct ex *e, int i) {
  if (i == e->npipes) {
    price_structure(e);
    return;
  }
  struct seqs *q = sequences(e, &e->pipes[i]);
  for (int k = 0; k < q->n; k++) {
    e->choice[i] = k;
    choose_sequences(e, i + 1);
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
    if (e->npipes > 0 && vcmp(part, &e->pipes[e->npipes - 1], e->nnodes) > 0)
      return;
    if (e->npipes >= e->ctx->train.global_batch)
      return;
    e->pipes[e->npipes++] = *part;
    for (int i = 0; i < e->nnodes; i++)
      left->c[i] -= part->c[i];
    if (vsum(left, e->nnodes) == 0) {
      choose_sequences(e, 0);
    } else {
      struct vec next = {{0}};
      pipe_rec(e, left, &next, 0);
    }
    for (int i = 0; i < e->nnodes; i++)
      left->c[i] += part->c[i];
    e->npipes--;
    return;
  }
  for (int k = left->c[node]; k >= 0; k--) {
    part->c[node] = k;
    pipe_rec(e, left, part, node + 1);
  }
  part->c[node] = 0;
}

/* Every used subset (per-machine counts), then its pipelines. */
static void used_rec(struct ex *e, struct vec *used, int node) {
  if (node == e->nnodes) {
    if (vsum(used, e->nnodes) == 0)
      return;
    struct vec left = *used, part = {{0}};
    pipe_rec(e, &left, &part, 0);
    return;
  }
  for (int k = e->all.c[node]; k >= 0; k--) {
    used->c[node] = k;
    used_rec(e, used, node + 1);
  }
}

struct hx_plan *hx_sched_exhaustive(struct hx_ctx *ctx) {
  const struct hx_cluster *c = &ctx->cluster;
  if (c->ndevices > MAXN || c->nnodes > MAXN)
    return NULL;
  struct hx_arena scratch;
  hx_arena_init(&scratch);
  struct ex e = {.ctx = ctx, .a = &scratch, .nnodes = c->nnodes};
  for (int i = 0; i < c->nnodes; i++)
    e.all.c[i] = c->nodes[i].gpus;
  struct vec used = {{0}};
  used_rec(&e, &used, 0);
  struct hx_plan *best = NULL;
  for (int i = 0; i < e.nbest; i++) {
    struct hx_plan *p = hx_plan_copy(&ctx->arena, e.best[i]);
    hx_sched_build_groups(ctx, &ctx->arena, p);
    p->description = hx_sprintf(&ctx->arena, "dp=%d, %ld structures", p->npipelines,
                                e.structures);
    hx_simulate(ctx, p, NULL);
    if (p->sim.valid && (!best || p->sim.iteration_s < best->sim.iteration_s))
      best = p;
  }
  hx_arena_free(&scratch);
  if (ctx->baseline && (!best || ctx->baseline->sim.iteration_s <= best->sim.iteration_s)) {
    best = hx_plan_copy(&ctx->arena, ctx->baseline);
    best->strategy = "symmetric";
  }
  return best;
}
