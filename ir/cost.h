/* The cost model: compute, memory and communication of a plan's pieces, in
 * seconds and bytes. Every planner and the simulator price things through
 * these functions only, so one formula change moves every decision alike.
 *
 * Conventions
 *  - "stage" arguments are struct hx_stage (ir/plan.h); `first` / `last` say
 *    whether the stage holds the embedding / the final norm and LM head.
 *  - A stage's TP group runs in lockstep: its time is the slowest member's.
 *  - Device time = FLOPs / (tflops * 1e12 * efficiency).
 *  - Backward = 2 x forward FLOPs; full recompute adds one more forward.
 *  - Communication is alpha-beta: latency + bytes / bandwidth, per device pair
 *    from the cluster table; collectives run at the slowest link of the group
 *    and pay the largest latency of the group once per ring step.
 *  - Everything here is a closed form: cheap enough for a search to call it
 *    millions of times, and pure (no allocation, no global state). */
#ifndef HX_COST_H
#define HX_COST_H

#include <stdbool.h>
#include <stdint.h>

#include "hexic.h"

/* Memory every GPU loses before hexic's tensors: the CUDA context, NCCL
 * buffers and allocator fragmentation. 1.5 GiB is what a PyTorch + NCCL
 * process typically shows on nvidia-smi before the first tensor, plus
 * headroom for fragmentation. */
#define HX_MEMORY_RESERVE_BYTES (1.5 * 1073741824.0)

/* When a GPU block gives no mem_bandwidth, the optimizer step (memory bound)
 * assumes this many peak FLOPs per byte of memory bandwidth: A100 312 TFLOP/s
 * over 2.0 TB/s is 153, RTX 4090 165 over 1.0 is 165, H100 989 over 3.35 is
 * 295; 150 is the conservative (slower-memory) end. */
#define HX_ASSUMED_FLOPS_PER_BYTE 150.0

/* ---- sizes ------------------------------------------------------------- */

/* Bytes of one activation / communicated element: 2 for bf16, 4 for fp32. */
double hx_elem_bytes(const struct hx_train *train);
/* Bytes of model state per parameter: weights, gradients and optimizer.
 * bf16 + AdamW: 2 (bf16 weight) + 4 (fp32 gradient accumulated over
 * micro-batches, Megatron's main_grad) + 4 (fp32 master weight) + 4 + 4
 * (Adam m and v) = 18. fp32 + AdamW: 4 + 4 + 4 + 4 = 16. SGD drops m and v. */
double hx_state_bytes_per_param(const struct hx_train *train);
/* Bytes the optimizer step reads and writes per parameter (memory-bound):
 * AdamW bf16 reads grad, master, m, v (16) and writes master, m, v, bf16
 * weight (14) = 30; fp32 reads 16 and writes 12 = 28. */
double hx_optimizer_traffic_per_param(const struct hx_train *train);

/* ---- per stage --------------------------------------------------------- */

/* Parameters a stage holds in total (all TP ranks together). With tied
 * embeddings and more than one stage, the last stage keeps its own copy of
 * tok_emb for the LM head, as Megatron does. */
int64_t hx_stage_params(const struct hx_model *m, int layer_begin, int layer_end, bool first,
                        bool last);
/* Forward FLOPs of a stage for `tokens` tokens (all TP ranks together). */
double hx_stage_fwd_flops(const struct hx_model *m, int layer_begin, int layer_end, bool first,
                          bool last, int64_t tokens);
/* Slowest member's effective FLOP/s (peak x efficiency). */
double hx_stage_min_flops(const struct hx_cluster *c, const struct hx_stage *st);

/* Compute-only time of one decoder layer's forward for one micro-batch of
 * mbs sequences on this stage (FLOPs / tp on the slowest member). */
double hx_layer_compute_s(const struct hx_ctx *ctx, const struct hx_stage *st, int64_t mbs);
/* Time of the 2 (forward) TP all-reduces of one decoder layer's activations. */
double hx_layer_tp_comm_s(const struct hx_ctx *ctx, const struct hx_stage *st, int64_t mbs);
/* One micro-batch forward of the whole stage: compute + TP all-reduces
 * (2 per layer, Megatron; 1 for the vocab-parallel embedding). */
double hx_stage_fwd_s(const struct hx_ctx *ctx, const struct hx_stage *st, bool first, bool last,
                      int64_t mbs);
/* One micro-batch backward: 2x forward compute, 2 TP all-reduces per layer,
 * plus, when st->recompute, one more forward with its own all-reduces. */
