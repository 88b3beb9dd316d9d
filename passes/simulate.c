/* simulate: one simulated iteration of the chosen plan and of both baselines,
 * into plan->sim (the figures every output prints). */
#include "passes/cost/cost.h"
#include "passes.h"

bool hx_pass_simulate(struct hx_ctx *ctx) {
  /* The baselines were simulated in full (no options) where they were
   * chosen, and nothing changes them after: the deterministic simulator
   * would give the same figures again, and each simulation grows with the
   * batch (4096 micro-batches on each of 16 pipelines: 0.2 s apiece). */
  if (ctx->baseline && !ctx->baseline->sim.valid)
    hx_simulate(ctx, ctx->baseline, NULL);
  if (ctx->baseline_subset && !ctx->baseline_subset->sim.valid)
    hx_simulate(ctx, ctx->baseline_subset, NULL);
  if (ctx->plan)
    hx_simulate(ctx, ctx->plan, NULL);
  if (ctx->plan && !ctx->plan->sim.valid)
    hx_internal_error("the chosen plan could not be simulated");
  return true;
}
