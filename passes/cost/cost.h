/* The cost model: compute, memory and communication of a plan's pieces, in
 * seconds and bytes. Every planner and the simulator price things through
 * these functions only, so one formula change moves every decision alike.
 *
 * Conventions
 *  - "stage" arguments are struct hx_stage (ir/plan.h); `first` / `last` say
 *    whether the stage holds the embedding / the final norm and LM head.
 *  - A stage's TP group runs in lockstep: its time is the slowest member's.
 *  - Device time = FLOPs / (tflops * 1e12 * efficiency).
 *  - Tensor parallelism (issue 18): a decoder layer on a TP group of degree
 *    t takes, on each member, FLOPs / (t * tflops * efficiency * e(t)) +
 *    layer_overhead (e the GPU type's tp_efficiency curve, the overhead
 *    what TP does not shrink), plus its TP all-reduces on the group's
 *    slowest link with its largest latency. A GPU type with a measured
 *    profile at degree t takes the profile's times instead (hx_profile_at).
 *  - Backward = 2 x forward FLOPs, at the GPU type's backward_efficiency
 *    (its efficiency when none is given: then exactly 2 x the forward's
 *    time); full recompute adds one more forward.
 *  - Communication is alpha-beta: latency + bytes / bandwidth, per device pair
 *    from the cluster table; collectives run at the slowest link of the group
 *    and pay the largest latency of the group once per ring step.
 *  - Everything here is a closed form: cheap enough for a search to call it
 *    millions of times, and pure (no allocation, no global state). */
#ifndef HX_COST_H
#define HX_COST_H

#include <stdbool.h>
#include <stdint.h>

#include "ir/hexic.h"

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

/* The default tp_efficiency curve (degrees 1, 2, 4, 8, 16) of a gpu block
 * that gives none: e(t) = (2/3)^(log2(t) / 2), the power law through e(1) =
 * 1 and e(4) = 2/3, the one measurement issue 18 reports (Llama layers on
 * A100s at TP 4: 6.6 ms measured per layer where FLOPs / (4 x tflops x
 * efficiency) said 4.4 ms). Each doubling keeps 82% of the per-device rate,
 * so more TP never looks free; measure the curve with hexic-profile. */
#define HX_TP_DEFAULT_EFFICIENCY {1.0, 0.816496580927726, 2.0 / 3.0, 0.544331053951817, 4.0 / 9.0}

/* ---- sizes ------------------------------------------------------------- */

/* Bytes of one activation / communicated element: 2 for bf16, 4 for fp32. */
double hx_elem_bytes(const struct hx_train *train);
/* Bytes of model state per parameter: weights, gradients and optimizer.
 * bf16 + AdamW: 2 (bf16 weight) + 4 (fp32 gradient accumulated over
 * micro-batches, Megatron's main_grad) + 4 (fp32 master weight) + 4 + 4
 * (Adam m and v) = 18. fp32 + AdamW: 4 + 4 + 4 + 4 = 16. SGD drops m and v. */
double hx_state_bytes_per_param(const struct hx_train *train);
/* The optimizer's part of hx_state_bytes_per_param, what ZeRO-1 shards:
 * AdamW bf16 12 (fp32 master, m, v), fp32 8 (m, v: the fp32 weight is the
 * master, as on the CPU runtime); SGD bf16 4 (master), fp32 0. */
double hx_optimizer_state_bytes_per_param(const struct hx_train *train);
/* Bytes the optimizer step reads and writes per parameter (memory-bound),
 * as the runtime's step does them: AdamW bf16 reads grad, master, m, v (16)
 * and writes master, m, v, bf16 weight (14) = 30; fp32 reads 16 and writes
 * 12 = 28; then the global norm reads the fp32 gradient (4) and clipping
 * reads and writes it (8, charged always: early steps clip): 42 and 40. */
double hx_optimizer_traffic_per_param(const struct hx_train *train);
/* ZeRO-1, after the step: a rank packs the weights of its sharded groups
 * (params of them) for the all-gather and unpacks the gathered ones (read
 * and write each time, in the plan's precision: rt_sync_gather_weights), at
 * the GPU type's copy_bandwidth, else the optimizer's rate (the simulator
 * adds it to the rank's optimizer step). */
double hx_rank_weight_repack_s(const struct hx_ctx *ctx, int rank, double params);

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

/* ---- tensor parallelism and measured profiles (issue 18) --------------- */

/* The fraction of its TP 1 rate a device of type g keeps in a TP group of
 * degree tp: its curve at tp, interpolated in log2(tp) between the degrees
 * 1, 2, 4, ... it gives, the last point held beyond them; 1 when the type
 * has no curve (IR built by hand). */
double hx_tp_efficiency(const struct hx_gpu_type *g, int tp);
/* GPU type g's measured profile at TP degree tp, or NULL. */
const struct hx_profile *hx_gpu_profile(const struct hx_cluster *c, int gpu_type, int tp);
/* A profile's figures at micro-batch size mbs (one decoder layer on one
 * device): linear between the two measured sizes around mbs; below the
 * smallest, in proportion to mbs from it; above the largest, on the line
 * through the last two (one size: in proportion), never below the largest's
 * figures. act is 0 when the profile gives no memory. sema warns when the
 * planner may leave the measured range. */
