/* The hand-built IR of the C tests: an empty context, a model, its training
 * settings, a cluster of nodes, and random HexiSeq layouts. Uses the CHECK
 * of tests/check.h (included here). */
#ifndef HX_TESTS_FIXTURE_H
#define HX_TESTS_FIXTURE_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "passes/cost/cost.h"
#include "passes/passes.h"

#include "tests/check.h"

/* An empty context with its arena ready; hx_arena_free(&ctx->arena) ends it. */
static inline void fx_init(struct hx_ctx *ctx) {
  memset(ctx, 0, sizeof *ctx);
  hx_arena_init(&ctx->arena);
}

/* The model's shape only; fx_train completes it. */
static inline void fx_model(struct hx_ctx *ctx, const char *name, int64_t layers, int64_t hidden,
                            int64_t ffn, int64_t heads, int64_t kv, int64_t vocab, int64_t seq) {
  struct hx_model *m = &ctx->model;
  m->name = name;
  m->layers = layers;
  m->hidden = hidden;
  m->ffn = ffn;
  m->heads = heads;
  m->kv_heads = kv;
  m->vocab = vocab;
  m->seq_len = seq;
}

/* bf16 AdamW training of global_batch sequences, then the model's figures. */
static inline void fx_train(struct hx_ctx *ctx, enum hx_recompute recompute, int64_t global_batch) {
  ctx->has_model = ctx->has_train = true;
  ctx->train.precision = HX_PREC_BF16;
  ctx->train.optimizer = HX_OPT_ADAMW;
  ctx->train.recompute = recompute;
  ctx->train.global_batch = global_batch;
  ctx->train.sequence_parallel = true; /* the train block's default */
  CHECK(hx_pass_model_stats(ctx));
}

/* nnodes nodes of `per_node` GPUs; node n has type types[n] of (tflops,
 * memory GiB), named "T<t>"; bw_in inside a node, bw_out between, latency
 * lat. */
static inline void fx_cluster(struct hx_ctx *ctx, int nnodes, int per_node, const int *types,
                              const double *tflops, const double *mem_gib, int ntypes, double bw_in,
                              double bw_out, double lat) {
  struct hx_cluster *c = &ctx->cluster;
  struct hx_arena *a = &ctx->arena;
  c->ngpus = ntypes;
  c->gpus = HX_NEW_ARRAY(a, struct hx_gpu_type, ntypes);
  for (int t = 0; t < ntypes; t++) {
    c->gpus[t].name = hx_sprintf(a, "T%d", t);
    c->gpus[t].tflops = tflops[t];
    c->gpus[t].memory_bytes = (int64_t)(mem_gib[t] * 1073741824.0);
    c->gpus[t].efficiency = 1.0;
    c->gpus[t].mem_bandwidth = 2e12;
  }
  int n = nnodes * per_node;
  c->nnodes = nnodes;
  c->nodes = HX_NEW_ARRAY(a, struct hx_node, nnodes);
  c->ndevices = n;
  c->devices = HX_NEW_ARRAY(a, struct hx_device, n);
  c->bandwidth = HX_NEW_ARRAY(a, double, (long)n *n);
  c->latency = HX_NEW_ARRAY(a, double, (long)n *n);
  for (int k = 0; k < nnodes; k++) {
    c->nodes[k].name = hx_sprintf(a, "n%d", k);
    c->nodes[k].gpu_type = types[k];
    c->nodes[k].gpus = per_node;
    c->nodes[k].first_device = k * per_node;
  }
  for (int r = 0; r < n; r++) {
    c->devices[r].rank = r;
    c->devices[r].name = hx_sprintf(a, "g:%d", r);
    c->devices[r].node = r / per_node;
    c->devices[r].gpu_type = types[r / per_node];
    c->devices[r].local_index = r % per_node;
    for (int q = 0; q < n; q++) {
      bool same = q / per_node == r / per_node;
      c->bandwidth[(long)r * n + q] = r == q ? 0 : same ? bw_in : bw_out;
      c->latency[(long)r * n + q] = r == q ? 0 : lat;
    }
  }
}

