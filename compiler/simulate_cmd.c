/* `hexic simulate PLAN.json FILE...`: the ordinary pipeline with the plan
 * taken from PLAN.json (--plan), stopped before emit, then the summary. */
#include <stdio.h>

#include "codegen/codegen.h"
#include "ir/plan_util.h"
#include "pipeline.h"
#include "simulate_cmd.h"

int hx_simulate_command(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "hexic: error: usage: hexic simulate PLAN.json FILE...\n");
    return HX_EXIT_USAGE;
  }
  struct hx_ctx ctx;
  hx_ctx_init(&ctx);
  ctx.opt.plan_file = argv[1];
  ctx.opt.inputs = (const char **)argv + 2;
  ctx.opt.ninputs = argc - 2;
  int rc = hx_run_pipeline(&ctx);
  if (rc == HX_EXIT_OK)
    hx_print_summary(&ctx, stdout);
  hx_arena_free(&ctx.arena);
  return rc;
}
