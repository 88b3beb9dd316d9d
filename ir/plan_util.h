/* Building plans: allocation, copies, and the per-device table every planner
 * must fill the same way. All memory comes from the compilation's arena. */
#ifndef HX_PLAN_UTIL_H
#define HX_PLAN_UTIL_H

#include <limits.h>
#include <stdio.h>

#include "arena.h"
#include "hexic.h"

/* A plan over ndevices ranks with npipelines empty pipelines, every device
 * unused (pipeline = stage = -1), sim arrays allocated, schedule 1F1B. */
struct hx_plan *hx_plan_new(struct hx_arena *a, int ndevices, int npipelines);
/* Gives a pipeline nstages zeroed stages. */
void hx_pipeline_init(struct hx_arena *a, struct hx_pipeline *p, int nstages);
/* Fills a stage: ranks[0..n) (copied; ranks[i] gets TP rank i), tp = n,
 * cp = hp = 1, layers [begin, end), leader = ranks[0]. */
void hx_stage_init(struct hx_arena *a, struct hx_stage *st, const int *ranks, int n,
                   int layer_begin, int layer_end, bool recompute);
/* A deep copy (pipelines, stages, devices, groups, sim arrays). */
struct hx_plan *hx_plan_copy(struct hx_arena *a, const struct hx_plan *src);
/* Rebuilds plan->devices from the pipelines: pipeline, stage, TP rank; with
 * cp = hp = 1 every used device holds the whole sequence and its TP share of
 * the heads. Devices in no stage become unused (-1). seq_len and heads come
 * from the model. */
void hx_plan_fill_devices(struct hx_arena *a, struct hx_plan *plan, const struct hx_model *m);
/* What a layer -1 group reduces (HX_HOLDS_* mask): g->holds when set, else
 * the embedding when every member sits on a first stage and the head when
 * every member sits on a last stage (plan->devices must be filled). 0 for
 * groups of decoder layers. */
unsigned hx_group_holds(const struct hx_plan *plan, const struct hx_group *g);
/* Sum over pipelines of micro_batches * micro_batch_size. */
int64_t hx_plan_batch(const struct hx_plan *plan);
/* Number of devices some stage uses. */
int hx_plan_used_devices(const struct hx_plan *plan);
/* The stage of pipeline p that holds decoder layer `layer`; layer < 0 stands
 * for the embedding (the first stage), HX_LAYER_HEAD for the final norm and
 * LM head (the last stage). NULL when no stage holds the layer. */
#define HX_LAYER_HEAD INT_MAX
const struct hx_stage *hx_stage_holding(const struct hx_pipeline *p, int layer);
/* Whether a gradient group (HX_GROUP_GRAD / UNSPLIT) reduces `layer`'s
 * weights; layer < 0 and HX_LAYER_HEAD are the layer -1 groups. False for
 * every other kind. */
bool hx_grad_group_covers(const struct hx_group *g, int layer);
/* A group kind as plan.json spells it ("tp", "grad", "unsplit", "cp_ring",
 * "hp_a2a"); "?" for a value outside the enum. */
const char *hx_group_kind_name(enum hx_group_kind kind);
/* Greatest common divisor / least common multiple of positive ints. */
int64_t hx_gcd(int64_t a, int64_t b);
int64_t hx_lcm(int64_t a, int64_t b);

#endif