void hx_profile_at(const struct hx_profile *p, int64_t mbs, double *fwd, double *bwd, double *act);

/* The TP model of one GPU type fitted to measured profiles (hexic-profile,
 * tests): rate (FLOP/s at TP 1, i.e. tflops x efficiency) and overhead from
 * the TP 1 profile's forward + backward by least squares on time = 3 x
 * (layer FLOPs x tokens / rate + overhead) (one size: no overhead), then
 * e(2^k) from each power-of-two degree's profile with the same overhead,
 * made non-increasing and at most 1. Degrees without a profile are
 * interpolated as hx_tp_efficiency does. False when there is no TP 1
 * profile. */
struct hx_tp_fit {
  double rate, overhead;
  double efficiency[HX_TP_CURVE_POINTS];
  int npoints;
};
bool hx_tp_calibrate(const struct hx_model *m, const struct hx_profile *profiles, int nprofiles,
                     struct hx_tp_fit *fit);

/* Compute-only time of one decoder layer's forward for one micro-batch of
 * mbs sequences on this stage: the slowest member's, by its profile at the
 * stage's TP degree or else FLOPs / (tp x rate x e(tp)) + layer_overhead. */
double hx_layer_compute_s(const struct hx_ctx *ctx, const struct hx_stage *st, int64_t mbs);
/* Whether a stage runs Megatron's sequence parallelism: the train block's
 * sequence_parallel, a TP degree above 1, decoder layers and whole
 * sequences (a HexiSeq stage, st->seq_layout, keeps the TP all-reduces). */
bool hx_stage_sequence_parallel(const struct hx_ctx *ctx, const struct hx_stage *st);
/* Time of the 2 (forward) TP all-reduces of one decoder layer's activations
 * (under sequence parallelism its 2 reduce-scatters and 2 all-gathers). */
double hx_layer_tp_comm_s(const struct hx_ctx *ctx, const struct hx_stage *st, int64_t mbs);
/* One micro-batch forward of the whole stage: compute + TP all-reduces
 * (2 per layer, Megatron; sequence parallel: 2 reduce-scatters and 2
 * all-gathers per layer and the stage's output gathered). The embedding, final norm and LM head run whole
 * on every TP rank, as hexic's runtime runs them (no vocab parallelism). */
double hx_stage_fwd_s(const struct hx_ctx *ctx, const struct hx_stage *st, bool first, bool last,
                      int64_t mbs);
/* One micro-batch backward: 2x forward FLOPs at the backward's rate, 2 TP all-reduces per layer
 * (sequence parallel: 4 all-gathers and 2 reduce-scatters, and the input
 * gradient gathered), plus, when st->recompute, one more forward with its
 * own collectives. */
double hx_stage_bwd_s(const struct hx_ctx *ctx, const struct hx_stage *st, bool first, bool last,
                      int64_t mbs);
/* hx_stage_fwd_s, hx_stage_bwd_s and the per-layer split of the backward,
 * priced in one call: the simulator and the closed-form estimate read them
 * all. with_comm false prices every transfer inside the stage at 0 (the
 * simulator's zero_comm). bwd = layers x layer_bwd + head_bwd. The last
 * stage's fwd holds the head's backward (hx_head_bwd_s) too, as the
 * runtime's forward op computes it; head_bwd is the backward's first piece,
 * 0 unless a stage of no layers has its input gradient to gather. */
struct hx_stage_times {
  double fwd, layer_bwd, head_bwd, bwd;
};
void hx_stage_times(const struct hx_ctx *ctx, const struct hx_stage *st, bool first, bool last,
                    int64_t mbs, bool with_comm, struct hx_stage_times *out);
/* The head's backward (final norm + LM head + loss; the last stage's
 * forward op runs it, and hx_stage_times charges it there) and one decoder
 * layer's backward; the embedding's is 0 (a scatter-add). */
double hx_head_bwd_s(const struct hx_ctx *ctx, const struct hx_stage *st, int64_t mbs);
double hx_layer_bwd_s(const struct hx_ctx *ctx, const struct hx_stage *st, int64_t mbs);

/* Micro-batches whose activations a stage keeps at its peak: 1F1B keeps
 * min(p - s, m) on stage s of p; GPipe keeps all m. */
int64_t hx_in_flight(enum hx_pp_schedule schedule, int stage_index, int nstages,
                     int64_t micro_batches);
/* Parameters one device of the stage holds: the layers' matrices / tp, and
 * whole what the runtime keeps whole on every TP rank (norm gains,
 * embedding, final norm, LM head). */
double hx_stage_device_params(const struct hx_model *m, const struct hx_stage *st, bool first,
                              bool last);
/* Per device: weights + gradients + optimizer state of its TP shard
 * (hx_stage_device_params); under ZeRO-1 only st->opt_share of the
 * optimizer state when that is in (0, 1) (a searching planner's estimate),
 * else 1 / its HexiSeq units. */
