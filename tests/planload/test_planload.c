/* plan.json round trips of random HexiSeq plans (issue 7 item 1): random
 * layouts (ragged groups, uneven tokens and heads, any front/back split,
 * empty units) are built into plans, written by hx_emit_plan_json, read back
 * by hx_plan_load, and must come back with the same layouts, device tables,
 * group tables and simulated figures. The IR is filled by hand.
 * usage: test_planload WORK_DIR */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/codegen.h"
#include "ir/cost_seq.h"
#include "ir/plan_util.h"
#include "ir/sim.h"
#include "passes/hexiseq.h"
#include "passes/passes.h"

#include "tests/check.h"

static uint64_t rng = 0x9E3779B97F4A7C15ULL;
static int below(int n) {
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return (int)(rng % (uint64_t)n);
}

static void set_model(struct hx_ctx *ctx) {
  struct hx_model *m = &ctx->model;
  m->name = "roundtrip";
  m->layers = 4;
  m->hidden = 512;
  m->ffn = 1365;
  m->heads = 16;
  m->kv_heads = 4;
  m->vocab = 32000;
  m->seq_len = 1000; /* not a power of two on purpose */
  ctx->has_model = ctx->has_train = true;
  ctx->train.precision = HX_PREC_BF16;
  ctx->train.optimizer = HX_OPT_ADAMW;
  ctx->train.recompute = HX_RECOMPUTE_FULL;
  ctx->train.global_batch = 4;
  CHECK(hx_pass_model_stats(ctx));
}

/* Four nodes of four GPUs, two types, fast links inside a node. */
static void set_cluster(struct hx_ctx *ctx) {
  struct hx_cluster *c = &ctx->cluster;
  struct hx_arena *a = &ctx->arena;
  enum { NODES = 4, PER_NODE = 4, N = NODES * PER_NODE };
  c->ngpus = 2;
  c->gpus = HX_NEW_ARRAY(a, struct hx_gpu_type, 2);
  for (int t = 0; t < 2; t++) {
    c->gpus[t].name = t ? "slow" : "fast";
    c->gpus[t].tflops = t ? 100 : 300;
    c->gpus[t].memory_bytes = (int64_t)80 << 30;
    c->gpus[t].efficiency = 1.0;
    c->gpus[t].mem_bandwidth = 2e12;
  }
  c->nnodes = NODES;
  c->nodes = HX_NEW_ARRAY(a, struct hx_node, NODES);
  c->ndevices = N;
  c->devices = HX_NEW_ARRAY(a, struct hx_device, N);
  c->bandwidth = HX_NEW_ARRAY(a, double, N *N);
  c->latency = HX_NEW_ARRAY(a, double, N *N);
  for (int k = 0; k < NODES; k++) {
    c->nodes[k].name = hx_sprintf(a, "n%d", k);
    c->nodes[k].gpu_type = k % 2;
    c->nodes[k].gpus = PER_NODE;
    c->nodes[k].first_device = k * PER_NODE;
  }
  for (int r = 0; r < N; r++) {
    c->devices[r].rank = r;
    c->devices[r].name = hx_sprintf(a, "g:%d", r);
    c->devices[r].node = r / PER_NODE;
    c->devices[r].gpu_type = (r / PER_NODE) % 2;
    c->devices[r].local_index = r % PER_NODE;
    for (int q = 0; q < N; q++) {
      bool same = q / PER_NODE == r / PER_NODE;
      c->bandwidth[r * N + q] = r == q ? 0 : same ? 100e9 : 10e9;
      c->latency[r * N + q] = r == q ? 0 : 1e-6;
    }
  }
}

/* Random groups in random ring order; tokens (some units none), front
 * chunks anywhere in [0, tokens] (all-front and all-back included), heads
 * of each group's TP share split unevenly (some units none). */
static struct hx_seq_layout *random_layout(struct hx_ctx *ctx, const int *ranks, int tp,
                                           int units) {
  int ngroups = 1 + below(units);
  struct hx_seq_layout *l = hx_seq_layout_new(&ctx->arena, tp, units, ngroups);
  int *group_of = HX_NEW_ARRAY(&ctx->arena, int, units),
      *perm = HX_NEW_ARRAY(&ctx->arena, int, units);
  for (int u = 0; u < units; u++) {
    group_of[u] = u < ngroups ? u : below(ngroups);
    perm[u] = u;
  }
  for (int u = units - 1; u > 0; u--) { /* ring order not the unit order */
    int v = below(u + 1), t = perm[u];
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
    l->tokens[u] = u + 1 == units ? left : below((int)left / 2 + 1);
    left -= l->tokens[u];
    int pick = below(4); /* all front, all back, or anywhere between */
    l->first[u] = pick == 0 ? 0 : pick == 1 ? l->tokens[u] : below((int)l->tokens[u] + 1);
  }
  for (int g = 0; g < ngroups; g++) {
    int64_t h = share;
    for (int x = l->group_start[g]; x < l->group_start[g + 1]; x++) {
      int u = l->order[x];
      l->heads[u] = x + 1 == l->group_start[g + 1] ? (int)h : below((int)h + 1);
      h -= l->heads[u];
    }
  }
  hx_seq_layout_links(ctx, ranks, l);
  return l;
}

