/* Everything hexic writes into -o DIR: the emit pass (codegen/emit.c) calls
 * these in order. codegen/ is the floor above passes/: it reads a finished
 * plan; no pass includes it. */
#ifndef HX_CODEGEN_H
#define HX_CODEGEN_H

#include <stdbool.h>
#include <stdio.h>

#include "ir/hexic.h"

/* plan.json: the plan, its simulated figures and the baseline (docs/plan-json.md documents it). */
bool hx_emit_plan_json(const struct hx_ctx *ctx, FILE *f);
/* report.md: the human-readable table. */
bool hx_emit_report(const struct hx_ctx *ctx, FILE *f);
/* trace.json: the simulated iteration as Chrome Trace Event JSON. sim holds
 * the plan's simulation with its events recorded (hx_simulate with
 * record_events); the emit pass runs it once for both writers below. */
struct hx_sim_options;
bool hx_emit_trace(const struct hx_ctx *ctx, const struct hx_sim_options *sim, FILE *f);
/* plan.svg: the cluster, the pipelines' stages and the simulated iteration's
 * timeline, one lane per device, from sim as for hx_emit_trace. */
bool hx_emit_svg(const struct hx_ctx *ctx, const struct hx_sim_options *sim, FILE *f);
/* rank_NNNN.c for every rank, Makefile, launch.sh, slurm.sbatch into dir.
 * Returns HX_EXIT_OK, HX_EXIT_USAGE for a target or plan shape code
 * generation does not support (with an error printed), or HX_EXIT_INPUT when
 * a file cannot be written. */
enum hx_exit hx_emit_programs(const struct hx_ctx *ctx, const char *dir);

/* The emit pass (compiler/pipeline.c runs it last, under -o DIR): every
 * file above into ctx->opt.out_dir, then the summary on stdout. */
bool hx_pass_emit(struct hx_ctx *ctx);

/* The few summary lines printed on stdout: plan, iteration time, tokens/s,
 * MFU, speed-up over the baseline. */
void hx_print_summary(const struct hx_ctx *ctx, FILE *f);

#endif
