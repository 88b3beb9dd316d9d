/* The interface between a generated rank program (rank_NNNN.c, written by
 * codegen/programs.c) and the runtime library. A rank program is nothing but
 * literal tables filled from the plan — shapes, layer range, micro-batches,
 * peers, gradient-sync groups, the 1F1B schedule — and a main that hands them
 * to hx_rt_main. The runtime never looks the plan up: what the tables say is
 * what the rank does, so the generated file documents the rank completely. */
#ifndef HEXIC_RT_H
#define HEXIC_RT_H

#include <stdbool.h>
#include <stdint.h>

/* The model, exactly as docs/model-spec.md names its dimensions. */
struct hx_rt_model {
  int layers, hidden, ffn, heads, kv_heads, vocab, seq_len;
  double rope_theta, norm_eps;
  int tie_embeddings; /* logits use tok_emb; no lm_head tensor */
  /* Llama 3's RoPE frequency scaling (kernels/cpu/llama.h's hxk_dims);
   * rope_factor 0 is none. */
  double rope_factor, rope_low_freq_factor, rope_high_freq_factor;
  int rope_original_max_len;
};

/* The plan's train precision. bf16: bf16 activations and forward weights
 * with fp32 master weights, gradients, gradient sums and AdamW moments;
 * fp32: fp32 throughout (the exactness mode). The CPU backend computes in
 * fp32 whatever this says. */
enum hx_rt_precision { HX_RT_FP32 = 0, HX_RT_BF16 = 1 };

/* Training settings; the command line may override steps, data and the
 * checkpoint directory (see hx_rt_main). */
struct hx_rt_train {
  int global_batch; /* B: sequences per optimizer step over all pipelines */
  double lr, beta1, beta2, eps, weight_decay, grad_clip;
  int warmup_steps, steps;
  uint64_t seed;
  const char *data;           /* token file; NULL: synthetic tokens */
  int checkpoint_every;       /* 0: never */
  const char *checkpoint_dir; /* NULL: "checkpoints" */
  int precision;              /* enum hx_rt_precision */
};

/* One entry of a rank's per-step schedule. Activations travel leader to
 * leader; each op names the micro-batch it works on. */
enum hx_rt_op_kind {
  HX_RT_RECV_ACT,  /* input activation of micro-batch m from the previous stage */
  HX_RT_FORWARD,   /* embedding (first stage), this stage's layers, loss (last stage) */
  HX_RT_SEND_ACT,  /* output activation of m to the next stage */
  HX_RT_RECV_GRAD, /* gradient of m's output activation from the next stage */
  HX_RT_BACKWARD,  /* backward of m, accumulating parameter gradients */
  HX_RT_SEND_GRAD, /* gradient of m's input activation to the previous stage */
  HX_RT_GRAD_SYNC, /* sum gradients over every gradient-sync group */
  HX_RT_OPTIMIZER, /* global-norm clipping and one AdamW step */
};

struct hx_rt_op {
  enum hx_rt_op_kind kind;
  int micro_batch; /* -1 for GRAD_SYNC and OPTIMIZER */
};

/* What a gradient-sync group sums: a bit set of tensor parts, each restricted
 * to the group's layer range and, for tensors tensor parallelism splits, to
 * the group's slice of heads, ffn columns or kv heads. */
enum hx_rt_sync_part {
  HX_RT_PART_TOK_EMB = 1, /* tok_emb (first stages, and last stages when tied) */
  HX_RT_PART_HEAD = 2,    /* final_norm and lm_head (lm_head absent when tied) */
  HX_RT_PART_NORMS = 4,   /* attn_norm and mlp_norm of the layers */
  HX_RT_PART_HEADS = 8,   /* wq rows and wo columns of query heads [head_begin, head_end) */
  HX_RT_PART_FFN = 16,    /* w_gate/w_up rows and w_down columns [ffn_begin, ffn_end) */
  HX_RT_PART_KV = 32,     /* wk and wv rows of kv heads [kv_begin, kv_end) */
};