double hx_stage_static_bytes(const struct hx_ctx *ctx, const struct hx_stage *st, bool first,
                             bool last);
/* Per device: activations of `in_flight` micro-batches of mbs sequences.
 * Without recompute each keeps act_bytes_layer per token per layer; with full
 * recompute each keeps only the layer inputs, plus one layer's full
 * activations for the micro-batch being recomputed. Sharded over TP
 * (sequence parallel, Megatron). The last stage adds the logits of one
 * micro-batch, whole on every TP rank (the head is not TP-split). */
double hx_stage_act_bytes(const struct hx_ctx *ctx, const struct hx_stage *st, bool first,
                          bool last, int64_t mbs, int64_t in_flight);
/* What one device of the stage needs at its peak, as a search prices it
 * before the plan exists: the per-kind model of hx_rank_memory_by_kind
 * (passes/cost/cost_memory.c) for the largest of its TP ranks, the pipeline
 * around it guessed from first, last and in_flight, plus
 * HX_MEMORY_RESERVE_BYTES (a stage with a HexiSeq layout: its largest unit,
 * hx_seq_unit_memory_bytes). The old figure, hx_stage_static_bytes +
 * hx_stage_act_bytes + the reserve, left out the hop buffers, the layer
 * scratch and the gradient-sync pack (issue 25). */
double hx_stage_memory_bytes(const struct hx_ctx *ctx, const struct hx_stage *st, bool first,
                             bool last, int64_t mbs, int64_t in_flight);
/* The smallest memory of the stage's devices, in bytes. */
double hx_stage_memory_capacity(const struct hx_cluster *c, const struct hx_stage *st);

/* Optimizer step of one device of the stage, over the parameters it holds
 * (hx_stage_static_bytes' count) (memory bound: state traffic /
 * mem_bandwidth, or / (peak FLOP/s / HX_ASSUMED_FLOPS_PER_BYTE) when the GPU
 * block gives none). The slowest member. */
double hx_stage_optimizer_s(const struct hx_ctx *ctx, const struct hx_stage *st, bool first,
                            bool last);
/* The optimizer step of one rank over `params` parameters (ZeRO-1: its shard). */
double hx_rank_optimizer_s(const struct hx_ctx *ctx, int rank, double params);

/* ---- communication ----------------------------------------------------- */

/* Bandwidth and latency from device a to device b (a != b): the node's own
 * figures or the node classes' when the cluster has them (the same figures
 * as the device tables, from tables that stay in cache), else the device
 * tables'. */
static inline double hx_pair_bw(const struct hx_cluster *c, int a, int b) {
  if (c->nclasses <= 0)
    return hx_bw(c, a, b);
  int na = c->devices[a].node, nb = c->devices[b].node;
  return na == nb ? c->nodes[na].bandwidth
                  : c->class_bandwidth[(long)c->node_class[na] * c->nclasses + c->node_class[nb]];
}
static inline double hx_pair_lat(const struct hx_cluster *c, int a, int b) {
  if (c->nclasses <= 0)
    return hx_lat(c, a, b);
  int na = c->devices[a].node, nb = c->devices[b].node;
  return na == nb ? c->nodes[na].latency
                  : c->class_latency[(long)c->node_class[na] * c->nclasses + c->node_class[nb]];
}

/* Point to point a -> b: latency + bytes / bandwidth; 0 when a == b. */
double hx_p2p_s(const struct hx_cluster *c, int a, int b, double bytes);
/* Ring all-reduce of `bytes` (each member's buffer) over ranks[0..n):
 * 2(n-1)/n * bytes / min_bw + 2(n-1) * max_lat; 0 when n <= 1. */
double hx_allreduce_s(const struct hx_cluster *c, const int *ranks, int n, double bytes);
/* Ring reduce-scatter of `bytes` (each member's buffer) into shards of
 * shard_ppm parts per million (NULL: even): (n-1) steps each carrying the
 * largest shard, (n-1) x largest share x bytes / min_bw + (n-1) * max_lat;
 * the all-gather of the shards back is priced the same. 0 when n <= 1. */
double hx_reduce_scatter_s(const struct hx_cluster *c, const int *ranks, int n, double bytes,
                           const int32_t *shard_ppm);
double hx_allgather_s(const struct hx_cluster *c, const int *ranks, int n, double bytes,
                      const int32_t *shard_ppm);
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
 * embedding and LM head weights. 0 with one pipeline. Under sequence
 * parallelism a decoder layer's also holds its TP groups' sum of the two
 * norm gains' gradients (once per step), with one pipeline too. */
double hx_grad_sync_layer_s(const struct hx_ctx *ctx, const struct hx_plan *plan, int layer);

/* Weight replicas a stage holds: its units with a context x head layout
 * (each unit of tp devices keeps the stage's weights), else 1. */
int hx_stage_replicas(const struct hx_stage *st);
/* True when some stage of the plan keeps several weight replicas (HexiSeq
 * units). */