double hx_stage_bwd_s(const struct hx_ctx *ctx, const struct hx_stage *st, bool first, bool last,
                      int64_t mbs);
/* hx_stage_fwd_s, hx_stage_bwd_s and the per-layer split of the backward,
 * priced in one call: the simulator and the closed-form estimate read them
 * all. with_comm false prices every transfer inside the stage at 0 (the
 * simulator's zero_comm). bwd = layers x layer_bwd + head_bwd; head_bwd is 0
 * unless `last`. */
struct hx_stage_times {
  double fwd, layer_bwd, head_bwd, bwd;
};
void hx_stage_times(const struct hx_ctx *ctx, const struct hx_stage *st, bool first, bool last,
                    int64_t mbs, bool with_comm, struct hx_stage_times *out);
/* The backward split per piece (hx_stage_times gives both at once):
 * backward time of the head part (last stage: final norm + LM head + loss)
 * and of one decoder layer; the embedding's is 0 (a scatter-add). */
double hx_head_bwd_s(const struct hx_ctx *ctx, const struct hx_stage *st, int64_t mbs);
double hx_layer_bwd_s(const struct hx_ctx *ctx, const struct hx_stage *st, int64_t mbs);

/* Micro-batches whose activations a stage keeps at its peak: 1F1B keeps
 * min(p - s, m) on stage s of p; GPipe keeps all m. */
int64_t hx_in_flight(enum hx_pp_schedule schedule, int stage_index, int nstages,
                     int64_t micro_batches);
/* Per device: weights + gradients + optimizer state of its TP shard. */
double hx_stage_static_bytes(const struct hx_ctx *ctx, const struct hx_stage *st, bool first,
                             bool last);
/* Per device: activations of `in_flight` micro-batches of mbs sequences.
 * Without recompute each keeps act_bytes_layer per token per layer; with full
 * recompute each keeps only the layer inputs, plus one layer's full
 * activations for the micro-batch being recomputed. The last stage adds the
 * logits of one micro-batch. Sharded over TP (sequence parallel, Megatron). */
double hx_stage_act_bytes(const struct hx_ctx *ctx, const struct hx_stage *st, bool first,
                          bool last, int64_t mbs, int64_t in_flight);
/* static + activations + HX_MEMORY_RESERVE_BYTES: what one device of the stage
 * needs at its peak. */
double hx_stage_memory_bytes(const struct hx_ctx *ctx, const struct hx_stage *st, bool first,
                             bool last, int64_t mbs, int64_t in_flight);
/* The smallest memory of the stage's devices, in bytes. */
double hx_stage_memory_capacity(const struct hx_cluster *c, const struct hx_stage *st);

/* Optimizer step of one device of the stage (memory bound: state traffic /
 * mem_bandwidth, or / (peak FLOP/s / HX_ASSUMED_FLOPS_PER_BYTE) when the GPU
 * block gives none). The slowest member. */
double hx_stage_optimizer_s(const struct hx_ctx *ctx, const struct hx_stage *st, bool first,
                            bool last);

/* ---- communication ----------------------------------------------------- */

/* Point to point a -> b: latency + bytes / bandwidth; 0 when a == b. */
double hx_p2p_s(const struct hx_cluster *c, int a, int b, double bytes);
/* Ring all-reduce of `bytes` (each member's buffer) over ranks[0..n):
 * 2(n-1)/n * bytes / min_bw + 2(n-1) * max_lat; 0 when n <= 1. */
double hx_allreduce_s(const struct hx_cluster *c, const int *ranks, int n, double bytes);
/* Pipelined ring broadcast of `bytes` from any member: bytes / min_bw +
 * (n-1) * max_lat; 0 when n <= 1. */
double hx_broadcast_s(const struct hx_cluster *c, const int *ranks, int n, double bytes);
/* All-to-all where each member holds `bytes` and keeps 1/n of it:
 * (n-1)/n * bytes / min_bw + (n-1) * max_lat; 0 when n <= 1. */
double hx_alltoall_s(const struct hx_cluster *c, const int *ranks, int n, double bytes);
/* Slowest bandwidth and largest latency over all pairs of ranks[0..n). */
void hx_group_links(const struct hx_cluster *c, const int *ranks, int n, double *min_bw,
                    double *max_lat);

