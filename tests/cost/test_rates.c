/* A gpu type's measured rates (issue 25), which hexic-profile writes.
 * backward_efficiency: the FLOP model prices a
 * decoder layer's backward, and the LM head's, at the backward's own rate on
 * its 2x the forward's FLOPs, so a backward need not cost exactly two
 * forwards (on the CPU kernels hexic-profile measured 1.6-1.7 forwards).
 *  - none set (0, IR built by hand) or set to the forward's efficiency: a
 *    backward is exactly 2x a forward, bit for bit, as before the field;
 *  - set: 2 x FLOPs / (tflops x backward_efficiency x e(t)) + 2 x overhead,
 *    with the TP curve and layer_overhead as the forward has them;
 *  - the LM head's backward at the same rate;
 *  - a TP group of two types: the forward's pace is the slowest forward,
 *    the backward's the slowest backward (members may differ);
 *  - a HexiSeq stage's backward (outside attention, ring attention, head)
 *    at the backward's rate too.
 * head_efficiency: the LM head's forward and backward at it.
 * copy_bandwidth: ZeRO-1's weight pack and unpack (4 x the element size a
 * parameter) at it, at the optimizer's rate when none is given, and the
 * simulated optimizer step of a ZeRO-1 plan moves by it.
 * The IR is built by hand (tests/fixture.h). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "ir/plan_util.h"
#include "passes/cost/cost.h"
#include "passes/schedule/sched.h"

#include "tests/fixture.h"

/* Llama-2-7B's shape on nodes of 2 GPUs, node k of type types[k]. */
static void two_nodes(struct hx_ctx *ctx, const int *types, int ntypes) {
  fx_init(ctx);
  fx_model(ctx, "7b", 32, 4096, 11008, 32, 32, 32000, 4096);
  fx_train(ctx, HX_RECOMPUTE_NONE, 64);
  double tflops[2] = {312, 312}, mem[2] = {80, 80};
  fx_cluster(ctx, 2, 2, types, tflops, mem, ntypes, 300e9, 25e9, 2e-6);
  for (int t = 0; t < ntypes; t++)
    ctx->cluster.gpus[t].efficiency = 0.5;
}

/* One decoder layer's forward and backward compute on the ranks given (no
 * TP collectives). */
static void layer_times(struct hx_ctx *ctx, const int *ranks, int tp, double *fwd, double *bwd) {
  struct hx_stage st;
  hx_stage_init(&ctx->arena, &st, ranks, tp, 0, 1, false);
  struct hx_stage_times t;
  hx_stage_times(ctx, &st, false, false, 1, false, &t);
  *fwd = hx_layer_compute_s(ctx, &st, 1);
  *bwd = t.layer_bwd;
}

/* The LM head's backward on a stage of the ranks given holding the last layer. */
static double head_bwd(struct hx_ctx *ctx, const int *ranks, int tp) {
  struct hx_stage st;
  hx_stage_init(&ctx->arena, &st, ranks, tp, 31, 32, false);
  return hx_head_bwd_s(ctx, &st, 1);
}

static void test_default_is_two_forwards(void) {
  static const int types[2] = {0, 0};
  struct hx_ctx ctx;
  two_nodes(&ctx, types, 1);
  struct hx_gpu_type *g = &ctx.cluster.gpus[0];
  g->layer_overhead = 3e-5;
  int ranks[1] = {0};
  double f, b;
  layer_times(&ctx, ranks, 1, &f, &b);
  CHECK(b == 2 * f); /* none set: the model before the field, exactly */
  double head = head_bwd(&ctx, ranks, 1);
  g->backward_efficiency = g->efficiency; /* what sema fills in by default */
  double f2, b2;
  layer_times(&ctx, ranks, 1, &f2, &b2);
  CHECK(f2 == f && b2 == b);
  CHECK(head_bwd(&ctx, ranks, 1) == head);
  /* the head's backward: 2x its forward FLOPs at the forward's rate */
  NEAR(head, 2 * ctx.model.flops_head_fwd * 4096 / (312e12 * 0.5));
  hx_arena_free(&ctx.arena);
}

