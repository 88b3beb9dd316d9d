/* Plan invariants every later pass relies on. A violation is a bug in the
 * planner that built the plan (exit 70), never a user error: plans read from
 * a file are checked with located errors by passes/planload/plan_load.c first. */
#include <stdlib.h>

#include "passes/cost/cost.h"
#include "ir/plan_util.h"
#include "passes.h"

static void verify_stage(const struct hx_ctx *ctx, const struct hx_plan *plan, int i, int s,
                         int *owner) {
  const struct hx_stage *st = &plan->pipelines[i].stages[s];
  /* A context x head layout may have groups of different sizes: then the
   * stage is tp x its units (cp groups, the largest of hp units). */
  int grid = st->seq_layout ? st->seq_layout->nunits : st->cp * st->hp;
  if (st->ndevices <= 0 || st->tp <= 0 || st->cp <= 0 || st->hp <= 0 ||
      st->tp * grid != st->ndevices)
    hx_internal_error("plan: pipeline %d stage %d has %d devices for tp %d x cp %d x hp %d", i, s,
                      st->ndevices, st->tp, st->cp, st->hp);
  bool leader_inside = false;
  for (int k = 0; k < st->ndevices; k++) {
    int r = st->devices[k];
    if (r < 0 || r >= ctx->cluster.ndevices)
      hx_internal_error("plan: pipeline %d stage %d uses rank %d of %d", i, s, r,
                        ctx->cluster.ndevices);
    if (owner[r] >= 0)
      hx_internal_error("plan: rank %d is used twice", r);
    owner[r] = i;
    if (plan->devices[r].pipeline != i || plan->devices[r].stage != s)
      hx_internal_error("plan: device table of rank %d disagrees with its stage", r);
    leader_inside |= r == st->leader;
  }
  if (!leader_inside)
    hx_internal_error("plan: leader %d of pipeline %d stage %d is not in the stage", st->leader, i,
                      s);
}

static void verify_pipeline(const struct hx_ctx *ctx, const struct hx_plan *plan, int i,
                            int *owner) {
  const struct hx_pipeline *p = &plan->pipelines[i];
  if (p->nstages <= 0 || p->micro_batches <= 0 || p->micro_batch_size <= 0)
    hx_internal_error("plan: pipeline %d is empty", i);
  int next = 0; /* layers covered exactly once, contiguously, in order */
  for (int s = 0; s < p->nstages; s++) {
    const struct hx_stage *st = &p->stages[s];
    if (st->layer_begin != next || st->layer_end < st->layer_begin)
      hx_internal_error("plan: pipeline %d stage %d covers layers [%d, %d), expected to start at %d",
                        i, s, st->layer_begin, st->layer_end, next);
    next = st->layer_end;
    verify_stage(ctx, plan, i, s, owner);
  }
  if (next != ctx->model.layers)
    hx_internal_error("plan: pipeline %d covers %d of %lld layers", i, next,
                      (long long)ctx->model.layers);
}

/* Every token exactly once per CP ring, every head once per HP group. */
static void verify_seq_tables(const struct hx_ctx *ctx, const struct hx_plan *plan) {
  if (!plan->ngroups)
    return;
  struct hx_arena scratch;
  hx_arena_init(&scratch);
  const char *why = hx_seq_check_plan(&scratch, ctx, plan);
  if (why)
    hx_internal_error("plan: %s", why);
  hx_arena_free(&scratch);
}

void hx_verify_plan(const struct hx_ctx *ctx, const struct hx_plan *plan) {
  if (plan->ndevices != ctx->cluster.ndevices || plan->npipelines <= 0)
    hx_internal_error("plan: %d devices for a cluster of %d, %d pipelines", plan->ndevices,
                      ctx->cluster.ndevices, plan->npipelines);
  /* scratch, freed below: ctx is const here and verifiers leave no trace */
  int *owner = malloc(sizeof(int) * (size_t)(plan->ndevices > 0 ? plan->ndevices : 1));
  if (!owner)
    hx_internal_error("out of memory");
  for (int r = 0; r < plan->ndevices; r++)
    owner[r] = -1;
  for (int i = 0; i < plan->npipelines; i++)
    verify_pipeline(ctx, plan, i, owner);
  for (int r = 0; r < plan->ndevices; r++)
    if (owner[r] < 0 && plan->devices[r].pipeline >= 0)
      hx_internal_error("plan: unused rank %d has a pipeline in the device table", r);
  if (hx_plan_batch(plan) != ctx->train.global_batch)
    hx_internal_error("plan: pipelines hold %lld sequences, the global batch is %lld",
                      (long long)hx_plan_batch(plan), (long long)ctx->train.global_batch);
  for (int g = 0; g < plan->ngroups; g++)
    for (int k = 0; k < plan->groups[g].nranks; k++)
      if (plan->groups[g].ranks[k] < 0 || plan->groups[g].ranks[k] >= plan->ndevices)
        hx_internal_error("plan: group %d names rank %d", g, plan->groups[g].ranks[k]);
  free(owner);
  verify_seq_tables(ctx, plan);
}
