/* The plan IR: one representation for every kind of parallelism hexic plans.
 *
 *   plan
 *    ├─ pipelines[]        data-parallel replicas; each with its OWN micro-batch
 *    │   │                 size and count (asymmetric DP)
 *    │   └─ stages[]       each with its OWN devices, TP degree and contiguous
 *    │                     decoder-layer range (asymmetric TP/PP); a leader
 *    │                     device talks to the neighbouring stages
 *    ├─ devices[]          per rank: where it sits (pipeline, stage, TP rank)
 *    │                     and its share of one sequence: token ranges and a
 *    │                     head range (HexiSeq context/head parallelism)
 *    └─ groups[]           communicator tables: TP groups, gradient-sync
 *                          sub-groups with their chunk slices, CP rings, HP
 *                          all-to-all groups with ragged split tables
 *
 * Decoder layers are numbered 0..layers-1; the embedding lives on a
 * pipeline's first stage, the final norm and LM head on its last. */
#ifndef HX_PLAN_H
#define HX_PLAN_H

#include <stdbool.h>
#include <stdint.h>

#include "model.h"

struct hx_range {
  int64_t begin, end; /* [begin, end) */
};

/* A stage's context x head parallel layout (passes/cost/cost.h); NULL when the
 * stage runs every sequence whole (cp = hp = 1). */
struct hx_seq_layout;

struct hx_stage {
  int ndevices;
  int *devices;        /* ranks; for TP, devices[i] has TP rank i */
  int tp;              /* tensor-parallel degree */
  int cp, hp;          /* context x head parallel grid (1 x 1 when unused);
                          ndevices == tp * cp * hp */
  int layer_begin, layer_end; /* decoder layers [begin, end) */
  int leader;          /* rank that exchanges activations with neighbours */
  bool recompute;      /* full activation recompute on this stage */
  /* HexiSeq stages: units of tp devices, their HP groups, tokens and heads
   * (immutable once built, so plan copies share it). With a layout, cp is the
   * number of HP groups, hp the largest group, and ndevices == tp * units. */
  const struct hx_seq_layout *seq_layout;
  /* ZeRO-1 while a planner searches, before the plan has groups: the
   * share (0 < opt_share < 1) of its optimizer state a device of this stage
   * is priced with; 0 (or >= 1): the whole state. Plans with shard_ppm
   * groups are priced exactly by hx_plan_memory (passes/cost/cost.h). */
  double opt_share;
};

struct hx_pipeline {
  int nstages;
  struct hx_stage *stages;
  int64_t micro_batch_size; /* sequences per micro-batch */
  int64_t micro_batches;    /* micro-batches per iteration */
};

struct hx_device_plan {
  int pipeline, stage;  /* -1 when the device is unused by the plan */
  int tp_rank;
  int cp_rank, hp_rank;
  int nseq;             /* token ranges of one sequence this device holds */
  struct hx_range *seq; /* causal balance: several chunks (zig-zag) */
  struct hx_range heads;/* attention heads [begin, end) after HP/TP */
};

enum hx_group_kind {
  HX_GROUP_TP,       /* a stage's tensor-parallel group */
  HX_GROUP_GRAD,     /* gradient all-reduce sub-group for one slice of layers */
  HX_GROUP_UNSPLIT,  /* all-reduce of weights TP does not split (norms, ...) */
  HX_GROUP_CP_RING,  /* ring attention: K/V passed around */
  HX_GROUP_HP_A2A,   /* Ulysses all-to-all: sequence shards <-> head shards */
};

enum { HX_HOLDS_EMBEDDING = 1, HX_HOLDS_HEAD = 2 };

#define HX_PPM 1000000 /* shard_ppm: parts per million */

struct hx_group {
  enum hx_group_kind kind;
  int nranks;
  int *ranks;
  /* HX_GROUP_GRAD / UNSPLIT: which layers and which slice of each member's
   * TP shard the group reduces. A layer whose TP degrees across pipelines are
   * t_1..t_k is cut into nslices = lcm(t_i) slices along the TP dimension;
   * slice k is owned by TP rank k*t_i/nslices of pipeline i. */
  int layer_begin, layer_end; /* -1,-1: the embedding/head weights */
  int slice, nslices;
  /* Layer -1 groups: which of those weights the group reduces, a mask of
   * HX_HOLDS_*; the embedding lives on first stages, the final norm and LM
   * head on last stages, so a plan may carry separate groups for each. 0
   * (plans read from files): derived from the members by hx_group_holds. */
  unsigned holds;
  /* HX_GROUP_HP_A2A: per member, what it sends to each other member in the
   * sequence -> head all-to-all, in (token, head) vectors of head_dim
   * elements: sender tokens x receiver heads (nranks x nranks, row = sender);
   * the head -> sequence all-to-all sends the transpose. */
  int64_t *split_table;
  /* HX_GROUP_GRAD / UNSPLIT of a zero1 plan: per member (in ranks order) its
   * share of the group's optimizer state in parts per million, each >= 0,
   * summing to 1000000; member i owns packed floats [floor(n*S_i/1e6),
   * floor(n*S_{i+1}/1e6)) with S_i = shard_ppm[0] + ... + shard_ppm[i-1].
   * NULL: unsharded (every member keeps the whole state). */
  int32_t *shard_ppm;
};

struct hx_sim_result {
  bool valid;
  double iteration_s;
  double tokens_per_s;
  double mfu;          /* model FLOPs (no recompute) / (time * sum of peaks) */
  double bubble;       /* idle fraction of compute devices during the pipeline phase */
  double compute_s, pipeline_s, grad_sync_s, optimizer_s; /* where the time goes */
  double *busy_s;      /* per rank */
  double *peak_memory; /* per rank, bytes */
};

struct hx_plan {
  const char *strategy; /* "hexiscale", "symmetric", "symmetric-subset", "exhaustive",
                           "hexiseq", "ring", "ulysses", "usp", "file" */
  const char *description; /* e.g. "dp=2 tp=2 pp=2 mbs=1" for baselines */
  enum hx_pp_schedule schedule;
  enum hx_opt_sharding optimizer_sharding; /* what the plan uses (groups' shard_ppm) */
  int npipelines;
  struct hx_pipeline *pipelines;
  int ndevices;              /* == cluster.ndevices */
  struct hx_device_plan *devices; /* indexed by rank */
  int ngroups;
  struct hx_group *groups;
  struct hx_sim_result sim;
  /* The baselines a planner compared against (HexiSeq: Ring, Ulysses, USP,
   * symmetric), each simulated; written to plan.json's baselines[]. */
  int nbaselines;
  struct hx_plan **baselines;
};

#endif
