/* simulate: one simulated iteration of the chosen plan and of both baselines,
 * into plan->sim (the figures every output prints). */
#include "passes/cost/cost.h"
#include "passes.h"

bool hx_pass_simulate(struct hx_ctx *ctx) {
  if (ctx->baseline)
    hx_simulate(ctx, ctx->baseline, NULL);
  if (ctx->baseline_subset)
    hx_simulate(ctx, ctx->baseline_subset, NULL);
  if (ctx->plan)
    hx_simulate(ctx, ctx->plan, NULL);
  if (ctx->plan && !ctx->plan->sim.valid)
    hx_internal_error("the chosen plan could not be simulated");
  return true;
}
