/* Shared by the per-rank program emitter (codegen/programs.c and
 * codegen/emit_*.c): the plan turned into what each MPI rank runs. */
#ifndef HX_EMIT_PROGRAMS_H
#define HX_EMIT_PROGRAMS_H

#include <stdio.h>

#include "ir/hexic.h"

/* The rtlib op kinds, as the generated code spells them. */
enum hx_prog_op { OP_RECV_ACT, OP_FORWARD, OP_SEND_ACT, OP_RECV_GRAD, OP_BACKWARD, OP_SEND_GRAD };

enum hx_schedule_phase { PHASE_WARMUP, PHASE_STEADY, PHASE_COOLDOWN };

struct hx_prog_step {
  enum hx_prog_op op;
  int micro_batch;
  enum hx_schedule_phase phase;
};

/* One MPI rank: plan devices the plan leaves unused get no rank, so world
 * ranks are dense and numbered in device order. */
struct hx_prog_rank {
  int device; /* cluster rank */
  int pipeline, stage;
  const struct hx_pipeline *pl;
  const struct hx_stage *st;
  int first_sequence;           /* index in the global batch of its pipeline's first sequence */
  int prev_leader, next_leader; /* world ranks, -1 at the ends */
  int tp_rank;
  int *tp_group;      /* world ranks of its stage, by TP rank (st->tp entries) */
  int leader_tp_rank; /* TP rank of the stage leader */
  int *head_bounds;   /* st->tp + 1 query-head boundaries of the stage's TP split */
  int *ffn_bounds;    /* st->tp + 1 ffn-column boundaries */
  int activation_slots;
  int nsteps;
  struct hx_prog_step *steps;
  /* HexiSeq stages (st->seq_layout): the stage is nunits units of st->tp
   * devices, unit u = st->devices[u*tp .. (u+1)*tp); the rank's TP group is
   * its unit. Other stages: one unit, the whole stage. */
  int unit, nunits;
  int *unit_contacts; /* per unit: world rank of its device of TP rank leader_tp_rank */
};

/* The tensor parts a gradient all-reduce sums (rtlib/hexic_rt.h's
 * enum hx_rt_sync_part, same values). */
enum hx_prog_part {
  PART_TOK_EMB = 1,
  PART_HEAD = 2,
  PART_NORMS = 4,
  PART_HEADS = 8,
  PART_FFN = 16,
  PART_KV = 32,
};

/* A gradient all-reduce over every rank that holds the same part of the
 * same tensors (see struct hx_rt_group). */
struct hx_prog_group {
  unsigned parts;
  int layer_begin, layer_end; /* layer parts; -1 otherwise */
  int head_begin, head_end, ffn_begin, ffn_end, kv_begin, kv_end;
  int nranks;
  int *ranks; /* world ranks, increasing */
};

struct program_set {
  const struct hx_ctx *ctx;
  const struct hx_plan *plan;
  int nranks;
  struct hx_prog_rank *ranks; /* by world rank */
  int *world_of_device;       /* -1 when unused */
  int ngroups;
  struct hx_prog_group *groups; /* ids are indices */
  char fingerprint[17];         /* FNV-1a 64 of everything the ranks must agree on, hex */
  double *memory_need;          /* by cluster device: bytes the plan's memory model needs */
};

/* The emitters receive a const context but allocate from its arena like
 * every other pass; the arena is the one mutable part they touch. */
static inline struct hx_arena *hx_prog_arena(const struct program_set *set) {
  return (struct hx_arena *)&set->ctx->arena;
}

/* Fills set from the plan (arena memory). */
void hx_build_program_set(const struct hx_ctx *ctx, const struct hx_plan *plan,
                          struct program_set *set);
bool hx_group_has_rank(const struct hx_prog_group *g, int rank);
/* False (with an error) when the plan carries gradient-sync groups that do
 * not match the ones derived from its stages. */
bool hx_plan_groups_agree(const struct program_set *set);

void hx_emit_rank_source(const struct program_set *set, FILE *f, int rank);
void hx_emit_makefile(const struct program_set *set, FILE *f, int unused);
/* The Makefile rules that build libhexic.a from rtlib/, its backend
 * rtlib/BACKEND/ ("cpu" or "cuda") and kernels/cpu/; both targets share them
 * (emit_program_set.c). */
void hx_emit_runtime_library_rules(FILE *f, const char *backend);
void hx_emit_launch_script(const struct program_set *set, FILE *f, int unused);
void hx_emit_slurm_script(const struct program_set *set, FILE *f, int unused);

/* ---- --target=cuda (emit_cuda.c) ---- */

/* The CUDA architecture of world rank w's GPU (90: sm_90; sema resolved it). */
int hx_rank_cuda_arch(const struct program_set *set, int w);
/* False (with an error) for a plan the CUDA kernels cannot run. */
bool hx_cuda_plan_supported(const struct program_set *set);
/* The Makefile of a --target=cuda program set: one kernel library per
 * architecture in the plan, each rank linked against its own GPU's. */
void hx_emit_cuda_makefile(const struct program_set *set, FILE *f, int unused);
/* launch.sh's GPU lines: the binding it relies on and a check of this
 * machine's GPUs (warnings only). */
void hx_emit_launch_gpu_check(const struct program_set *set, FILE *f);
void hx_emit_launch_gpu_header(FILE *f);

#endif