static void test_backward_rate(void) {
  static const int types[2] = {0, 0};
  struct hx_ctx ctx;
  two_nodes(&ctx, types, 1);
  struct hx_gpu_type *g = &ctx.cluster.gpus[0];
  int one[1] = {0}, pair[2] = {0, 1};
  double f, b, flops = ctx.model.flops_layer_fwd * 4096;
  g->backward_efficiency = 0.625;
  layer_times(&ctx, one, 1, &f, &b);
  NEAR(f, flops / (312e12 * 0.5));
  NEAR(b, 2 * flops / (312e12 * 0.625));
  NEAR(b / f, 2 * 0.5 / 0.625); /* 1.6 forwards */
  NEAR(head_bwd(&ctx, one, 1), 2 * ctx.model.flops_head_fwd * 4096 / (312e12 * 0.625));
  /* with the TP curve and the overhead, which the backward pays twice */
  g->tp_efficiency[0] = 1, g->tp_efficiency[1] = 0.8, g->ntp_efficiency = 2;
  g->layer_overhead = 1e-4;
  layer_times(&ctx, pair, 2, &f, &b);
  NEAR(f, flops / 2 / (312e12 * 0.5 * 0.8) + 1e-4);
  NEAR(b, 2 * (flops / 2 / (312e12 * 0.625 * 0.8) + 1e-4));
  /* the head runs whole on every TP member */
  NEAR(head_bwd(&ctx, pair, 2), 2 * ctx.model.flops_head_fwd * 4096 / (312e12 * 0.625));
  hx_arena_free(&ctx.arena);
}

/* A TP group of a type with the faster forward and the slower backward and
 * one the other way round: each phase goes at its slowest member's pace. */
static void test_mixed_group(void) {
  static const int types[2] = {0, 1};
  struct hx_ctx ctx;
  two_nodes(&ctx, types, 2);
  struct hx_gpu_type *a = &ctx.cluster.gpus[0], *b_type = &ctx.cluster.gpus[1];
  a->efficiency = 0.6, a->backward_efficiency = 0.4;
  b_type->efficiency = 0.5, b_type->backward_efficiency = 0.7;
  int ranks[2] = {1, 2}; /* device 1 of node 0 (type 0), device 0 of node 1 (type 1) */
  double f, b, flops = ctx.model.flops_layer_fwd * 4096 / 2;
  layer_times(&ctx, ranks, 2, &f, &b);
  NEAR(f, flops / (312e12 * 0.5));     /* type 1's forward */
  NEAR(b, 2 * flops / (312e12 * 0.4)); /* type 0's backward */
  NEAR(head_bwd(&ctx, ranks, 2), 2 * ctx.model.flops_head_fwd * 4096 / (312e12 * 0.4));
  hx_arena_free(&ctx.arena);
}

/* head_efficiency: the LM head's forward and backward (final norm, head
 * GEMM, cross-entropy) at their own rate, the layers' unchanged; none
 * given: the forward's and the backward's rates. */
static void test_head_rate(void) {
  static const int types[2] = {0, 0};
  struct hx_ctx ctx;
  two_nodes(&ctx, types, 1);
  struct hx_gpu_type *g = &ctx.cluster.gpus[0];
  g->backward_efficiency = 0.625;
  int ranks[1] = {0};
  struct hx_stage st;
  hx_stage_init(&ctx.arena, &st, ranks, 1, 31, 32, false);
  struct hx_stage_times none, own;
  hx_stage_times(&ctx, &st, false, true, 1, false, &none);
  double head = ctx.model.flops_head_fwd * 4096, layer = ctx.model.flops_layer_fwd * 4096;
  /* the last stage's forward op runs the head's forward and backward */
  NEAR(none.fwd, layer / (312e12 * 0.5) + head / (312e12 * 0.5) + 2 * head / (312e12 * 0.625));
  CHECK(none.head_bwd == 0);
  g->head_efficiency = 0.4;
  hx_stage_times(&ctx, &st, false, true, 1, false, &own);
  NEAR(own.fwd, layer / (312e12 * 0.5) + 3 * head / (312e12 * 0.4));
  NEAR(hx_head_bwd_s(&ctx, &st, 1), 2 * head / (312e12 * 0.4));
  CHECK(own.layer_bwd == none.layer_bwd);
  hx_arena_free(&ctx.arena);
}

/* A small model on two devices of one type, one single-stage pipeline
 * each, the optimizer state sharded over them (ZeRO-1). */
static struct hx_plan *zero1_plan(struct hx_ctx *ctx) {
  fx_init(ctx);
  fx_model(ctx, "z", 4, 512, 1376, 8, 8, 1000, 256);
  fx_train(ctx, HX_RECOMPUTE_NONE, 8);
  ctx->train.optimizer_sharding = HX_SHARD_ZERO1;
  static const int types[2] = {0, 0};
  double tflops[1] = {100}, mem[1] = {80};
  fx_cluster(ctx, 2, 1, types, tflops, mem, 1, 100e9, 10e9, 1e-5);
  struct hx_arena *a = &ctx->arena;
  struct hx_plan *p = hx_plan_new(a, 2, 2);
  p->strategy = "test";
  for (int i = 0; i < 2; i++) {
    hx_pipeline_init(a, &p->pipelines[i], 1);
    hx_stage_init(a, &p->pipelines[i].stages[0], &i, 1, 0, 4, false);
    p->pipelines[i].micro_batch_size = 1;
    p->pipelines[i].micro_batches = 4;
  }
  hx_plan_fill_devices(a, p, &ctx->model);
  hx_sched_build_groups(ctx, a, p);
  return p;
}

