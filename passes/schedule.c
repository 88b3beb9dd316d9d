/* schedule: the plan hexic emits. For now the symmetric baseline (the
 * HexiScale search of issue 4 replaces the body of choose_plan); a plan given
 * with --plan=FILE is taken as it is, after checking it. When nothing fits,
 * the run ends with exit 3 and the smallest memory shortfall found. */
#include "../ir/plan_util.h"
#include "passes.h"

static struct hx_plan *choose_plan(struct hx_ctx *ctx) {
  if (!ctx->baseline)
    return NULL;
  struct hx_plan *p = hx_plan_copy(&ctx->arena, ctx->baseline);
  p->strategy = "symmetric";
  return p;
}

bool hx_pass_schedule(struct hx_ctx *ctx) {
  if (!ctx->has_model || !ctx->has_train || ctx->cluster.ndevices <= 0)
    return true;
  if (ctx->opt.plan_file) {
    ctx->plan = hx_plan_load(ctx, ctx->opt.plan_file);
    return ctx->plan != NULL;
  }
  ctx->plan = choose_plan(ctx);
  if (!ctx->plan) {
    hx_report_no_plan(ctx);
    return false;
  }
  return true;
}
