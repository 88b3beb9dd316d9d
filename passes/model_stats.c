/* model-stats: the exact parameter counts, FLOPs and activation bytes of the
 * Llama decoder of docs/model-spec.md, which the cost model reads.
 *
 * Notation: D hidden, F ffn, H heads, K kv_heads, hd = D/H, kv = K*hd,
 * V vocab, T seq_len. FLOPs count a multiply-add as 2. */
#include "passes.h"

/* RMSNorm per element: square, accumulate, scale by 1/rms, multiply by gain. */
enum { RMSNORM_FLOPS_PER_ELEM = 4 };
/* SiLU(g) * u per ffn element: exp, add, divide, multiply. */
enum { SWIGLU_FLOPS_PER_ELEM = 4 };
/* Softmax cross-entropy per logit: subtract max, exp, accumulate. */
enum { XENT_FLOPS_PER_LOGIT = 3 };

static int64_t layer_params(const struct hx_model *m) {
  int64_t d = m->hidden, kv = m->kv_heads * m->head_dim;
  int64_t attn = d * d /* wq */ + 2 * kv * d /* wk, wv */ + d * d /* wo */;
  int64_t mlp = 3 * m->ffn * d; /* w_gate, w_up, w_down */
  return attn + mlp + 2 * d;    /* + attn_norm, mlp_norm */
}

/* Forward FLOPs per token of one decoder layer, a token of a full sequence:
 *   QKV projections 2 D (D + 2 kv), output projection 2 D^2, MLP 6 D F;
 *   causal attention: query t scores t+1 keys and mixes t+1 values, 4 D (t+1)
 *   FLOPs over all heads (GQA shares K/V, not the work), averaged over
 *   t = 0..T-1: 2 D (T+1);
 *   two RMSNorms 2 * 4 D; SwiGLU gating 4 F. RoPE (3 FLOPs per rotated
 *   element) and residual adds (2 D) are left out: by this same arithmetic
 *   they are 0.007% of a Llama-2-7B layer, though 0.6% of the tiny model's. */
static double layer_fwd_flops(const struct hx_model *m) {
  double d = (double)m->hidden, f = (double)m->ffn, t = (double)m->seq_len;
  double kv = (double)(m->kv_heads * m->head_dim);
  double proj = 2 * d * (d + 2 * kv) + 2 * d * d + 6 * d * f;
  double attn = 2 * d * (t + 1);
  return proj + attn + 2 * RMSNORM_FLOPS_PER_ELEM * d + SWIGLU_FLOPS_PER_ELEM * f;
}

/* Final RMSNorm 4 D, LM head 2 D V, softmax cross-entropy 3 V. */
static double head_fwd_flops(const struct hx_model *m) {
  double d = (double)m->hidden, v = (double)m->vocab;
  return RMSNORM_FLOPS_PER_ELEM * d + 2 * d * v + XENT_FLOPS_PER_LOGIT * v;
}

/* Bytes kept for backward per token of one layer, counted the way Korthikanti
 * et al. 2022 ("Reducing Activation Recomputation in Large Transformer
 * Models", Sec. 4.1) count them, adapted to this decoder: no dropout (no
 * masks), SwiGLU, GQA, and FlashAttention, which keeps Q, K, V, the output and
 * a per-head fp32 log-sum-exp instead of the T x T scores (no s^2 term).
 * Elements stored: attention norm input x (D) and output (D), Q (D), K and V
 * (2 kv), attention output o (D), MLP norm input (D) and output (D), gate and
 * up outputs (2 F), their SwiGLU product (F): 6 D + 2 kv + 3 F elements of e
 * bytes, plus 4 H bytes of log-sum-exp. */
static double layer_act_bytes(const struct hx_model *m, double e) {
  double d = (double)m->hidden, f = (double)m->ffn;
  double kv = (double)(m->kv_heads * m->head_dim);
  return e * (6 * d + 2 * kv + 3 * f) + 4.0 * (double)m->heads;
}

/* Full recompute keeps only each layer's input (Korthikanti et al., Sec. 5). */
static double layer_act_bytes_recompute(const struct hx_model *m, double e) {
  return e * (double)m->hidden;
}

/* Final norm input and output (2 D elements) and fp32 logits (4 V bytes),
 * whose gradient the fused cross-entropy writes in place. */
static double head_act_bytes(const struct hx_model *m, double e) {
  return e * 2.0 * (double)m->hidden + 4.0 * (double)m->vocab;
}

bool hx_pass_model_stats(struct hx_ctx *ctx) {
  if (!ctx->has_model)
    return true;
  struct hx_model *m = &ctx->model;
  double e = ctx->has_train && ctx->train.precision == HX_PREC_FP32 ? 4.0 : 2.0;
  m->head_dim = m->hidden / m->heads;
  m->params_layer = layer_params(m);
  m->params_embedding = m->vocab * m->hidden;
  m->params_head = m->tie_embeddings ? 0 : m->vocab * m->hidden;
  m->params_final_norm = m->hidden;
  m->params_total = m->layers * m->params_layer + m->params_embedding + m->params_head +
                    m->params_final_norm;
  m->flops_layer_fwd = layer_fwd_flops(m);
  m->flops_embedding_fwd = 0; /* a gather */
  m->flops_head_fwd = head_fwd_flops(m);
  m->act_bytes_layer = layer_act_bytes(m, e);
  m->act_bytes_layer_recompute = layer_act_bytes_recompute(m, e);
  m->act_bytes_head = head_act_bytes(m, e);
  return true;
}