bool hx_plan_has_units(const struct hx_plan *plan);
/* True when some weights live on more than one device of the same TP rank
 * (several pipelines or a stage with several units): gradients need a sync. */
bool hx_plan_replicates_weights(const struct hx_plan *plan);

/* ---- whole plans ------------------------------------------------------- */

/* Model FLOPs of one iteration, without recompute: 3 x forward. */
double hx_model_flops_per_iteration(const struct hx_ctx *ctx);
/* Sum of peak FLOP/s (tflops x 1e12, no efficiency) of the devices a plan uses. */
double hx_plan_peak_flops(const struct hx_ctx *ctx, const struct hx_plan *plan);

/* ---- ZeRO-1 (issue 16, /work/notes/zero1_api.md) ------------------------
 * A zero1 plan's gradient-sync groups (grad / unsplit) carry shard_ppm: each
 * member keeps the optimizer state (hx_optimizer_state_bytes_per_param) of
 * only its share of the group's elements; weights and gradients stay whole.
 * A parameter in no sharded group keeps its whole state. */

/* Plans with HexiSeq units (a stage's units are weight replicas too) carry
 * no shard_ppm: the runtime splits the state evenly over every replica, so
 * each rank keeps 1 / (replicas of its stage's first layer across the
 * pipelines and units) of its state; the sync is priced as the all-reduce
 * (a ring reduce-scatter + all-gather costs the same). The search prices a
 * unit stage's state at 1 / its units (hx_stage_static_bytes).
 * True when the plan is zero1 and some group carries shard_ppm or some
 * stage has units. */
bool hx_plan_sharded(const struct hx_plan *plan);
/* Parameters of a gradient-sync group, as each member holds them: GRAD
 * (e - b) x the layer's TP-split matrices / nslices, layer -1 the weights
 * it holds / nslices; UNSPLIT (e - b) x the two norm gains; 0 otherwise. */
double hx_group_params(const struct hx_ctx *ctx, const struct hx_plan *plan,
                       const struct hx_group *g);
/* Per rank (plan->ndevices entries): parameters whose optimizer state it
 * keeps and steps: all it holds, less (1 - share) of each sharded group's
 * parameters; 0 for unused ranks. */
void hx_plan_optimizer_params(const struct hx_ctx *ctx, const struct hx_plan *plan,
                              double *params);
/* Per rank: its memory less what it needs without optimizer state (weights,
 * gradients, activations, reserve): what a ZeRO-1 split is proportional to
 * (may be negative; unused ranks: their whole memory). */
void hx_plan_free_bytes(const struct hx_ctx *ctx, const struct hx_plan *plan, double *free_bytes);

/* Memory check of every used device of a plan. Returns true when all fit;
 * *shortfall gets the largest (needed - capacity) over devices (<= 0 when all
 * fit) and *worst_rank that device (either may be NULL). */
bool hx_plan_memory_fits(const struct hx_ctx *ctx, const struct hx_plan *plan, double *shortfall,
                         int *worst_rank);
/* The same check, and need[r] (when need is not NULL: plan->ndevices
 * entries) what rank r needs at its peak, 0 for unused ranks: the sum of
 * its hx_rank_memory_by_kind (plan.json's memory_by_kind) plus
 * HX_MEMORY_RESERVE_BYTES, the one figure every planner, message and the
 * simulator's peak_memory use (passes/cost/cost_memory.c). */
bool hx_plan_memory(const struct hx_ctx *ctx, const struct hx_plan *plan, double *need,
                    double *shortfall, int *worst_rank);

/* ---- memory by kind (issue 25, item 1; passes/cost/cost_memory.c) ------
 * What rank r's device holds at its peak, in bytes, by the kinds the runtime
 * counts (rtlib/rt_backend.h, the same order and names): priced from the
 * buffers the runtime allocates for the plan, exactly (its TP shard's heads
 * and ffn columns, the slots in flight, the gradient-sync packs, ZeRO-1's
 * shards), as the CPU backend runs it (fp32 whatever the precision) under
 * --target=cpu. tests/exec/run_memory.sh holds every exec plan to these
 * figures within 5% per rank and kind; a HexiSeq rank's by its unit's
 * tokens, its attention hook's scratch and its leader's whole activations
 * (hx_seq_rank_buffers). */
enum hx_mem_kind {
  HX_MEM_WEIGHTS,
  HX_MEM_GRADIENTS,
  HX_MEM_OPTIMIZER,
  HX_MEM_ACTIVATIONS,
  HX_MEM_RECOMPUTE,
  HX_MEM_COMM,
  HX_MEM_WORKSPACE,
  HX_MEM_NKINDS
};
extern const char *const hx_mem_kind_names[HX_MEM_NKINDS];

/* hx_stage_memory_bytes in two steps, for a planner that prices one stage
 * shape at many optimizer shares: the parts depend on the stage's TP
 * degree, layer count and recompute, first, last, mbs and in_flight (and
 * the context), not on st->opt_share nor its devices; the total from them
 * at the stage's opt_share is hx_stage_memory_bytes' bit for bit. False
 * (no parts) for HexiSeq stages and TP degrees above
 * HX_MEMORY_PARTS_RANKS. */