static bool same_layout(const struct hx_seq_layout *a, const struct hx_seq_layout *b,
                        int64_t seq_len) {
  if (!a || !b || a->tp != b->tp || a->nunits != b->nunits || a->ngroups != b->ngroups)
    return false;
  bool same = !memcmp(a->order, b->order, sizeof(int) * (size_t)a->nunits) &&
              !memcmp(a->group_start, b->group_start, sizeof(int) * (size_t)(a->ngroups + 1));
  for (int u = 0; same && u < a->nunits; u++) {
    struct hx_range ra[2], rb[2];
    int na = hx_seq_unit_ranges(a, seq_len, u, ra), nb = hx_seq_unit_ranges(b, seq_len, u, rb);
    same = a->tokens[u] == b->tokens[u] && a->heads[u] == b->heads[u] && na == nb &&
           !memcmp(ra, rb, sizeof ra[0] * (size_t)na);
  }
  return same;
}

static bool same_devices(const struct hx_plan *a, const struct hx_plan *b) {
  for (int r = 0; r < a->ndevices; r++) {
    const struct hx_device_plan *x = &a->devices[r], *y = &b->devices[r];
    if (x->pipeline != y->pipeline || x->stage != y->stage || x->tp_rank != y->tp_rank ||
        x->cp_rank != y->cp_rank || x->hp_rank != y->hp_rank || x->nseq != y->nseq ||
        x->heads.begin != y->heads.begin || x->heads.end != y->heads.end ||
        memcmp(x->seq, y->seq, sizeof x->seq[0] * (size_t)x->nseq))
      return false;
  }
  return true;
}

static bool same_groups(const struct hx_plan *a, const struct hx_plan *b) {
  if (a->ngroups != b->ngroups)
    return false;
  for (int g = 0; g < a->ngroups; g++) {
    const struct hx_group *x = &a->groups[g], *y = &b->groups[g];
    long cells = (long)x->nranks * x->nranks;
    if (x->kind != y->kind || x->nranks != y->nranks ||
        memcmp(x->ranks, y->ranks, sizeof(int) * (size_t)x->nranks) ||
        !x->split_table != !y->split_table ||
        (x->split_table && memcmp(x->split_table, y->split_table, sizeof(int64_t) * (size_t)cells)))
      return false;
  }
  return true;
}

/* Writes the plan as plan.json at path, reads it back, compares. */
static void round_trip(struct hx_ctx *ctx, struct hx_plan *p, const char *path, int trial) {
  CHECK(hx_simulate(ctx, p, NULL));
  ctx->plan = p;
  FILE *f = fopen(path, "w");
  CHECK(f != NULL);
  if (!f)
    return;
  CHECK(hx_emit_plan_json(ctx, f));
  fclose(f);
  struct hx_plan *q = hx_plan_load(ctx, path);
  CHECK(q != NULL);
  if (!q) {
    fprintf(stderr, "trial %d: %s not read back\n", trial, path);
    return;
  }
  hx_verify_plan(ctx, q);
  for (int i = 0; i < p->npipelines; i++)
    for (int s = 0; s < p->pipelines[i].nstages; s++)
      CHECK(same_layout(p->pipelines[i].stages[s].seq_layout, q->pipelines[i].stages[s].seq_layout,
                        ctx->model.seq_len));
  CHECK(same_devices(p, q));
  CHECK(same_groups(p, q));
  CHECK(hx_simulate(ctx, q, NULL));
  /* a lone chunk where the zig-zag cursors meet reads back as a front
   * chunk: the same tokens, the causal pairs summed in another order */
  NEAR(q->sim.iteration_s, p->sim.iteration_s);
  for (int r = 0; r < p->ndevices; r++)
    NEAR(q->sim.peak_memory[r], p->sim.peak_memory[r]);
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: test_planload WORK_DIR\n");
    return 2;
  }
  struct hx_ctx ctx;
  memset(&ctx, 0, sizeof ctx);
  hx_arena_init(&ctx.arena);
  set_model(&ctx);
  set_cluster(&ctx);
  const char *path = hx_sprintf(&ctx.arena, "%s/plan.json", argv[1]);
  int done = 0;
  for (int trial = 0; trial < 120; trial++) {
    int tp = 1 << below(3), pp = 1 + below(2), dp = 1 + below(2);
    ctx.train.global_batch = dp * 2;
    struct hx_seq_frame *f =
        hx_seq_frame_new(&ctx.arena, &ctx, dp, tp, pp, trial % 3 == 0, trial % 2);
    if (!f)
      continue;
    const struct hx_seq_layout **ls =
        HX_NEW_ARRAY(&ctx.arena, const struct hx_seq_layout *, dp *pp);
    for (int c = 0; c < dp * pp; c++)
      ls[c] = random_layout(&ctx, f->cell[c], tp, f->units);
    struct hx_plan *p = hx_seq_plan_build(&ctx.arena, &ctx, f, ls, "hexiseq", "random");
    CHECK(hx_seq_check_plan(&ctx.arena, &ctx, p) == NULL);
    round_trip(&ctx, p, path, trial);
    done++;
  }
  CHECK(done >= 100);
  printf("%d random HexiSeq plans round-tripped through plan.json\n", done);
  hx_arena_free(&ctx.arena);
  return failures != 0;
}