static void test_copy_rate(void) {
  struct hx_ctx ctx;
  struct hx_plan *p = zero1_plan(&ctx);
  struct hx_gpu_type *g = &ctx.cluster.gpus[0];
  g->mem_bandwidth = 1e11; /* the optimizer's rate */
  double params = 1e9, bytes = params * 4 * hx_elem_bytes(&ctx.train);
  NEAR(hx_rank_weight_repack_s(&ctx, 0, params), bytes / 1e11); /* none given */
  CHECK(hx_plan_sharded(p));
  hx_simulate(&ctx, p, NULL);
  double before = p->sim.iteration_s;
  g->copy_bandwidth = 8e11;
  NEAR(hx_rank_weight_repack_s(&ctx, 0, params), bytes / 8e11);
  hx_simulate(&ctx, p, NULL);
  CHECK(p->sim.valid);
  /* the step repacks the sharded groups' weights, nearly all the stage's
   * (not the norm gains): 7/8 of that time saved, the optimizer step being
   * the iteration's last */
  double whole = hx_stage_device_params(&ctx.model, &p->pipelines[0].stages[0], true, true);
  double most = whole * 4 * hx_elem_bytes(&ctx.train) * (1 / 1e11 - 1 / 8e11);
  double saved = before - p->sim.iteration_s;
  CHECK(saved > 0.99 * most && saved <= most * (1 + 1e-9));
  hx_arena_free(&ctx.arena);
}

/* A HexiSeq stage (3 units of tp 1, a random layout): its backward compute
 * at the backward's rate, outside attention and in the ring's attention
 * alike; the forward unchanged. Without communication both are compute
 * alone, so the backward scales by efficiency / backward_efficiency. */
static void test_seq_stage(void) {
  struct hx_ctx ctx;
  fx_init(&ctx);
  fx_model(&ctx, "s", 4, 512, 1376, 8, 8, 1000, 4096);
  fx_train(&ctx, HX_RECOMPUTE_NONE, 8);
  static const int types[1] = {0};
  int ranks[3] = {0, 1, 2};
  double tflops[1] = {100}, mem[1] = {80};
  fx_cluster(&ctx, 1, 3, types, tflops, mem, 1, 100e9, 10e9, 1e-5);
  struct hx_gpu_type *g = &ctx.cluster.gpus[0];
  g->efficiency = 0.5;
  uint64_t rng = 11;
  struct hx_stage st;
  hx_stage_init(&ctx.arena, &st, ranks, 3, 0, 4, false);
  st.tp = 1;
  struct hx_seq_layout *l = fx_random_layout(&ctx, &rng, ranks, 1, 3);
  st.seq_layout = l;
  struct hx_seq_stage_cost none, same, own;
  hx_seq_stage_cost(&ctx, &st, 2, false, &none);
  g->backward_efficiency = 0.5;
  hx_seq_layout_links(&ctx, ranks, l);
  hx_seq_stage_cost(&ctx, &st, 2, false, &same);
  CHECK(same.layer_bwd == none.layer_bwd && same.head_bwd == none.head_bwd);
  g->backward_efficiency = 0.625;
  hx_seq_layout_links(&ctx, ranks, l);
  hx_seq_stage_cost(&ctx, &st, 2, false, &own);
  CHECK(own.layer_fwd == none.layer_fwd && own.head_fwd == none.head_fwd);
  CHECK(none.layer_bwd > 0 && none.head_bwd > 0);
  NEAR(own.layer_bwd, none.layer_bwd * 0.5 / 0.625);
  NEAR(own.head_bwd, none.head_bwd * 0.5 / 0.625);
  struct hx_seq_stage_cost head;
  g->head_efficiency = 0.4; /* the head at its own rate, the layers as they were */
  hx_seq_layout_links(&ctx, ranks, l);
  hx_seq_stage_cost(&ctx, &st, 2, false, &head);
  NEAR(head.head_fwd, none.head_fwd * 0.5 / 0.4);
  NEAR(head.head_bwd, none.head_bwd * 0.5 / 0.4);
  CHECK(head.layer_fwd == own.layer_fwd && head.layer_bwd == own.layer_bwd);
  hx_arena_free(&ctx.arena);
}

int main(void) {
  test_default_is_two_forwards();
  test_backward_rate();
  test_mixed_group();
  test_head_rate();
  test_copy_rate();
  test_seq_stage();
  if (failures) {
    fprintf(stderr, "%d checks failed\n", failures);
    return 1;
  }
  printf("cost rates: all checks passed\n");
  return 0;
}