/* A gradient all-reduce: every member holds the parts the group names, and
 * their gradients are summed (the loss already carries the global 1/(B*T), so
 * a sum makes every sequence weigh the same whatever its pipeline's batch
 * size). Tensors every TP rank holds whole with identical gradients (norm
 * gains, tok_emb, final_norm, lm_head) enter from TP rank 0 only: the other
 * TP ranks zero them before the sum, so each pipeline counts once and every
 * copy ends equal. A TP-split tensor is cut into lcm(TP degrees) slices and
 * slice k is reduced among the TP ranks holding it, one per pipeline; a kv
 * head that a TP split replicates is reduced over every rank holding it
 * (each holds only its own query heads' share). Ids are global and every
 * member creates its groups in increasing id order, which is what makes
 * communicator creation deadlock-free. */
struct hx_rt_group {
  int id;
  unsigned parts;             /* enum hx_rt_sync_part bits */
  int layer_begin, layer_end; /* decoder layers [begin, end) of the layer parts; else -1 */
  int head_begin, head_end;   /* HX_RT_PART_HEADS: query heads */
  int ffn_begin, ffn_end;     /* HX_RT_PART_FFN: ffn columns */
  int kv_begin, kv_end;       /* HX_RT_PART_KV: kv heads */
  int nranks;
  const int *ranks; /* increasing */
  /* ZeRO-1: per member (ranks' order) its share of the group's optimizer
   * state in parts per million, summing to 1000000: the gradients are
   * reduce-scattered, member i steps AdamW on (and keeps m and v of) only
   * [floor(n S_i / 1e6), floor(n S_{i+1} / 1e6)) of the group's n packed
   * floats (S_i the sum of the shares before i), and the updated weights
   * are all-gathered (rtlib/rt_exec_sync.c). NULL: unsharded, an all-reduce
   * and every member steps everything. */
  const int32_t *shard_ppm;
};

/* One link of the plan's cluster table: what a message between two ranks
 * costs there, alpha-beta (latency + bytes / bandwidth). */
struct hx_rt_link {
  double latency_s;
  double bandwidth; /* bytes/s */
};

/* Emulated heterogeneity (`--emulate`, CPU backend; the CUDA backend ignores
 * it): every rank of a plan runs on one machine, and each runs at the speed
 * its device has in the cluster file relative to this machine: the
 * cluster's emulation host (an `emulation { host = "gpu type" }` block,
 * the figures hexic-profile measured here), else its fastest device.
 * Codegen writes the figures as constants; rt_emulate.c applies them, and
 * nothing else in the runtime looks at them. */
struct hx_rt_emulation {
  /* the host's tflops x efficiency / this device's (>= 1): a forward,
   * backward or optimizer op ends slowdown x its reference CPU time (timed
   * in the calibration steps) after it began, its waits added */
  double slowdown;
  /* a message takes at least latency + bytes / bandwidth of these links */
  struct hx_rt_link prev, next; /* to prev_leader / next_leader (unused at the ends) */
  struct hx_rt_link tp;         /* the TP group's slowest link (unused when tp is 1) */
  const struct hx_rt_link *groups; /* per entry of groups[]: its slowest link */
};

/* The ring-attention and all-to-all tables of a HexiSeq rank
 * (rtlib/seq/rt_seq.h). */
struct hx_rt_seq;