/* xorshift64: a number in [0, n) from the caller's state. */
static inline int fx_below(uint64_t *rng, int n) {
  *rng ^= *rng << 13;
  *rng ^= *rng >> 7;
  *rng ^= *rng << 17;
  return (int)(*rng % (uint64_t)n);
}

/* A random layout of `units` units (ranks: tp each, in unit order): random
 * groups in random ring order; tokens (some units none), front chunks
 * anywhere in [0, tokens] (all-front and all-back included), heads of each
 * group's TP share split unevenly (some units none). */
static inline struct hx_seq_layout *fx_random_layout(struct hx_ctx *ctx, uint64_t *rng,
                                                     const int *ranks, int tp, int units) {
  int ngroups = 1 + fx_below(rng, units);
  struct hx_seq_layout *l = hx_seq_layout_new(&ctx->arena, tp, units, ngroups);
  int *group_of = HX_NEW_ARRAY(&ctx->arena, int, units),
      *perm = HX_NEW_ARRAY(&ctx->arena, int, units);
  for (int u = 0; u < units; u++) {
    group_of[u] = u < ngroups ? u : fx_below(rng, ngroups);
    perm[u] = u;
  }
  for (int u = units - 1; u > 0; u--) { /* ring order not the unit order */
    int v = fx_below(rng, u + 1), t = perm[u];
    perm[u] = perm[v];
    perm[v] = t;
  }
  int k = 0;
  for (int g = 0; g < ngroups; g++) {
    l->group_start[g] = k;
    for (int i = 0; i < units; i++)
      if (group_of[perm[i]] == g) {
        l->order[k++] = perm[i];
        l->group_of[perm[i]] = g;
      }
  }
  l->group_start[ngroups] = k;
  int64_t left = ctx->model.seq_len, share = ctx->model.heads / tp;
  for (int u = 0; u < units; u++) {
    l->tokens[u] = u + 1 == units ? left : fx_below(rng, (int)left / 2 + 1);
    left -= l->tokens[u];
    int pick = fx_below(rng, 4); /* all front, all back, or anywhere between */
    l->first[u] = pick == 0 ? 0 : pick == 1 ? l->tokens[u] : fx_below(rng, (int)l->tokens[u] + 1);
  }
  for (int g = 0; g < ngroups; g++) {
    int64_t h = share;
    for (int x = l->group_start[g]; x < l->group_start[g + 1]; x++) {
      int u = l->order[x];
      l->heads[u] = x + 1 == l->group_start[g + 1] ? (int)h : fx_below(rng, (int)h + 1);
      h -= l->heads[u];
    }
  }
  hx_seq_layout_links(ctx, ranks, l);
  return l;
}

/* a and b within rel of the larger (relative equality of two figures). */
static inline bool fx_near_rel(double a, double b, double rel) {
  return fabs(a - b) <= rel * fmax(fabs(a), fabs(b)) + 1e-300;
}

/* Two simulations of one plan give the same figures within 1e-9 relative
 * (grad_sync_s and optimizer_s are differences of two ends: within 1e-9 of
 * the iteration); the fast pricings' oracle (tests/cost, tests/sched). */
static inline bool fx_same_sim_figures(const struct hx_sim_result *a,
                                       const struct hx_sim_result *b, int ndev) {
  const double rel = 1e-9;
  bool same = a->valid && b->valid && fx_near_rel(a->iteration_s, b->iteration_s, rel) &&
              fx_near_rel(a->pipeline_s, b->pipeline_s, rel) &&
              fx_near_rel(a->compute_s, b->compute_s, rel) &&
              fabs(a->grad_sync_s - b->grad_sync_s) <= rel * a->iteration_s &&
              fabs(a->optimizer_s - b->optimizer_s) <= rel * a->iteration_s &&
              fabs(a->bubble - b->bubble) <= 1e-9 && fx_near_rel(a->mfu, b->mfu, rel);
  for (int r = 0; r < ndev; r++)
    same = same && fx_near_rel(a->busy_s[r], b->busy_s[r], rel);
  return same;
}

#endif