enum { HX_MEMORY_PARTS_RANKS = 8 };
struct hx_stage_memory_parts {
  int nranks;
  double bytes[HX_MEMORY_PARTS_RANKS][HX_MEM_NKINDS];
};
bool hx_stage_memory_parts(const struct hx_ctx *ctx, const struct hx_stage *st, bool first,
                           bool last, int64_t mbs, int64_t in_flight,
                           struct hx_stage_memory_parts *parts);
double hx_stage_memory_from_parts(const struct hx_ctx *ctx, const struct hx_stage *st, bool first,
                                  bool last, int64_t mbs, int64_t in_flight,
                                  const struct hx_stage_memory_parts *parts);
/* bytes[HX_MEM_NKINDS]; all 0 for an unused rank. */
void hx_rank_memory_by_kind(const struct hx_ctx *ctx, const struct hx_plan *plan, int r,
                            double *bytes);
/* A searched HexiSeq stage's unit u (its layout's tokens, heads and hook
 * scratch; hops unless the stage is a whole pipeline; the leader's unit
 * gathers whole activations): the per-kind total of its largest TP rank
 * plus HX_MEMORY_RESERVE_BYTES. */
double hx_seq_unit_bytes_by_kind(const struct hx_ctx *ctx, const struct hx_stage *st, int u,
                                 bool first, bool last, int64_t mbs, int64_t in_flight);

/* Closed-form iteration estimate for searches: per pipeline the 1F1B (or
 * GPipe) makespan (m - 1) * max_s(f_s + b_s) + sum_s(f_s + b_s + 2 hop_s);
 * then, per stage, when its gradient all-reduces end (they start as the last
 * micro-batch's backward frees each layer, stage by stage from the last, and
 * queue on the stage's devices: the sync the backward does not hide); then
 * the slowest optimizer step. Scratch memory only (freed on return). */
double hx_estimate_iteration_s(const struct hx_ctx *ctx, const struct hx_plan *plan);
/* The same estimate when it is below `beat`; else some value >= beat (the
 * pipelines and optimizer alone, without pricing the gradient sync): a
 * search keeping the best of many plans skips the sync of those that
 * cannot win. */
double hx_estimate_iteration_below(const struct hx_ctx *ctx, const struct hx_plan *plan,
                                   double beat);

/* ============================================================
 * HexiSeq: context x head parallelism
 * ============================================================ */

/* The cost model of context x head parallelism (HexiSeq, issue 7).
 *
 * Layout of a stage with a struct hx_seq_layout
 *  - The stage's devices form `nunits` units of tp devices (unit j is
 *    stage devices [j*tp, (j+1)*tp), one TP group inside a node).
 *  - Units are split into HP groups (all-to-all groups of any sizes); the
 *    sequence is split across groups (context parallelism: K/V go around the
 *    groups) and, inside a group, across its units.
 *  - Token ranges are zig-zag: groups in ring order take consecutive chunks
 *    from the front of the sequence and mirrored chunks from its back, so a
 *    group holding t tokens does ~t/T of the causal attention work whatever
 *    its place (FLOPs, not tokens, are balanced). Inside its group a unit
 *    takes `first` tokens from the front chunk and tokens - first from the
 *    back chunk, in group order. Every token belongs to exactly one unit.
 *  - Heads: TP rank i owns heads [i H/tp, (i+1) H/tp) (Megatron); inside a
 *    group those are split over the units, unit u's device of TP rank i
 *    computing heads[u] of them, in group order. tp must divide kv_heads so
 *    every TP share starts on a K/V head boundary.
 *
 * Per decoder layer and micro-batch, with n_u = tokens of unit u, k_u its
 * heads per device, F_u its slowest device's FLOP/s, T the sequence, D the
 * hidden size, hd the head size, e the element size (forward):
 *   other layers   n_u x (flops_layer_fwd - 2 D (T+1)) / (tp F_u) + 2 TP
 *                  all-reduces of n_u D e bytes in the unit
 *   attention      4 hd k_u / F_u per causal (query, key) pair of the
 *                  group's tokens, its slowest unit setting the group's pace;
 *                  the pairs against its own keys run first, the others
 *                  overlap the K/V ring step by step: group g's attention is
 *                  sum over steps s of max(its pairs against the block it got
 *                  at step s - 1, transfer of step s + 1)
 *   K/V ring       G - 1 lockstep steps; at step s the hop into group g
 *                  carries group g - s's block: t tokens x 2 kvh hd e /
 *                  hop_bw + hop_lat, kvh = the most K/V heads a unit of g
 *                  reads (GQA); a step takes its slowest (block, hop). Rings
 *                  of more than 16 groups are bounded instead: every step the
 *                  slowest, all non-own pairs overlapping the whole ring
 *   all-to-all     ragged, per group: sender u sends n_u x (k_v + 2 kvh_v) hd e
 *                  to each v (Q, K, V in) and gets back n_u x k_w hd e from each
 *                  w (output): max over members of max(sent, received) /
 *                  group_bw + (n_g - 1) group_lat, for each direction
 *   stage layer    max_u(other) + max_g(all-to-all) + max_u(attention): the
 *                  ring keeps every unit of the stage in lockstep.
 * Backward: 2 x compute, the same all-to-alls (gradients, transposed), the
 * ring twice (K/V again and dK/dV back); full recompute adds a forward.
 * Memory per device: the stage's static bytes, activations of its own n_u
 * tokens (as hx_stage_act_bytes for that many tokens), and the attention
 * working set of one layer: Q, K, V, O of the group's tokens for its heads
 * plus a double-buffered ring block. */

