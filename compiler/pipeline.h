#ifndef HX_PIPELINE_H
#define HX_PIPELINE_H

#include "passes/passes.h"

/* Zeroes ctx, starts its arena (free it with hx_arena_free) and sets the
 * option defaults: --target=cpu, --strategy=auto, --search-budget=30. */
void hx_ctx_init(struct hx_ctx *ctx);
/* Runs the passes in order; returns the process exit code. */
int hx_run_pipeline(struct hx_ctx *ctx);
bool hx_pass_exists(const char *name);
/* Whether the pipeline runs the pass named name under opt: --check stops
 * after the front end, and emit runs only with -o. */
bool hx_pass_runs(const struct hx_options *opt, const char *name);

#endif
