/* Issue 18 item 3: TP groups inside a node. Two 4-GPU nodes of one type in
 * one pipeline, the network between them a little faster than the nodes'
 * own links (17 vs 16 GB/s) but with 25x their latency: a link-ordered
 * chain pairs GPUs across the nodes, which the cost model prices slower
 * (every TP all-reduce pays the network's latency). Phase 2 must lay each
 * TP group inside a node, and the completed plan must be no slower under
 * the simulator than any cross-node grouping of the same shape: same TP
 * degrees in the same order, same layers, batches and recompute, every way
 * of drawing each group's GPUs from the two nodes that puts some group on
 * both. Those groupings are enumerated here, by node counts per stage
 * (GPUs of one node are interchangeable), and simulated through
 * hx_simulate. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "ir/plan_util.h"
#include "passes/cost/cost.h"
#include "passes/schedule/sched.h"

#include "tests/fixture.h"

enum { PER_NODE = 4, NDEV = 2 * PER_NODE };

static void two_nodes(struct hx_ctx *ctx) {
  fx_init(ctx);
  fx_model(ctx, "m", 8, 1024, 2816, 4, 4, 32000, 2048);
  fx_train(ctx, HX_RECOMPUTE_NONE, 8);
  int types[2] = {0, 0};
  double tflops[1] = {2}, mem[1] = {16};
  fx_cluster(ctx, 2, PER_NODE, types, tflops, mem, 1, 16e9, 17e9, 2e-6);
  struct hx_cluster *c = &ctx->cluster;
  for (int k = 0; k < 2; k++) {
    c->nodes[k].bandwidth = 16e9;
    c->nodes[k].latency = 2e-6;
  }
  for (int a = 0; a < NDEV; a++)
    for (int b = 0; b < NDEV; b++)
      if (a != b && c->devices[a].node != c->devices[b].node)
        c->latency[a * NDEV + b] = 50e-6;
}

static bool node_local(const struct hx_cluster *c, const struct hx_stage *st) {
  for (int i = 1; i < st->ndevices; i++)
    if (c->devices[st->devices[i]].node != c->devices[st->devices[0]].node)
      return false;
  return true;
}

/* The plan's pipeline with stage s drawing from_node0[s] GPUs from node 0
 * (the lowest unused ones) and the rest from node 1, leaders and gradient
 * groups as the planner sets them, simulated. */
static double simulate_grouping(struct hx_ctx *ctx, const struct hx_plan *plan,
                                const int *from_node0) {
  const struct hx_pipeline *src = &plan->pipelines[0];
  struct hx_plan *p = hx_plan_new(&ctx->arena, NDEV, 1);
  p->strategy = "test";
  p->schedule = plan->schedule;
  struct hx_pipeline *pl = &p->pipelines[0];
  hx_pipeline_init(&ctx->arena, pl, src->nstages);
  pl->micro_batch_size = src->micro_batch_size;
  pl->micro_batches = src->micro_batches;
  int next[2] = {0, PER_NODE};
  for (int s = 0; s < src->nstages; s++) {
    const struct hx_stage *st = &src->stages[s];
    int ranks[NDEV], n = 0;
    for (int i = 0; i < st->tp; i++)
      ranks[n++] = i < from_node0[s] ? next[0]++ : next[1]++;
    hx_stage_init(&ctx->arena, &pl->stages[s], ranks, n, st->layer_begin, st->layer_end,
                  st->recompute);
  }
  hx_sched_set_leaders(ctx, pl);
  hx_plan_fill_devices(&ctx->arena, p, &ctx->model);
  hx_sched_build_groups(ctx, &ctx->arena, p);
  CHECK(hx_simulate(ctx, p, NULL));
  return p->sim.iteration_s;
}

struct enumeration {
  struct hx_ctx *ctx;
  const struct hx_plan *plan;
  int from_node0[NDEV];
  double best_cross;
  int crossing;
};

/* Every count of node-0 GPUs per stage (left: node 0's GPUs not yet drawn),
 * those with a stage on both nodes simulated. */
static void enumerate(struct enumeration *e, int s, int left0, int left1) {
  const struct hx_pipeline *p = &e->plan->pipelines[0];
  if (s == p->nstages) {
    bool crosses = false;
    for (int k = 0; k < p->nstages; k++)
      crosses |= e->from_node0[k] > 0 && e->from_node0[k] < p->stages[k].tp;
    if (!crosses)
      return;
    e->crossing++;
    e->best_cross = fmin(e->best_cross, simulate_grouping(e->ctx, e->plan, e->from_node0));
    return;
  }
  int tp = p->stages[s].tp;
  for (int k = 0; k <= tp && k <= left0; k++) {
    if (tp - k > left1)
      continue;
    e->from_node0[s] = k;
    enumerate(e, s + 1, left0 - k, left1 - (tp - k));
  }
}

static void check_layout(enum hx_tp_layout layout) {
  struct hx_ctx ctx;
  two_nodes(&ctx);
  int devs[NDEV];
  for (int r = 0; r < NDEV; r++)
    devs[r] = r;
  struct hx_plan *sk = hx_plan_new(&ctx.arena, NDEV, 1);
  sk->strategy = "test";
  CHECK(hx_sched_phase2(&ctx, &ctx.arena, devs, NDEV, 1, layout, 3, 0, 1, &sk->pipelines[0]));
  struct hx_plan *plan = hx_sched_complete(&ctx, &ctx.arena, sk, NULL);
  CHECK(plan != NULL);
  if (!plan)
    return;
  int tp_groups = 0;
  for (int s = 0; s < plan->pipelines[0].nstages; s++) {
    const struct hx_stage *st = &plan->pipelines[0].stages[s];
    if (st->tp > 1)
      tp_groups++;
    if (!node_local(&ctx.cluster, st))
      fprintf(stderr, "layout %d: stage %d (tp %d) spans both nodes\n", layout, s, st->tp);
    CHECK(node_local(&ctx.cluster, st));
  }
  CHECK(tp_groups > 0); /* the shape has TP groups to place */
  hx_sched_build_groups(&ctx, &ctx.arena, plan);
  CHECK(hx_simulate(&ctx, plan, NULL));
  struct enumeration e = {.ctx = &ctx, .plan = plan, .best_cross = INFINITY};
  enumerate(&e, 0, PER_NODE, PER_NODE);
  CHECK(e.crossing > 0);
  if (!(plan->sim.iteration_s <= e.best_cross * (1 + 1e-12)))
    fprintf(stderr, "layout %d: plan %.9g s, a cross-node grouping %.9g s\n", layout,
            plan->sim.iteration_s, e.best_cross);
  CHECK(plan->sim.iteration_s <= e.best_cross * (1 + 1e-12));
  hx_arena_free(&ctx.arena);
}

int main(void) {
  check_layout(HX_LAYOUT_THROUGHPUT);
  check_layout(HX_LAYOUT_WIDE);
  if (failures) {
    fprintf(stderr, "%d checks failed\n", failures);
    return 1;
  }
  printf("sched placement: all checks passed\n");
  return 0;
}