struct hx_seq_layout {
  int tp;          /* devices per unit: the stage's TP degree */
  int nunits;
  int ngroups;     /* HP groups; the CP ring runs across them */
  int *order;      /* units group by group, in ring order */
  int *group_start;/* ngroups + 1: group g is order[group_start[g] .. group_start[g+1]) */
  int *group_of;   /* per unit */
  int64_t *tokens; /* per unit: tokens of one sequence */
  int64_t *first;  /* per unit: how many of them come from the front chunk */
  int *heads;      /* per unit: query heads each of its devices computes */
  /* Filled by hx_seq_layout_links from the cluster (fixed while tokens and
   * heads change): per unit its slowest device's FLOP/s (forward, and
   * backward at its type's backward_efficiency; the LM head's forward and
   * backward, at head_efficiency when given) and smallest memory, its TP
   * group's links; per group its all-to-all links; the ring's links. */
  double *unit_flops, *unit_bwd_flops, *unit_memory, *unit_bw, *unit_lat;
  double *unit_head_flops, *unit_head_bwd_flops;
  double *group_bw, *group_lat;
  double *hop_bw, *hop_lat; /* per group: the ring hop from the previous group */
};

/* A layout of nunits units in ngroups groups, arrays allocated and zeroed. */
struct hx_seq_layout *hx_seq_layout_new(struct hx_arena *a, int tp, int nunits, int ngroups);
/* A layout whose units are grouped by group_of[u] in [0, ngroups): groups
 * in ring order by index, a group's units by index; tokens, heads and links
 * still zero. */
struct hx_seq_layout *hx_seq_layout_grouped(struct hx_arena *a, int tp, int nunits, int ngroups,
                                            const int *group_of);
/* A deep copy (the search mutates copies). */
struct hx_seq_layout *hx_seq_layout_copy(struct hx_arena *a, const struct hx_seq_layout *src);
/* Fills the cached link and device figures for the stage's devices. */
void hx_seq_layout_links(const struct hx_ctx *ctx, const int *stage_devices,
                         struct hx_seq_layout *l);

/* Token ranges of unit u within [0, seq_len): up to 2, empty ones left out.
 * Returns how many were written to out. */
int hx_seq_unit_ranges(const struct hx_seq_layout *l, int64_t seq_len, int u,
                       struct hx_range out[2]);
/* Heads of unit u's device of TP rank tp_rank. */
struct hx_range hx_seq_device_heads(const struct hx_seq_layout *l, const struct hx_model *m, int u,
                                    int tp_rank);
/* Tokens of group g (sum over its units). */
int64_t hx_seq_group_tokens(const struct hx_seq_layout *l, int g);
/* Units of the largest group: a stage's hp. */
int hx_seq_largest_group(const struct hx_seq_layout *l);

/* Sum of (t + 1) over t in [begin, begin + len): the causal key count of
 * those queries. Exact in doubles up to 2^53 / T tokens. */
double hx_causal_pairs(int64_t begin, int64_t len);

/* Times of one decoder layer (and the head and embedding pieces) of one
 * micro-batch of mbs sequences on a stage with a layout, in lockstep. */
struct hx_seq_stage_cost {
  double layer_fwd, layer_bwd; /* layer_bwd includes recompute when st->recompute */
  double head_fwd, head_bwd;   /* final norm + LM head + loss (charged when last) */
  double embed_fwd;            /* the vocab-parallel embedding's TP all-reduce */
  /* forward breakdown of layer_fwd */
  double other_s, a2a_s, attn_s, ring_s; /* ring_s: the slowest unit's ring transfer */
};
void hx_seq_stage_cost(const struct hx_ctx *ctx, const struct hx_stage *st, int64_t mbs,
                       bool with_comm, struct hx_seq_stage_cost *out);
/* Per unit, the forward time of one layer that follows its own tokens
 * (other layers + TP) and its own heads (attention + exposed ring). */
void hx_seq_unit_loads(const struct hx_ctx *ctx, const struct hx_seq_layout *l, int64_t mbs,
                       double *token_load, double *head_load);
/* Forward + backward of a whole stage for one micro-batch (layers, plus the
 * head when last, plus the embedding when first). */
double hx_seq_stage_step_s(const struct hx_ctx *ctx, const struct hx_stage *st, bool first,
                           bool last, int64_t mbs);

