/* ZeRO-1 (issue 16): the optimizer state of every gradient-sync group split
 * over its members. Against closed forms this test computes itself (the
 * parameter counts from the model's shape, each rank's held and covered
 * parameters from the groups): the shares follow free memory (a 24 GiB
 * device next to 80 GiB ones takes the smaller share), each rank's memory is
 * weights (fp32 master and bf16 copy, as the CUDA target allocates them) and
 * gradients whole plus 8 bytes (AdamW's m and v) per parameter of its shards
 * and of what no group covers, the simulator runs a reduce-scatter and an
 * all-gather per sharded group and a shorter optimizer step, and
 * optimizer_sharding = none keeps 18 bytes per parameter; HexiSeq units
 * split the state evenly. The other kinds (activations, comm buffers,
 * workspace) and the reserve come from the cost model's own per-kind
 * figures (hx_rank_memory_by_kind, issue 25). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir/plan_util.h"
#include "passes/schedule/sched.h"

#include "tests/fixture.h"

enum { L = 4, H = 512, FFN = 1376, HEADS = 8, VOCAB = 1000, SEQ = 256 };

static double layer_params(void) { return 4.0 * H * H + 3.0 * H * FFN + 2.0 * H; }
static double nonlayer_params(void) { return 2.0 * VOCAB * H + H; } /* emb, head, final norm */

/* Two or three devices: a 24 GiB one (rank 0, or ranks 0-1 at TP 2) and
 * 80 GiB ones; one single-stage pipeline per entry of tps. */
static struct hx_plan *two_pipelines(struct hx_ctx *ctx, enum hx_opt_sharding sharding, int tp0) {
  fx_init(ctx);
  fx_model(ctx, "z", L, H, FFN, HEADS, HEADS, VOCAB, SEQ);
  fx_train(ctx, HX_RECOMPUTE_NONE, 8);
  ctx->train.optimizer_sharding = sharding;
  ctx->opt.target = HX_TARGET_CUDA; /* bf16 weights beside the fp32 master */
  int types[] = {0, 1};
  double tflops[] = {100, 100}, mem[] = {24, 80};
  fx_cluster(ctx, 2, tp0, types, tflops, mem, 2, 100e9, 10e9, 1e-5);
  int n = 2 * tp0; /* node 1 has tp0 devices too; only its first is used */
  struct hx_arena *a = &ctx->arena;
  struct hx_plan *p = hx_plan_new(a, n, 2);
  p->strategy = "test";
  int r0[2] = {0, 1}, r1[1] = {tp0};
  hx_pipeline_init(a, &p->pipelines[0], 1);
  hx_stage_init(a, &p->pipelines[0].stages[0], r0, tp0, 0, L, false);
  p->pipelines[0].stages[0].tp = tp0;
  hx_pipeline_init(a, &p->pipelines[1], 1);
  hx_stage_init(a, &p->pipelines[1].stages[0], r1, 1, 0, L, false);
  for (int i = 0; i < 2; i++) {
    p->pipelines[i].micro_batch_size = 1;
    p->pipelines[i].micro_batches = 4;
  }
  hx_plan_fill_devices(a, p, &ctx->model);
  hx_sched_build_groups(ctx, a, p);
  return p;
}

/* Parameters a device of a single-stage pipeline at TP tp holds: the
 * layers' matrices / tp, the norm gains, embedding, head and final norm whole. */
static double held(int tp) { return L * (layer_params() - 2.0 * H) / tp + L * 2.0 * H + nonlayer_params(); }

static double group_params(const struct hx_group *g) {
  if (g->kind == HX_GROUP_UNSPLIT)
    return L * 2.0 * H;
  if (g->layer_begin < 0)
    return nonlayer_params() / g->nslices;
  return L * (layer_params() - 2.0 * H) / g->nslices;
}

/* Rank r's memory besides its model state (weights, gradients, optimizer):
 * activations, comm buffers, workspace, and the reserve. */
static double rest_and_reserve(const struct hx_ctx *ctx, const struct hx_plan *p, int r) {
  double bytes[HX_MEM_NKINDS], rest = HX_MEMORY_RESERVE_BYTES;
  hx_rank_memory_by_kind(ctx, p, r, bytes);
  for (int k = HX_MEM_ACTIVATIONS; k < HX_MEM_NKINDS; k++)
    rest += bytes[k];
  return rest;
}

/* The closed form of rank r's memory: 10 bytes per held parameter (fp32
 * master, bf16 copy, fp32 gradient), 8 per parameter of its shards and of
 * what no sharded group covers. */
