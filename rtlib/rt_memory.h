/* Device memory by kind (issue 25, item 1): every byte a backend allocates
 * is counted under one kind, per rank, with its current and peak bytes, so
 * that a run can be compared with what plan.json predicts per rank and kind
 * (codegen/plan_json.c, passes/cost/cost.c's hx_rank_memory_by_kind). Both
 * backends count through these functions at their alloc and free, so they
 * count the same way; the executor, which knows what a buffer is for, moves
 * the bytes of what it allocated to their kind (rt_mem_retag). */
#ifndef HX_RT_MEMORY_H
#define HX_RT_MEMORY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The order and names are plan.json's "memory_by_kind" (hx_mem_kind_names). */
enum rt_mem_kind {
  RT_MEM_WEIGHTS,     /* master weights and what the forward reads (a bf16 copy) */
  RT_MEM_GRADIENTS,   /* fp32 parameter gradients */
  RT_MEM_OPTIMIZER,   /* AdamW m and v (and the decay mask that steps them) */
  RT_MEM_ACTIVATIONS, /* what a layer keeps from forward to backward, per slot */
  RT_MEM_RECOMPUTE,   /* full recompute: one layer's activations rebuilt in backward */
  RT_MEM_COMM,        /* pipeline hop buffers, gradient-sync packs, gathers */
  RT_MEM_WORKSPACE,   /* scratch, ping-pong activations, tokens, tables */
  RT_MEM_NKINDS
};

/* "weights", "gradients", ...: the JSON keys and the report's words. */
const char *rt_mem_kind_name(enum rt_mem_kind kind);

/* A backend's alloc and free: p (not NULL) now holds bytes of kind; and no
 * longer. Freeing a pointer never counted is ignored (host tables). */
void rt_mem_count(const void *p, size_t bytes, enum rt_mem_kind kind);
void rt_mem_uncount(const void *p);

/* The kind a backend's alloc counts under until retagged: RT_MEM_WORKSPACE,
 * or what the executor sets around a set-up call whose buffers it does not
 * all name (rt_exec.c: the stage's slots and hop buffers, COMM). */
enum rt_mem_kind rt_mem_default_kind(void);
void rt_mem_set_default_kind(enum rt_mem_kind kind);

/* Moves `bytes` of allocation p (every byte it holds when bytes is
 * SIZE_MAX or more than it holds) from whatever kinds hold them, last
 * tagged first, to kind. A peak already reached by the kind they left stays
 * until rt_mem_reset_peaks. */
void rt_mem_retag(const void *p, size_t bytes, enum rt_mem_kind kind);

/* Every peak to what is held now: the executor calls it once its start-up
 * allocations are tagged, so that a buffer counted under the default kind
 * for a moment does not stay in that kind's peak. */
void rt_mem_reset_peaks(void);

/* Bytes of kind held now, the most held at once, and the most of all kinds
 * together at once. */
struct rt_mem_figures {
  int64_t current[RT_MEM_NKINDS], peak[RT_MEM_NKINDS];
  int64_t current_total, peak_total;
};
void rt_mem_figures(struct rt_mem_figures *out);

/* "peak MiB: weights 0.41, gradients 0.41, ... total 2.03" into buf. */
int rt_mem_format_line(char *buf, size_t size, const struct rt_mem_figures *f);

#endif