/* The ragged all-to-all time of group g for one sequence -> head exchange of
 * mbs sequences (Q, K, V in) plus the head -> sequence exchange (output). */
double hx_seq_a2a_s(const struct hx_ctx *ctx, const struct hx_seq_layout *l, int g, int64_t mbs);
/* The K/V ring's transfer time for one forward of mbs sequences: the ring
 * moves in lockstep, so every unit waits for every step. */
double hx_seq_ring_s(const struct hx_ctx *ctx, const struct hx_seq_layout *l, int64_t mbs);
/* K/V heads that unit u's devices read (query heads grouped by GQA). */
int64_t hx_seq_kv_heads_used(const struct hx_seq_layout *l, const struct hx_model *m, int u);

/* Peak bytes on a device of unit u: hx_seq_unit_bytes_by_kind, the per-kind
 * model plus HX_MEMORY_RESERVE_BYTES. */
double hx_seq_unit_memory_bytes(const struct hx_ctx *ctx, const struct hx_stage *st, int u,
                                bool first, bool last, int64_t mbs, int64_t in_flight);
/* True when every unit of the stage fits its smallest device's memory (one
 * pass over the units); *worst gets the largest need - capacity. */
bool hx_seq_stage_memory_fits(const struct hx_ctx *ctx, const struct hx_stage *st, bool first,
                              bool last, int64_t mbs, int64_t in_flight, double *worst);
/* The most tokens per sequence unit u can hold with the stage's other
 * settings (its heads as they are); 0 when not even none fit. */
int64_t hx_seq_unit_token_capacity(const struct hx_ctx *ctx, const struct hx_stage *st, int u,
                                   bool first, bool last, int64_t mbs, int64_t in_flight);

/* The buffers rank r of HexiSeq stage st holds beside a plain stage's
 * (hx_rank_memory_by_kind, rtlib/seq/ and rt_exec_ops.c): *tokens of each
 * sequence (its unit's), *attention the floats of its attention hook's
 * scratch (rtlib/seq/rt_seq_attn.c's carve, one sequence at a time), and
 * *gathered the floats of one whole activation when it is the stage leader
 * that gathers and scatters them across pipeline hops (it holds its
 * outgoing activation and gradient per slot whole, and two more), else 0. */
void hx_seq_rank_buffers(const struct hx_ctx *ctx, const struct hx_plan *plan,
                         const struct hx_stage *st, int r, double *tokens, double *attention,
                         double *gathered);
/* The floats of unit u's attention hook scratch (the larger of its forward
 * and backward carve). */
double hx_seq_hook_scratch_floats(const struct hx_model *m, const struct hx_seq_layout *l, int u);

/* A pipeline hop between stages where one or both have a layout: every unit
 * sends its own shard at once, so the slowest shard over the slowest pair. */
double hx_seq_hop_s(const struct hx_ctx *ctx, const struct hx_stage *from, const struct hx_stage *to,
                    int64_t mbs);

/* Checks a plan's HexiSeq tables: in every HX_GROUP_CP_RING group every token
 * of the sequence is held exactly once, in every HX_GROUP_HP_A2A group every
 * head of the members' TP share exactly once, and every stage with a layout
 * has them. NULL when fine, else what is wrong (allocated in a). */
const char *hx_seq_check_plan(struct hx_arena *a, const struct hx_ctx *ctx,
                              const struct hx_plan *plan);

/* ============================================================
 * The event simulator
 * ============================================================ */

/* The discrete-event simulator of one training iteration.
 *
 * The iteration is a graph of tasks, each holding one or more resources for
 * its duration:
 *   - a stage's compute (its TP group runs in lockstep): forward and backward
 *     of every micro-batch, in the order 1F1B (or GPipe) prescribes, then the
 *     optimizer step;
 *   - a directed leader-to-leader link per pipeline hop: activation sends
 *     forward, gradient sends backward (the transfer between the leaders);
 *     the receiving stage then broadcasts it inside its TP group on its own
 *     compute, right before the forward or backward that needs it (the
 *     runtime's RECV op: the leader receives, then the group broadcasts);
 *   - one data-parallel channel per device: gradient all-reduces, one per
 *     decoder layer (and one for the embedding/head), started as soon as the
 *     layer's last backward is done in every pipeline, so they overlap the
 *     rest of the backward;
 *   - after every stage's backward, every gradient all-reduce and every
 *     send, one all-reduce of the loss and the gradient norm (two doubles)
 *     over every used device: the runtime's global clipping, so no optimizer
 *     step starts before the whole iteration's backward and sync are done.
 * passes/cost/README.md lists what is charged for each runtime step.
 * A task starts when its dependencies are done and it is first in line on
 * every resource it needs (each resource runs its queue in order), at the
 * latest end of those; one topological pass times them (deterministic).
 * Costs come from passes/cost/cost.h only. */

