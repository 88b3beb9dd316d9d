/* Every pass of hexic, in one place. compiler/pipeline.c lists them in the
 * order they run; each returns false when it reported errors (the driver then
 * stops with the pass's exit code). */
#ifndef HX_PASSES_H
#define HX_PASSES_H

#include <stdio.h>

#include "ir/hexic.h"

/* Front end */
bool hx_pass_parse(struct hx_ctx *ctx);         /* files -> AST (grammar/) */
bool hx_pass_sema(struct hx_ctx *ctx);          /* AST -> model, train, cluster IR */
bool hx_pass_model_stats(struct hx_ctx *ctx);   /* parameters, FLOPs, activation bytes */
bool hx_pass_cluster_table(struct hx_ctx *ctx); /* device-to-device bandwidth/latency */

/* Planning */
bool hx_pass_baseline(struct hx_ctx *ctx);      /* best symmetric (Megatron) plan */
bool hx_pass_schedule(struct hx_ctx *ctx);      /* the asymmetric plan */
bool hx_pass_simulate(struct hx_ctx *ctx);      /* event simulation of the chosen plan */

/* ---- symmetric plans and infeasibility (baseline.c) ------------------------
 * A Megatron-style plan over all devices: rank r = (pp_i * dp + dp_i) * tp +
 * tp_i (TP innermost, then DP, then PP), equal layers per stage, equal
 * micro-batches per pipeline. NULL when the shape is not legal (tp crosses a
 * node or does not divide the heads, pp does not divide the layers, the batch
 * does not split). */
struct hx_plan *hx_symmetric_plan(struct hx_ctx *ctx, int dp, int tp, int pp, int64_t mbs,
                                  bool recompute);
/* Reports (hx_error_plain) that no plan fits: the smallest memory shortfall
 * over every symmetric shape, on which device, and what would help. */
void hx_report_no_plan(struct hx_ctx *ctx);

/* Output: hx_pass_emit is codegen/'s (codegen/codegen.h), the floor above. */

/* Verifiers run after every pass in debug and test builds: they check the
 * invariants the next pass relies on and abort with exit 70 if one fails. */
void hx_verify_model(const struct hx_ctx *ctx);
void hx_verify_cluster(const struct hx_ctx *ctx);
void hx_verify_plan(const struct hx_ctx *ctx, const struct hx_plan *plan);

#endif