struct hx_rt_rank_config {
  const char *program; /* "rank_0003": the launcher runs it as world rank 3 */
  int rank, world_size;
  const char *fingerprint; /* of the whole plan: every rank of one plan has the same */
  int pipeline, npipelines;
  int stage, nstages;
  int tp_rank, tp;
  const int *tp_group;        /* world ranks of this stage's TP group, by TP rank */
  int leader_tp_rank;         /* TP rank of the stage leader (receives, broadcasts, sends) */
  const int *head_bounds;     /* tp+1 query-head boundaries: TP rank r holds [b[r], b[r+1]) */
  const int *ffn_bounds;      /* tp+1 ffn-column boundaries, likewise */
  int recompute;              /* full activation recompute in backward */
  /* Megatron's sequence parallelism on a TP stage of whole sequences: norms
   * and residuals on this TP rank's rows, the TP all-reduces become a
   * reduce-scatter and an all-gather (a HexiSeq stage ignores it). */
  bool sequence_parallel;
  int layer_begin, layer_end; /* decoder layers [begin, end) */
  int has_embedding;          /* first stage: token embedding */
  int has_head;               /* last stage: final norm, LM head, loss */
  int micro_batch_size, micro_batches;
  int activation_slots;         /* micro-batches in flight at once: m uses slot m % slots */
  int first_sequence;           /* this pipeline's first index j in the global batch */
  int prev_leader, next_leader; /* world ranks; -1 at the pipeline's ends */
  const struct hx_rt_model *model;
  const struct hx_rt_train *train;
  int ngroups;
  const struct hx_rt_group *groups; /* only those this rank belongs to */
  int nops;
  const struct hx_rt_op *schedule; /* one optimizer step */
  /* The device the plan put this rank on: its GPU type's name (the CUDA
   * backend warns when the GPU it binds has another name) and the bytes the
   * plan's memory model assumes the rank needs there (0: unknown; a CUDA
   * rank exits at start when the GPU has less free). */
  const char *device_type;
  int64_t device_memory_bytes;
  /* What --metrics measures a step's MFU against: the model's FLOPs of one
   * optimizer step (3 x the forward's FLOPs per token x B x T, as the plan's
   * own MFU counts them) and the plan's peak FLOP/s (the sum of its devices'
   * tflops x 1e12). 0: unknown, and the metrics leave mfu out. */
  double model_flops_per_step, plan_peak_flops;
  /* What --emulate applies (NULL: the program cannot emulate; --emulate is
   * then refused). */
  const struct hx_rt_emulation *emulation;
  /* HexiSeq (context/head parallel) stages: the stage is units of tp ranks,
   * tp_group being this rank's unit; each unit holds only the tokens of its
   * ranges of every sequence (seq's table: embedding, norms, MLP, head and
   * loss run on those, attention through seq's ring and all-to-all).
   * Activations cross to the neighbouring stages whole: the stage leader
   * gathers them from and scatters them to the units' contacts (each unit's
   * rank of the leader's TP rank), so the next stage may split the sequence
   * differently. NULL (and stage_leader unused) when sequences are whole. */
  const struct hx_rt_seq *seq;
  int stage_leader; /* world rank of the stage leader */
};

/* Runs the rank: MPI start-up and world check, parameters, data, the
 * schedule once per step, checkpoints; returns the process exit status.
 * The backend is chosen when the program is linked: beside the runtime
 * (the C files of rtlib/) link those of rtlib/cpu/ (CPU kernels, MPI) or of
 * rtlib/cuda/ (a GPU bound by local rank, CUDA kernels, MPI staged through
 * host memory); both define the device and transport of rt_backend.h.
 * Options (every rank gets the same): --data FILE, --steps N,
 * --checkpoint-dir DIR, --checkpoint-every N, --checkpoint-overwrite (write
 * over another run's checkpoints there), --resume, --reschedule (resume
 * under another --steps), --emulate (run at the cluster file's speeds:
 * struct hx_rt_emulation), --dump-weights FILE
 * (after training, rank 0 gathers every rank's shards and writes the full
 * unsharded parameters in the spec's order: see rt_exec_params.c),
 * --init-from FILE.safetensors (initial weights from hexic-ckpt import; each
 * rank reads its slices), --memory-report FILE; evaluation (docs/evaluation.md):
 * --val-data FILE, --val-every N, --val-batches K (a validation loss after
 * every N steps and the last, on K global batches of FILE), --eval-only (the
 * loaded weights' loss, no update, no checkpoint); --metrics FILE.jsonl and
 * --metrics-append (one JSON object per step, rank 0). --checkpoint-dir
 * alone writes the last step's checkpoint. --resume reads a checkpoint of
 * any plan of the same model (rt_ckpt.h). */
int hx_rt_main(const struct hx_rt_rank_config *cfg, int argc, char **argv);

#endif
