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
#ifndef HX_COST_SEQ_H
#define HX_COST_SEQ_H

#include <stdbool.h>
#include <stdint.h>

#include "hexic.h"

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
   * heads change): per unit its slowest device's FLOP/s and smallest memory,
   * its TP group's links; per group its all-to-all links; the ring's links. */
  double *unit_flops, *unit_memory, *unit_bw, *unit_lat;
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

/* Peak bytes on a device of unit u (static + activations + attention
 * working set + HX_MEMORY_RESERVE_BYTES). */
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

#endif
