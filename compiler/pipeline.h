#ifndef HX_PIPELINE_H
#define HX_PIPELINE_H

#include "../passes/passes.h"

/* Runs the passes in order; returns the process exit code. */
int hx_run_pipeline(struct hx_ctx *ctx);
bool hx_pass_exists(const char *name);
const char *hx_pass_name(int i); /* NULL past the last */

#endif
