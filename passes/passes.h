/* Every pass of hexic, in one place. compiler/pipeline.c lists them in the
 * order they run; each returns false when it reported errors (the driver then
 * stops with the pass's exit code). */
#ifndef HX_PASSES_H
#define HX_PASSES_H

#include <stdio.h>

#include "../ir/hexic.h"

/* Front end */
bool hx_pass_parse(struct hx_ctx *ctx);         /* files -> AST (grammar/) */
bool hx_pass_sema(struct hx_ctx *ctx);          /* AST -> model, train, cluster IR */
bool hx_pass_model_stats(struct hx_ctx *ctx);   /* parameters, FLOPs, activation bytes */
bool hx_pass_cluster_table(struct hx_ctx *ctx); /* device-to-device bandwidth/latency */

/* Planning */
bool hx_pass_baseline(struct hx_ctx *ctx);      /* best symmetric (Megatron) plan */
bool hx_pass_schedule(struct hx_ctx *ctx);      /* the asymmetric plan */
bool hx_pass_simulate(struct hx_ctx *ctx);      /* event simulation of the chosen plan */

/* Output */
bool hx_pass_emit(struct hx_ctx *ctx);          /* plan.json, report, trace, per-rank code */

/* Verifiers run after every pass in debug and test builds: they check the
 * invariants the next pass relies on and abort with exit 70 if one fails. */
void hx_verify_model(const struct hx_ctx *ctx);
void hx_verify_cluster(const struct hx_ctx *ctx);
void hx_verify_plan(const struct hx_ctx *ctx, const struct hx_plan *plan);

/* Stable textual dumps used by --print-ir / --print-after and golden tests. */
void hx_dump_ast(const struct hx_ctx *ctx, FILE *f);
void hx_dump_model(const struct hx_ctx *ctx, FILE *f);
void hx_dump_cluster(const struct hx_ctx *ctx, FILE *f);
void hx_dump_plan(const struct hx_ctx *ctx, const struct hx_plan *plan, FILE *f);

#endif