/* Activation bytes sent between stages for one micro-batch (mbs x seq x hidden). */
double hx_hop_bytes(const struct hx_ctx *ctx, int64_t mbs);
/* A pipeline hop: from->leader sends to to->leader, which broadcasts inside
 * its TP group. Same cost forward (activations) and backward (gradients). */
double hx_hop_s(const struct hx_ctx *ctx, const struct hx_stage *from, const struct hx_stage *to,
                int64_t mbs);
/* The member of `to` that makes hx_hop_s cheapest as to's leader (ties: the
 * lowest TP rank). Leaves `to` unchanged. */
int hx_best_leader(const struct hx_ctx *ctx, const struct hx_stage *from, const struct hx_stage *to,
                   int64_t mbs);

/* ---- gradient synchronisation ------------------------------------------ */

/* fp32 gradient bytes of the weights outside the decoder layers that a
 * layer -1 group holding `holds` (HX_HOLDS_* mask) reduces: the embedding,
 * and/or the final norm and LM head. Each is charged to exactly one set of
 * groups. */
double hx_nonlayer_grad_bytes(const struct hx_ctx *ctx, unsigned holds);
/* plan.h's lcm slicing of the weights of `layer` (as hx_stage_holding
 * takes it) for plans that carry no gradient groups: with TP degrees
 * t_1..t_k of the stages holding it, nslices = lcm(t_i), and slice j is
 * all-reduced among TP rank j*t_i/nslices of each weight replica (a stage
 * with a layout holds one per unit). Returns nslices; *width gets the members
 * of every slice. */
int64_t hx_grad_slicing(const struct hx_plan *plan, int layer, int *width);
/* The `width` members of slice k of nslices, into ranks. */
void hx_grad_slice_ranks(const struct hx_plan *plan, int layer, int64_t nslices, int64_t k,
                         int *ranks);
/* Time to synchronise decoder layer `layer`'s gradients across the plan's
 * pipelines. Uses the plan's HX_GROUP_GRAD / HX_GROUP_UNSPLIT groups for that
 * layer when it has any; otherwise the lcm slicing of plan.h: with TP degrees
 * t_1..t_k, nslices = lcm(t_i), slice j is all-reduced among the TP rank
 * j*t_i/nslices of every pipeline. Members of several slices do them one
 * after another, so the time is the busiest member's sum. layer -1 means the
 * embedding and LM head weights. 0 with one pipeline. */
double hx_grad_sync_layer_s(const struct hx_ctx *ctx, const struct hx_plan *plan, int layer);

/* Weight replicas a stage holds: its units with a context x head layout
 * (each unit of tp devices keeps the stage's weights), else 1. */
int hx_stage_replicas(const struct hx_stage *st);
/* True when some weights live on more than one device of the same TP rank
 * (several pipelines or a stage with several units): gradients need a sync. */
bool hx_plan_replicates_weights(const struct hx_plan *plan);

/* ---- whole plans ------------------------------------------------------- */

/* Model FLOPs of one iteration, without recompute: 3 x forward. */
double hx_model_flops_per_iteration(const struct hx_ctx *ctx);
/* Sum of peak FLOP/s (tflops x 1e12, no efficiency) of the devices a plan uses. */
double hx_plan_peak_flops(const struct hx_ctx *ctx, const struct hx_plan *plan);

/* Memory check of every used device of a plan. Returns true when all fit;
 * *shortfall gets the largest (needed - capacity) over devices (<= 0 when all
 * fit) and *worst_rank that device (either may be NULL). */
bool hx_plan_memory_fits(const struct hx_ctx *ctx, const struct hx_plan *plan, double *shortfall,
                         int *worst_rank);
/* The same check, and need[r] (when need is not NULL: plan->ndevices
 * entries) what rank r needs at its peak, 0 for unused ranks. */
bool hx_plan_memory(const struct hx_ctx *ctx, const struct hx_plan *plan, double *need,
                    double *shortfall, int *worst_rank);

/* Closed-form iteration estimate for searches: per pipeline the 1F1B (or
 * GPipe) makespan (m - 1) * max_s(f_s + b_s) + sum_s(f_s + b_s + 2 hop_s);
 * then, per stage, when its gradient all-reduces end (they start as the last
 * micro-batch's backward frees each layer, stage by stage from the last, and
 * queue on the stage's devices: the sync the backward does not hide); then
 * the slowest optimizer step. Scratch memory only (freed on return). */
double hx_estimate_iteration_s(const struct hx_ctx *ctx, const struct hx_plan *plan);

#endif
