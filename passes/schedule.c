/* schedule: the plan hexic emits.
 *  - --plan=FILE: the plan in the file, as it is, after checking it;
 *  - --strategy=symmetric: the best symmetric (Megatron) plan;
 *  - --strategy=exhaustive: the exact planner (clusters of <= 8 devices);
 *  - otherwise the HexiScale search (passes/sched_search.c), which keeps the
 *    symmetric baseline as a candidate, so hexic is never slower than it.
 * When nothing fits, the run ends with exit 3 and the smallest memory
 * shortfall found. */
#include "../ir/plan_util.h"
#include "passes.h"
#include "sched.h"

/* Defined in passes/plan_load.c. */
struct hx_plan *hx_plan_load(struct hx_ctx *ctx, const char *path);

static struct hx_plan *symmetric_plan(struct hx_ctx *ctx) {
  if (!ctx->baseline)
    return NULL;
  struct hx_plan *p = hx_plan_copy(&ctx->arena, ctx->baseline);
  p->strategy = "symmetric";
  return p;
}

static struct hx_plan *choose_plan(struct hx_ctx *ctx) {
  switch (ctx->opt.strategy) {
  case HX_STRAT_SYMMETRIC:
    return symmetric_plan(ctx);
  case HX_STRAT_EXHAUSTIVE:
    return hx_sched_exhaustive(ctx);
  default:
    return hx_sched_search(ctx);
  }
}

bool hx_pass_schedule(struct hx_ctx *ctx) {
  if (!ctx->has_model || !ctx->has_train || ctx->cluster.ndevices <= 0)
    return true;
  if (ctx->opt.plan_file) {
    ctx->plan = hx_plan_load(ctx, ctx->opt.plan_file);
    return ctx->plan != NULL;
  }
  if (ctx->opt.strategy == HX_STRAT_EXHAUSTIVE &&
      ctx->cluster.ndevices > HX_EXHAUSTIVE_MAX_DEVICES) {
    hx_error_plain("--strategy=exhaustive plans clusters of at most %d devices; this one has %d",
                   HX_EXHAUSTIVE_MAX_DEVICES, ctx->cluster.ndevices);
    return false;
  }
  ctx->plan = choose_plan(ctx);
  if (!ctx->plan) {
    hx_report_no_plan(ctx);
    return false;
  }
  return true;
}