static double closed_form_need(const struct hx_ctx *ctx, const struct hx_plan *p, int r, int tp) {
  double mine = held(tp), covered = 0, shard = 0;
  for (int g = 0; g < p->ngroups; g++) {
    const struct hx_group *gr = &p->groups[g];
    for (int i = 0; i < gr->nranks; i++)
      if (gr->ranks[i] == r && gr->shard_ppm) {
        covered += group_params(gr);
        shard += group_params(gr) * gr->shard_ppm[i] / 1e6;
      }
  }
  return 10.0 * mine + 8.0 * (mine - covered + shard) + rest_and_reserve(ctx, p, r);
}

static bool close_to(double x, double y) { return fabs(x - y) <= 1e-9 * fmax(fabs(x), fabs(y)); }

/* Uneven shards follow free memory, and the memory is the closed form. */
static void test_uneven_follow_free_memory(void) {
  struct hx_ctx ctx;
  struct hx_plan *p = two_pipelines(&ctx, HX_SHARD_ZERO1, 1);
  CHECK(p->optimizer_sharding == HX_SHARD_ZERO1);
  /* free memory as the split saw it: before any group had shares */
  struct hx_plan *unsplit = hx_plan_copy(&ctx.arena, p);
  for (int g = 0; g < unsplit->ngroups; g++)
    unsplit->groups[g].shard_ppm = NULL;
  double free_b[2];
  hx_plan_free_bytes(&ctx, unsplit, free_b);
  CHECK(close_to(free_b[0], 24.0 * 1073741824.0 - 10.0 * held(1) - rest_and_reserve(&ctx, unsplit, 0)));
  int sharded = 0;
  for (int g = 0; g < p->ngroups; g++) {
    const struct hx_group *gr = &p->groups[g];
    if (gr->kind != HX_GROUP_GRAD && gr->kind != HX_GROUP_UNSPLIT)
      continue;
    CHECK(gr->shard_ppm != NULL);
    if (!gr->shard_ppm)
      continue;
    sharded++;
    CHECK(gr->nranks == 2 && gr->ranks[0] == 0 && gr->ranks[1] == 1);
    CHECK(gr->shard_ppm[0] + gr->shard_ppm[1] == 1000000);
    CHECK(gr->shard_ppm[1] > gr->shard_ppm[0]); /* the 80 GiB device takes more */
    /* the rule: floor(1e6 x free / total free), the remainder to the most free */
    CHECK(gr->shard_ppm[0] == (int32_t)floor(1e6 * free_b[0] / (free_b[0] + free_b[1])));
  }
  CHECK(sharded >= 3); /* layers, norm gains, embedding and head */
  double need[2];
  CHECK(hx_plan_memory(&ctx, p, need, NULL, NULL));
  for (int r = 0; r < 2; r++) {
    double want = closed_form_need(&ctx, p, r, 1);
    if (!close_to(need[r], want)) {
      fprintf(stderr, "rank %d: memory %.0f, closed form %.0f\n", r, need[r], want);
      CHECK(false);
    }
  }
  hx_arena_free(&ctx.arena);
}

/* TP 2 next to TP 1: lcm slices; each 24 GiB rank is in half the slices
 * and keeps the embedding/head half it does not reduce whole. */
static void test_mixed_tp(void) {
  struct hx_ctx ctx;
  struct hx_plan *p = two_pipelines(&ctx, HX_SHARD_ZERO1, 2);
  double need[4];
  hx_plan_memory(&ctx, p, need, NULL, NULL);
  int tps[4] = {2, 2, 1, 1};
  for (int r = 0; r < 3; r++) {
    double want = closed_form_need(&ctx, p, r, tps[r]);
    if (!close_to(need[r], want)) {
      fprintf(stderr, "tp mix rank %d: memory %.0f, closed form %.0f\n", r, need[r], want);
      CHECK(false);
    }
  }
  CHECK(need[3] == 0); /* unused */
  hx_arena_free(&ctx.arena);
}

/* The simulator: one all-gather per sharded group on each member, and an
 * optimizer step over the shard only (shorter than the unsharded one). */
