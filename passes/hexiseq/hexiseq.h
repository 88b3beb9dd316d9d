/* HexiSeq (issue 7): asymmetric context and head parallelism for sequences
 * too long for one device, combined with a DP/TP/PP frame.
 *
 *   hexiseq_plan.c    frames (dp x tp x pp, units of tp devices per stage),
 *                     layouts -> plans (device table, CP rings, HP groups
 *                     with ragged split tables), the symmetric layouts of the
 *                     baselines (Ring, Ulysses, USP)
 *   hexiseq_search.c  the three-stage scheduler: METIS all-to-all groups
 *                     along fast links, capability splits of the sequence
 *                     (compute, sqrt of compute, memory-capped), coordinate
 *                     descent of every unit's tokens and heads; the
 *                     baselines' own layouts are candidates, so the result is
 *                     never slower than the best of them in the simulator.
 *
 * Every choice is deterministic (METIS gets METIS_OPTION_SEED). Costs come
 * from passes/cost/cost.h only. */
#ifndef HX_HEXISEQ_H
#define HX_HEXISEQ_H

#include <stdbool.h>
#include <stdint.h>

#include "passes/cost/cost.h"
#include "ir/hexic.h"

/* True when one sequence's activations keep every symmetric DP/TP/PP shape
 * (one sequence per micro-batch, any recompute setting allowed) out of some
 * device's memory although the weights alone would fit: the sequence must be
 * split. */
bool hx_hexiseq_needed(const struct hx_ctx *ctx);

/* True when no symmetric DP/TP/PP shape is legal at all for the cluster,
 * model and batch (hx_hexiseq_needed cannot tell then). */
bool hx_hexiseq_no_symmetric_shape(const struct hx_ctx *ctx);

/* The best HexiSeq plan (allocated in ctx->arena, simulated, strategy
 * "hexiseq"), with plan->baselines the best Ring, Ulysses and USP plans
 * (and ctx->baseline when there is one), each simulated. ctx->baseline
 * becomes the fastest of those baselines, the figure plan.json and the
 * report compare against. NULL after reporting an error when no layout fits
 * memory. */
struct hx_plan *hx_hexiseq_schedule(struct hx_ctx *ctx);
/* hx_hexiseq_schedule without the error: NULL when no layout fits (the
 * `auto` strategy's fallback, whose caller reports its own shortfall). */
struct hx_plan *hx_hexiseq_try(struct hx_ctx *ctx);
/* A HexiSeq plan carries one sequence per micro-batch (a sequence is what
 * its units split): warns, at the train block's micro_batch, when that asks
 * for more, so the setting is not dropped silently. */
void hx_hexiseq_warn_micro_batch(const struct hx_ctx *ctx, const struct hx_plan *plan);

/* ---- frames and plans (hexiseq_plan.c) ---------------------------------- */

/* A DP/TP/PP frame: dp pipelines of pp stages, each stage `units` units of
 * tp devices. mixed: stages get a compute-balanced mix of nodes (HexiSeq);
 * otherwise Megatron's rank order (TP, then CP/HP, then DP, then PP). */
struct hx_seq_frame {
  int dp, tp, pp, units;
  bool recompute, mixed;
  int **cell; /* [pipeline * pp + stage][unit * tp + k]: ranks */
  /* [pipeline * (pp + 1) + stage]: the first layer of each stage, the last
   * entry the layer count. Even (Megatron) unless the search sets them. */
  int *bounds;
};

/* The layers [*begin, *end) of cell c (pipeline * pp + stage). */
void hx_seq_frame_layers(const struct hx_seq_frame *f, int c, int *begin, int *end);

/* NULL when the shape is not legal: tp must divide heads and kv_heads and
 * fit the nodes, pp the layers, dp the global batch, dp * tp * pp the
 * devices. */
struct hx_seq_frame *hx_seq_frame_new(struct hx_arena *a, const struct hx_ctx *ctx, int dp, int tp,
                                      int pp, bool recompute, bool mixed);

/* A symmetric layout: cp groups of hp consecutive units, even zig-zag
 * tokens, (heads / tp) / hp heads per device. NULL when hp does not divide
 * heads / tp or cp * hp != units. Links are filled for `ranks`. */
struct hx_seq_layout *hx_seq_symmetric_layout(struct hx_arena *a, const struct hx_ctx *ctx,
                                              const int *ranks, int tp, int cp, int hp);

/* Sets every unit's front / back split to half its tokens (zig-zag). */
void hx_seq_zigzag(struct hx_seq_layout *l);

/* The plan of a frame whose stage c (pipeline * pp + stage) has layout
 * layouts[c]: stages, device table (token ranges, heads, cp/hp ranks),
 * CP_RING and HP_A2A groups. Not simulated. */
struct hx_plan *hx_seq_plan_build(struct hx_arena *a, const struct hx_ctx *ctx,
                                  const struct hx_seq_frame *f,
                                  const struct hx_seq_layout *const *layouts, const char *strategy,
                                  const char *description);

/* A plan and the layouts of its stages copied into a (deep). */
struct hx_plan *hx_seq_plan_copy(struct hx_arena *a, const struct hx_plan *src);

/* ---- the scheduler's pieces (hexiseq_search.c), exposed for tests ------- */

enum hx_seq_rule { HX_SPLIT_COMPUTE, HX_SPLIT_SQRT, HX_SPLIT_MEMORY, HX_SPLIT_RULES };

/* Groups the units of a stage (ranks as in a frame cell) into ngroups
 * all-to-all groups along fast links, two ways, both by the shared METIS
 * wrapper hx_sched_partition (fixed seed): group_of[u] with groups of equal
 * size (METIS's empty or undersized groups filled from the largest ones by
 * the units that keep the most bandwidth inside groups, sizes differing by
 * at most one), by_compute_of[u] with groups of about equal compute (the
 * wrapper's refill only). The search tries both. */
void hx_seq_partition(struct hx_arena *a, const struct hx_ctx *ctx, const int *ranks, int tp,
                      int units, int ngroups, int *group_of, int *by_compute_of);

/* A layout from a grouping and a split rule: group token totals by the
 * rule, tokens inside a group by compute, heads by compute. */
struct hx_seq_layout *hx_seq_rule_layout(struct hx_arena *a, const struct hx_ctx *ctx,
                                         const struct hx_stage *st, const int *group_of,
                                         int ngroups, enum hx_seq_rule rule, bool first, bool last,
                                         int64_t mbs, int64_t in_flight);

/* Coordinate descent of the stage's layout (st->seq_layout, mutated in
 * place): moves tokens and heads off the bottleneck unit while the stage's
 * forward + backward time drops and memory fits. Returns that time. */
double hx_seq_refine(const struct hx_ctx *ctx, struct hx_stage *st, bool first, bool last,
                     int64_t mbs, int64_t in_flight);

#endif