enum hx_sim_event_kind {
  HX_EV_FORWARD,
  HX_EV_BACKWARD,
  HX_EV_SEND,      /* on the sending leader */
  HX_EV_RECV,      /* on the receiving leader: the transfer between leaders */
  HX_EV_ALLREDUCE, /* gradient all-reduce, on every member */
  HX_EV_OPTIMIZER,
  HX_EV_BROADCAST, /* a received activation or gradient in the TP group, on its members */
  HX_EV_LOSS_NORM, /* the loss and gradient-norm all-reduce over every used device */
  HX_EV_ALLGATHER, /* ZeRO-1: a sync group's updated weights gathered, on every member */
};

/* One span on one device's timeline (trace.json). */
struct hx_sim_event {
  enum hx_sim_event_kind kind;
  int rank;
  double start_s, end_s;
  int pipeline, stage;
  int micro_batch; /* -1 when not about one micro-batch */
  int layer;       /* all-reduce: decoder layer, -1 embedding/head; else -1 */
  int peer;        /* send/recv: the other leader; else -1 */
};

struct hx_sim_options {
  /* Price every transfer and collective at 0 (closed-form tests). */
  bool zero_comm;
  /* Keep the events; they are copied into `arena` (required then). */
  bool record_events;
  /* Plan searches: extrapolate every 1F1B pipeline of more than 128
   * micro-batches (from a run of 2 x stages + 24, not only those above
   * HX_SIM_EXTRAPOLATE_ABOVE), so a pricing costs the same at any batch. */
  bool steady_all;
  struct hx_arena *arena;
  /* Outputs. */
  struct hx_sim_event *events; /* sorted by rank, then start time */
  int nevents;
  /* Events of an extrapolated simulation's omitted steps that are not in
   * `events` (past the first 2^18 events of the iteration); 0 otherwise. */
  int64_t events_left_out;
  /* Pipelines whose steady state was found and extrapolated (the others
   * were simulated step by step). */
  int extrapolated;
  double memory_shortfall; /* max over used devices of needed - capacity */
  int worst_rank;          /* that device, -1 when the plan uses none */
};

/* Simulates one iteration of `plan` and fills plan->sim (iteration_s,
 * tokens_per_s, mfu, bubble, the time breakdown, and per rank busy_s and
 * peak_memory, which must be arrays of plan->ndevices: hx_plan_new allocates
 * them). Returns true when every used device fits its memory; plan->sim is
 * filled either way (sim.valid says the plan could be simulated at all). opt
 * may be NULL. Allocates nothing that outlives the call except the recorded
 * events. */
bool hx_simulate(const struct hx_ctx *ctx, struct hx_plan *plan, struct hx_sim_options *opt);

/* A 1F1B pipeline of more micro-batches than this is simulated over a few
 * hundred of them until its steady state is found (every task of a step
 * starting one period, within 1e-9 of it, after its twin of the step
 * before); the steps up to the full count's cool-down are then counted in
 * closed form (times shifted by a multiple of the period), so the cost does
 * not grow with the batch. Figures may then differ in the last bits from a
 * step-by-step run. A pipeline that does not settle is simulated whole.
 * hx_sim_set_extrapolation changes the threshold (tests; <= 0 restores it). */
enum { HX_SIM_EXTRAPOLATE_ABOVE = 4096 };
void hx_sim_set_extrapolation(int64_t above);

/* The most tasks one simulation builds (about 100 bytes each with their
 * dependencies: some 1.6 GB); a plan that needs more (a huge global batch in
 * micro-batches of one over many stages) is not simulated (sim.valid false),
 * and the planners do not propose one. hx_sim_task_bound is an upper bound
 * on a plan's tasks, in 64 bits (stages x micro-batches exceed 2^31). */
enum { HX_SIM_MAX_TASKS = 1 << 24 };
int64_t hx_sim_task_bound(const struct hx_ctx *ctx, const struct hx_plan *plan);

/* A lower bound on the iteration_s hx_simulate would report for `plan`,
 * from the same durations and the dependencies every schedule obeys (stage
 * compute and links serial, micro-batches through the stages in order),
 * without running the event queue: planners prune with it. 0 when the plan
 * cannot be simulated. */
double hx_sim_lower_bound(const struct hx_ctx *ctx, const struct hx_plan *plan);

/* A cheaper bound, never above hx_sim_lower_bound's (its pipelines' terms
 * only: no gradient sync), so a search can rule out a plan without paying
 * for the full bound, which it computes only for plans this one leaves a
 * chance. hx_sim_set_quick_bounds(false) makes it 0 (tests: the choices
 * with and without it must be the same). */
double hx_sim_quick_bound(const struct hx_ctx *ctx, const struct hx_plan *plan);
void hx_sim_set_quick_bounds(bool on);

/* The index of the fastest of plans[0..n) under the simulator (ties to the
 * lower index; -1 when none simulates). Plans are simulated in the order of
 * their lower bounds, and not at all once a bound is above the best time:
 * the same choice as simulating every one, with fewer simulations. */
int hx_simulate_fastest(const struct hx_ctx *ctx, struct hx_plan *const *plans, int n);

/* The name of an event kind ("forward", "send", ...). */
const char *hx_sim_event_name(enum hx_sim_event_kind kind);

#endif
