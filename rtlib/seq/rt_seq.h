/* Context and head parallelism at run time (issue 14): the table a rank
 * program carries for its HexiSeq stage, and the attention hook that runs a
 * decoder layer's attention over the whole sequence although the rank holds
 * only some of its tokens.
 *
 * The stage, as passes/hexiseq/hexiseq_plan.c lays it out and plan.json
 * says it (devices[].seq and .heads, the cp_ring and hp_a2a groups):
 *   - its devices form units of tp devices (one TP group each); TP rank t
 *     of every unit takes part in TP rank t's ring and groups only, and
 *     works on TP rank t's share of the heads, [t H/tp, (t+1) H/tp);
 *   - the units in ring order form one CP ring per TP rank; the ring is cut
 *     into HP all-to-all groups, contiguous runs of it;
 *   - each unit holds up to two token ranges of one sequence (global
 *     positions, zig-zag; every token once per ring) and, inside its group,
 *     a range of the share's query heads (every head once per group; groups
 *     may split them differently, and unevenly).
 *
 * What the hook does per layer (rt_seq_attn.c): an all-to-all inside the group
 * turns q/k/v of the unit's tokens x the share's heads into q of every token
 * of the group x the unit's own query heads, with k/v of the kv heads those
 * read (GQA: a kv head whose query heads two units split goes to both); the
 * K/V of the other groups' tokens come around the ring, group to group, each
 * kv head along its own sub-ring (the unit of each group that first reads
 * it forwards it to the next group's readers), merged by the online-softmax
 * block kernel, causal by global positions; a second all-to-all returns o.
 * The backward runs the same path with dK/dV accumulators travelling with
 * the K/V blocks back to a reader in their own group, and the inverse
 * all-to-all sums dq/dk/dv onto the tokens' owners. Every message size
 * follows from this table (nothing is exchanged to learn sizes) and every
 * sum is taken in a fixed order, so runs are deterministic. Memory per rank
 * is linear in the tokens of its group (no tokens x tokens matrix).
 */
#ifndef HX_RT_SEQ_H
#define HX_RT_SEQ_H

#include <stdbool.h>
#include <stdint.h>

#include "kernels/cpu/llama.h"

/* Tokens [begin, end) of one sequence, global positions. */
struct hx_rt_seq_range {
  int64_t begin, end;
};

/* One unit of the stage as this rank's TP rank sees it: the world rank of
 * its device of that TP rank, its tokens and that device's query heads. */
struct hx_rt_seq_unit {
  int rank;                         /* world rank */
  int nranges;                      /* 0..2 */
  struct hx_rt_seq_range ranges[2]; /* plan.json devices[rank].seq, in that order */
  int head_begin, head_end;         /* devices[rank].heads: global query heads */
};

/* One HP all-to-all group: units [first, first + n) of the ring, in group
 * order, and plan.json's split table of it: entry [x * n + y] = tokens of
 * member x times query heads of member y, the (token, head) vectors member x
 * sends member y in the sequence -> head all-to-all (checked, not trusted:
 * the K/V parts follow from the kv heads the receiver's heads read). */
struct hx_rt_seq_group {
  int first, n;
  const int64_t *split_table; /* n x n, row = sender */
};

/* The literal table of a rank of a HexiSeq stage (codegen writes it from
 * the plan; NULL in hx_rt_rank_config when sequences are whole). */
struct hx_rt_seq {
  int tp, tp_rank; /* the stage's TP degree, this rank's TP rank */
  int nunits;
  const struct hx_rt_seq_unit *units; /* in ring order: the cp_ring of TP rank tp_rank */
  int ngroups;
  const struct hx_rt_seq_group *groups; /* the hp_a2a groups of TP rank tp_rank, in ring order */
  int unit;                             /* this rank: units[unit].rank */
  int group;                            /* the group holding unit */
};

/* ---- helpers for the executor (pure, no MPI) ---- */

/* Tokens of one sequence this rank holds. */
long rt_seq_local_tokens(const struct hx_rt_seq *seq);

/* pos[0 .. rt_seq_local_tokens) = the global positions of those tokens in
 * the local order every layer buffer uses: the ranges in table order, each
 * ascending. A micro-batch of nseq sequences holds nseq * local tokens,
 * sequence-major (hxk_layer_ctx's positions and local_len). */
void rt_seq_positions(const struct hx_rt_seq *seq, int *pos);