static void test_simulated(void) {
  struct hx_ctx z, u;
  struct hx_plan *pz = two_pipelines(&z, HX_SHARD_ZERO1, 1);
  struct hx_plan *pu = two_pipelines(&u, HX_SHARD_NONE, 1);
  struct hx_sim_options oz = {.record_events = true, .arena = &z.arena};
  struct hx_sim_options ou = {.record_events = true, .arena = &u.arena};
  hx_simulate(&z, pz, &oz);
  hx_simulate(&u, pu, &ou);
  int sharded = 0, gathers_z = 0, gathers_u = 0;
  double opt_z = 0, opt_u = 0;
  for (int g = 0; g < pz->ngroups; g++)
    sharded += pz->groups[g].shard_ppm != NULL;
  for (int e = 0; e < oz.nevents; e++) {
    gathers_z += oz.events[e].kind == HX_EV_ALLGATHER;
    if (oz.events[e].kind == HX_EV_OPTIMIZER && oz.events[e].rank == 1)
      opt_z = oz.events[e].end_s - oz.events[e].start_s;
  }
  for (int e = 0; e < ou.nevents; e++) {
    gathers_u += ou.events[e].kind == HX_EV_ALLGATHER;
    if (ou.events[e].kind == HX_EV_OPTIMIZER && ou.events[e].rank == 1)
      opt_u = ou.events[e].end_s - ou.events[e].start_s;
  }
  CHECK(gathers_z == 2 * sharded && gathers_u == 0);
  CHECK(opt_u > 0 && opt_z > 0 && opt_z < opt_u);
  hx_arena_free(&z.arena);
  hx_arena_free(&u.arena);
}

/* optimizer_sharding = none: no shards, 18 bytes per parameter. */
static void test_none(void) {
  struct hx_ctx ctx;
  struct hx_plan *p = two_pipelines(&ctx, HX_SHARD_NONE, 1);
  CHECK(p->optimizer_sharding == HX_SHARD_NONE);
  for (int g = 0; g < p->ngroups; g++)
    CHECK(p->groups[g].shard_ppm == NULL);
  double need[2];
  hx_plan_memory(&ctx, p, need, NULL, NULL);
  for (int r = 0; r < 2; r++)
    CHECK(close_to(need[r], 18.0 * held(1) + rest_and_reserve(&ctx, p, r)));
  hx_arena_free(&ctx.arena);
}

/* HexiSeq: a stage of 3 units (tp 1) is 3 weight replicas; zero1 splits
 * each rank's optimizer state over them evenly (no shard_ppm groups), the
 * search's stage price too; none keeps it whole. */
static void test_units(void) {
  for (int on = 0; on < 2; on++) {
    struct hx_ctx ctx;
    fx_init(&ctx);
    fx_model(&ctx, "z", L, H, FFN, HEADS, HEADS, VOCAB, SEQ);
    fx_train(&ctx, HX_RECOMPUTE_NONE, 8);
    ctx.train.optimizer_sharding = on ? HX_SHARD_ZERO1 : HX_SHARD_NONE;
    int types[] = {1}, ranks[] = {0, 1, 2};
    double tflops[] = {100}, mem[] = {80};
    fx_cluster(&ctx, 1, 3, types, tflops, mem, 1, 100e9, 10e9, 1e-5);
    uint64_t rng = 7;
    struct hx_plan *p = hx_plan_new(&ctx.arena, 3, 1);
    hx_pipeline_init(&ctx.arena, &p->pipelines[0], 1);
    struct hx_stage *st = &p->pipelines[0].stages[0];
    hx_stage_init(&ctx.arena, st, ranks, 3, 0, L, false);
    st->tp = 1;
    st->seq_layout = fx_random_layout(&ctx, &rng, ranks, 1, 3);
    p->pipelines[0].micro_batch_size = 1;
    p->pipelines[0].micro_batches = 8;
    hx_sched_build_groups(&ctx, &ctx.arena, p);
    CHECK(p->optimizer_sharding == (on ? HX_SHARD_ZERO1 : HX_SHARD_NONE));
    CHECK(hx_plan_sharded(p) == (on == 1));
    double opt[3];
    hx_plan_optimizer_params(&ctx, p, opt);
    for (int r = 0; r < 3; r++)
      CHECK(close_to(opt[r], on ? held(1) / 3 : held(1)));
    CHECK(close_to(hx_stage_static_bytes(&ctx, st, true, true),
                   6.0 * held(1) + 12.0 * held(1) / (on ? 3 : 1)));
    hx_arena_free(&ctx.arena);
  }
}

int main(void) {
  test_units();
  test_uneven_follow_free_memory();
  test_mixed_tp();
  test_simulated();
  test_none();
  if (failures)
    fprintf(stderr, "test_zero1: %d checks failed\n", failures);
  return failures != 0;
}
