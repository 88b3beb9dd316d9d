/* The model and training settings, checked. Derived figures (parameters,
 * FLOPs, activation bytes) are filled by passes/model_stats.c and are what the
 * cost model reads. */
#ifndef HX_MODEL_H
#define HX_MODEL_H

#include <stdbool.h>
#include <stdint.h>

#include "loc.h"

struct hx_model {
  struct location loc;
  const char *name;
  int64_t layers, hidden, ffn, heads, kv_heads, vocab, seq_len;
  double rope_theta, norm_eps;
  bool tie_embeddings;
  /* Llama 3's RoPE frequency scaling (rope_scaling = llama3; the kernels'
   * hxk_dims): rope_factor 0 is none. */
  double rope_factor, rope_low_freq_factor, rope_high_freq_factor;
  int64_t rope_original_max_len;

  /* Derived (model_stats). Counts are exact integers; FLOPs are per token of
   * a full seq_len sequence (causal attention averaged over positions). */
  int64_t head_dim;
  int64_t params_layer;      /* one decoder layer: attention + MLP + 2 norms */
  int64_t params_embedding;  /* vocab x hidden */
  int64_t params_head;       /* LM head (0 when tied) */
  int64_t params_final_norm; /* hidden */
  int64_t params_total;
  double flops_layer_fwd;     /* per token, one decoder layer, forward */
  double flops_embedding_fwd; /* per token (a gather: counted as 0) */
  double flops_head_fwd;      /* per token: final norm + LM head + softmax */
  double act_bytes_layer;     /* per token, one layer, kept for backward */
  double act_bytes_layer_recompute; /* per token, one layer, with full recompute */
  double act_bytes_head;      /* per token, logits and their softmax */
};

enum hx_precision { HX_PREC_BF16, HX_PREC_FP32 };
enum hx_recompute { HX_RECOMPUTE_NONE, HX_RECOMPUTE_FULL, HX_RECOMPUTE_AUTO };
enum hx_optimizer { HX_OPT_ADAMW, HX_OPT_SGD };
enum hx_pp_schedule { HX_PP_1F1B, HX_PP_GPIPE };
/* train field `optimizer_sharding`: ZeRO-1 splits the optimizer state (fp32
 * master + Adam moments) of each gradient-sync group across its members. */
enum hx_opt_sharding { HX_SHARD_NONE, HX_SHARD_ZERO1 };

struct hx_train {
  struct location loc;
  int64_t global_batch;   /* sequences per optimizer step */
  int64_t micro_batch;    /* 0: the planner chooses */
  struct location micro_batch_loc; /* where the train block sets it (warnings) */
  enum hx_precision precision;
  enum hx_recompute recompute;
  enum hx_optimizer optimizer;
  enum hx_pp_schedule schedule; /* train field `schedule = 1f1b | gpipe` */
  enum hx_opt_sharding optimizer_sharding; /* default zero1 (parser) */
  /* train field `sequence_parallel` (default true): Megatron's sequence
   * parallelism on TP stages of whole sequences (HexiSeq stages keep the
   * all-reduces); a --plan file's "train" may set it instead. */
  bool sequence_parallel;
  double lr, beta1, beta2, weight_decay, grad_clip, eps;
  int64_t warmup_steps, steps, seed;
  const char *data;       /* NULL: synthetic tokens */
  int64_t checkpoint_every; /* 0: never */
  const char *checkpoint_dir;
};

#endif