/* NULL when the table is one the hook runs exactly, else why not (a
 * sentence, static storage): ranges within [0, seq_len) covering every token
 * once over the ring, groups tiling the ring in order, every query head of
 * the TP share once per group, split tables equal to tokens x heads, unit
 * and group naming this rank (world rank `rank`), tp dividing heads and
 * kv_heads. */
const char *rt_seq_check(const struct hx_rt_seq *seq, const struct hxk_dims *dims, int rank);

/* ---- the hook ---- */

struct rt_transport;
struct rt_seq;

/* The state of this rank's hook: the message plan of the all-to-alls and
 * the ring, from seq and dims (the model; dims->seq_len the sequence). Not
 * collective (the transport made its communicators when it was opened).
 * seq and dims must outlive it; a table rt_seq_check refuses is a fatal
 * error (hx_rt_fatal naming the reason). */
struct rt_seq *rt_seq_open(const struct hx_rt_seq *seq, const struct hxk_dims *dims,
                           const struct rt_transport *t);
void rt_seq_close(struct rt_seq *s);

/* The attention hook of every layer of the stage (its arg is s). The layer
 * hands it q [n, nq*hd], k and v [n, nkv*hd] of its n = nseq *
 * rt_seq_local_tokens tokens (after RoPE by rt_seq_positions), nq and nkv
 * the TP share's heads (an even TP split: tp divides kv_heads); forward
 * writes o and keeps lse [n, nq] as its saved floats; backward adds dq, dk,
 * dv. fp32 buffers in the memory of the kernels in use (host memory and
 * the CPU kernels unless a device chose others: rt_seq_use_kernels). Every rank of the stage's TP
 * rank's ring must call it in the same order (the layers do). */
const struct hxk_attention_hook *rt_seq_attention_hook(struct rt_seq *s);

/* ---- the backend's kernels ---- */

/* The query heads a block call works on (the hook's own, in the TP share)
 * and the kv heads they read: query head i reads kv head kv_of[i], which is
 * (q0 + i) / per_kv - kv0 (the CPU kernels take the table, the CUDA ones
 * the rule). */
struct rt_seq_heads {
  int nq, nkv, hd;
  const int *kv_of; /* host memory, nq entries */
  int q0, per_kv, kv0;
};

/* What the hook computes and copies with, chosen by the device whose memory
 * the layer's buffers live in: one code path plans and runs the exchanges
 * (rt_seq_attn.c), the table supplies the work on the buffers. Every buffer
 * is fp32 in the device's memory; a device queues the calls in order (the
 * CUDA one on its stream; the transport orders itself after them). Block
 * calls are hxk_attention_block_*'s for one sequence (nseq 1). */
struct rt_seq_kernels {
  const char *name;
  long align; /* floats per slice of scratch */
  long (*block_scratch_floats)(long nq_tok, long nk_tok, int nq, int hd);
  void (*block_forward)(float *o, float *lse, const float *q, const int *q_pos, long nq_tok,
                        const float *k, const float *v, const int *k_pos, long nk_tok,
                        const struct rt_seq_heads *h, bool first, float *scratch);
  void (*block_delta)(float *delta, const float *dout, const float *o, long n, int nq, int hd);
  void (*block_backward)(float *dq, float *dk, float *dv, const float *dout, const float *q,
                         const int *q_pos, long nq_tok, const float *k, const float *v,
                         const int *k_pos, long nk_tok, const float *lse, const float *delta,
                         const struct rt_seq_heads *h, float *scratch);
  /* rows of width floats: dst[r * dst_pitch + i] = (add: +=) src[r * src_pitch + i] */
  void (*copy_rows)(float *dst, long dst_pitch, const float *src, long src_pitch, long width,
                    long rows, bool add);
  void (*zero)(float *p, long n);
  /* host[0 .. n) where the block kernels read positions (a copy, or host
   * itself), and its release. */
  int *(*ints)(const int *host, long n);
  void (*free_ints)(int *p);
};

/* Host memory and the CPU kernels: what rt_seq_open starts with. */
const struct rt_seq_kernels *rt_seq_cpu_kernels(void);

/* The rt_seq whose hook this is (NULL: another hook), and a device's kernels
 * for it: called by the device's setup before it sizes the layer's buffers
 * (the hook's scratch follows the kernels). */
struct rt_seq *rt_seq_of_hook(const struct hxk_attention_hook *hook);
void rt_seq_use_kernels(struct rt_seq *s, const struct rt_seq_kernels *k);

#endif
