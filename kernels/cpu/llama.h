/* CPU kernels of a Llama decoder: fp32, forward and backward, matrix products
 * through OpenBLAS. The math is docs/model-spec.md, exactly; every kernel
 * below restates the part it computes.
 *
 * Two levels:
 *  (a) single kernels (embedding, rmsnorm, rope, causal GQA attention, swiglu,
 *      linear, residual add, cross-entropy, AdamW, clipping, lr schedule,
 *      parameter init), each a forward/backward pair;
 *  (b) a decoder layer (forward / backward over a caller-owned activation
 *      buffer, optionally recomputing) and the model head (final norm + LM
 *      head + cross-entropy, forward and backward in one pass).
 *
 * Conventions, for every function here:
 *  - Matrices are row-major. A linear layer y = x W^T has W [out, in].
 *  - Tokens of a micro-batch are laid out as nseq sequences of seq_len
 *    positions: token n = s*seq_len + t sits at position t of sequence s.
 *  - Backward functions ADD into every gradient they produce (parameters and
 *    inputs alike), so callers zero once and accumulate over micro-batches.
 *    Exception, stated there: the layer-level backward WRITES dx.
 *  - No global state, no allocation: every buffer comes from the caller, with
 *    a *_floats() function giving its size. Sizes are counts of floats.
 *  - Tensor parallelism (Megatron): a layer is held as a TP shard (struct
 *    hxk_shard). The kernels never talk to MPI; where Megatron all-reduces,
 *    the layer calls the caller's hxk_allreduce_fn (NULL when TP degree 1).
 */
#ifndef HX_KERNELS_LLAMA_H
#define HX_KERNELS_LLAMA_H

#include <stdbool.h>
#include <stdint.h>

/* Sums buf[0..n) element-wise over the TP group, in place. Every rank of the
 * group calls the layer functions with the same shapes, so the hook is called
 * the same number of times in the same order on each. */
typedef void (*hxk_allreduce_fn)(float *buf, long n, void *arg);

/* The model's shape (docs/model-spec.md notation in brackets). */
struct hxk_dims {
  int dim;       /* D */
  int ffn;       /* F */
  int heads;     /* H */
  int kv_heads;  /* K; heads % kv_heads == 0 */
  int head_dim;  /* hd = D / H; even (RoPE works on pairs) */
  int vocab;     /* V */
  int seq_len;   /* T */
  int layers;    /* L (only init std and schedules read it) */
  float norm_eps;
  double rope_theta;
  /* Llama 3's RoPE frequency scaling (transformers' rope_type "llama3";
   * docs/model-spec.md): rope_factor 0 is none. Frequencies whose wavelength
   * exceeds rope_original_max_len / rope_low_freq_factor are divided by
   * rope_factor, those under rope_original_max_len / rope_high_freq_factor
   * kept, the band between interpolated smoothly. */
  double rope_factor, rope_low_freq_factor, rope_high_freq_factor;
  int rope_original_max_len;
};

/* Checks the shape and fills head_dim from dim/heads; returns false, leaving
 * *d untouched, when it is not a valid Llama shape. */
bool hxk_dims_check(struct hxk_dims *d);

/* ---------------------------------------------------------------------------
 * Tensor-parallel shard of one decoder layer.
 *
 * The rank holds query heads [q_begin, q_end) and ffn columns
 * [ffn_begin, ffn_end); shards may be uneven. Column-parallel: the rows of
 * wq (heads), wk/wv (kv heads), w_gate/w_up (ffn) that produce its slice.
 * Row-parallel: the matching columns of wo and w_down, stored packed
 * ([D, nq*hd] and [D, nf]).
 *
 * GQA: query head h reads kv head h / (H/K). The shard holds every kv head its
 * query heads read, kv_begin = q_begin / G, kv_end = (q_end - 1) / G + 1 with
 * G = H/K. When a TP split cuts a group of G query heads, the kv head of that
 * group is REPLICATED on the ranks that share it: each computes its k/v
 * redundantly (identical values), and each rank's gradient for those wk/wv
 * rows holds only the contribution of its own query heads. The true gradient
 * of a replicated kv row is the sum over the ranks that hold it; the caller
 * must all-reduce those rows among them (hxk_kv_owner_count tells how many)
 * before the optimizer, which then keeps the replicas identical. The input
 * gradient needs no such care: the column-parallel all-reduce of da already
 * adds every rank's partial dk/dv contribution exactly once.
 *
 * Norm gains are replicated on every TP rank; their gradients come out
 * complete and identical on every rank (they are computed after the
 * all-reduce), so they need no TP reduction.
 * ------------------------------------------------------------------------- */
struct hxk_shard {
  int q_begin, q_end;     /* query heads */
  int kv_begin, kv_end;   /* kv heads read by those query heads (derived) */
  int ffn_begin, ffn_end; /* ffn columns */
};

/* Builds a shard from query heads [q_begin, q_end) and ffn [ffn_begin,
 * ffn_end), deriving the kv range. Returns false if a range is empty or out
 * of bounds. The unsplit layer is hxk_shard_make(d, 0, H, 0, F, s). */
bool hxk_shard_make(const struct hxk_dims *d, int q_begin, int q_end,
                    int ffn_begin, int ffn_end, struct hxk_shard *s);

/* Number of ranks of a TP group that hold kv head `kv`, given the group's
 * query-head boundaries q_bounds[0..degree] (q_bounds[0] = 0,
 * q_bounds[degree] = H). 1 when the head is not replicated. */
int hxk_kv_owner_count(const struct hxk_dims *d, const int *q_bounds,
                       int degree, int kv);

/* ---------------------------------------------------------------------------
 * Parameters: ids, init, layout.
 * ------------------------------------------------------------------------- */

/* The model's tensors; per-layer ones in the spec's per-layer order
 * (HXK_ATTN_NORM .. HXK_W_DOWN are indices 0..8 of that list). */
enum hxk_param {
  HXK_ATTN_NORM = 0,
  HXK_WQ,
  HXK_WK,
  HXK_WV,
  HXK_WO,
  HXK_MLP_NORM,
  HXK_W_GATE,
  HXK_W_UP,
  HXK_W_DOWN,
  HXK_LAYER_NPARAMS, /* count of per-layer tensors */
  HXK_TOK_EMB = 16,
  HXK_FINAL_NORM,
  HXK_LM_HEAD,
};

/* The spec's tensor id: tok_emb 0, final_norm 1, lm_head 2, layer tensor j of
 * layer l: 16 + 16*l + j. `layer` is ignored for the global tensors. */
uint64_t hxk_param_id(enum hxk_param p, int layer);

/* Init std of a tensor: 0.02, or 0.02/sqrt(2L) for wo and w_down; 0 for the
 * norm gains, which are initialised to ones (no random draw). */
double hxk_param_std(enum hxk_param p, int layers);

/* Whether AdamW decays the tensor: matrices yes, norm gains no. */
bool hxk_param_decays(enum hxk_param p);

/* Full (unsharded) shape [rows, cols] of a tensor; a vector is [1, n]. */
void hxk_param_shape(const struct hxk_dims *d, enum hxk_param p, long *rows,
                     long *cols);

/* The slice of the full tensor that a shard holds: rows [*r0, *r1), columns
 * [*c0, *c1). Norms and global tensors: the whole tensor. */
void hxk_param_slice(const struct hxk_dims *d, const struct hxk_shard *s,
                     enum hxk_param p, long *r0, long *r1, long *c0, long *c1);

/* splitmix64 of the spec (uint64 arithmetic). */
uint64_t hxk_splitmix64(uint64_t x);

/* Writes rows [r0, r1) x columns [c0, c1) of the full tensor [*, cols] with
 * id `tensor_id` into dst, packed row-major ([r1-r0, c1-c0]):
 *   key = splitmix64(seed * 0x100000001B3 + id)
 *   u(n) = ((splitmix64(key + n) >> 11) + 0.5) * 2^-53
 *   full[i] = std * sqrt(-2 ln u(2i)) * cos(2 pi u(2i+1)),  i = r*cols + c.
 * Computed in double, rounded once to float; each element depends only on its
 * full index, so any split of a tensor initialises the same values bit for bit. */
void hxk_init_tensor(float *dst, uint64_t seed, uint64_t tensor_id, long cols,
                     long r0, long r1, long c0, long c1, double std);

/* Initialises the shard's slice of parameter p (ones for norm gains,
 * hxk_init_tensor with the spec's id and std otherwise). */
void hxk_init_param(float *dst, const struct hxk_dims *d,
                    const struct hxk_shard *s, uint64_t seed,
                    enum hxk_param p, int layer);

/* One decoder layer's tensors (a TP shard of them), pointers into caller
 * memory. The same struct carries weights (read) and gradients (added to).
 *   attn_norm [D]          mlp_norm [D]
 *   wq [nq*hd, D]          w_gate [nf, D]
 *   wk [nkv*hd, D]         w_up   [nf, D]
 *   wv [nkv*hd, D]         w_down [D, nf]
 *   wo [D, nq*hd]
 * with nq = q_end-q_begin, nkv = kv_end-kv_begin, nf = ffn_end-ffn_begin. */
struct hxk_layer_params {
  float *attn_norm, *wq, *wk, *wv, *wo;
  float *mlp_norm, *w_gate, *w_up, *w_down;
};

/* Floats of one tensor of the shard, and of all nine (one layer). */
long hxk_layer_param_floats(const struct hxk_dims *d, const struct hxk_shard *s,
                            enum hxk_param p);
long hxk_layer_floats(const struct hxk_dims *d, const struct hxk_shard *s);

/* Points p's members into a flat buffer of hxk_layer_floats() floats, the
 * nine tensors back to back in the spec's order (so a layer's parameters,
 * gradients and Adam moments can each be one flat buffer). */
void hxk_layer_bind(struct hxk_layer_params *p, float *base,
                    const struct hxk_dims *d, const struct hxk_shard *s);

/* Fills mask[0..hxk_layer_floats) with 1 for the elements AdamW decays and 0
 * for the norm gains, in hxk_layer_bind's layout. */
void hxk_layer_decay_mask(uint8_t *mask, const struct hxk_dims *d,
                          const struct hxk_shard *s);

/* ---------------------------------------------------------------------------
 * (a) Single kernels. n = number of tokens.
 * ------------------------------------------------------------------------- */

/* out[n, D] = emb[tok[n], :]. */
void hxk_embedding_forward(float *out, const int32_t *tok, const float *emb,
                           long n, int dim);
/* demb[tok[n], :] += dout[n, :]. */
void hxk_embedding_backward(float *demb, const int32_t *tok, const float *dout,
                            long n, int dim);

/* out_i = g_i * x_i * r, r = 1/sqrt(mean_j x_j^2 + eps), per token; rstd[n]
 * keeps r for the backward. out may alias x. */
void hxk_rmsnorm_forward(float *out, float *rstd, const float *x,
                         const float *g, long n, int dim, float eps);
/* With xh = x r:  dg_i += sum_tokens dout_i xh_i;
 *                 dx_i += r (g_i dout_i - xh_i * mean_j(g_j dout_j xh_j)). */
void hxk_rmsnorm_backward(float *dx, float *dg, const float *dout,
                          const float *x, const float *g, const float *rstd,
                          long n, int dim);

/* cos/sin table of RoPE: tab[(t*hd/2 + i)*2 + {0,1}] = {cos, sin} of
 * phi = t * theta^(-2i/hd), for t < seq_len, i < hd/2 (phi in double).
 * hxk_rope_table_floats() = seq_len * hd. */
long hxk_rope_table_floats(const struct hxk_dims *d);
void hxk_rope_table(float *tab, const struct hxk_dims *d);

/* RoPE in place on x[n, nheads*hd] (every head of every token), pairs
 * (2i, 2i+1) of a head: (y0, y1) = (x0 c - x1 s, x0 s + x1 c), position t =
 * token index mod seq_len. */
void hxk_rope_forward(float *x, const float *tab, long n, int nheads, int hd,
                      int seq_len);
/* The transpose rotation: dx0 += dy0 c + dy1 s, dx1 += -dy0 s + dy1 c.
 * dx must not alias dy; hxk_rope_backward_inplace is the in-place form
 * (dy := R^T dy) the layer uses. */
void hxk_rope_backward(float *dx, const float *dy, const float *tab, long n,
                       int nheads, int hd, int seq_len);
void hxk_rope_backward_inplace(float *dy, const float *tab, long n, int nheads,
                               int hd, int seq_len);

/* Causal GQA attention over nseq sequences of seq_len tokens.
 * q [n, nq*hd], k and v [n, nkv*hd] (n = nseq*seq_len), local query head i
 * reads local kv head kv_of[i]. Per sequence and head:
 *   s_{t,u} = q_t.k_u / sqrt(hd) (u <= t),  p = softmax_u(s_t),
 *   o_t = sum_u p_{t,u} v_u,  lse_t = log sum_u exp(s_{t,u}).
 * Writes o [n, nq*hd] and lse [n, nq] (the backward recomputes p from lse, so
 * nothing of size seq_len^2 is kept). scratch: hxk_attention_scratch_floats. */
long hxk_attention_scratch_floats(int seq_len);
void hxk_attention_forward(float *o, float *lse, const float *q,
                           const float *k, const float *v, const int *kv_of,
                           long nseq, int seq_len, int nq, int nkv, int hd,
                           float *scratch);
/* dP = dO V^T, dV += P^T dO, dS = P (dP - rowsum(P dP)),
 * dQ += dS K / sqrt(hd), dK += dS^T Q / sqrt(hd). */
void hxk_attention_backward(float *dq, float *dk, float *dv, const float *dout,
                            const float *q, const float *k, const float *v,
                            const float *lse, const int *kv_of, long nseq,
                            int seq_len, int nq, int nkv, int hd,
                            float *scratch);
/* kv_of[i] = (q_begin + i) / G - kv_begin for the shard's nq query heads. */
void hxk_kv_map(int *kv_of, const struct hxk_dims *d, const struct hxk_shard *s);

/* RoPE by global positions (context parallelism: a rank holds token ranges
 * of the sequence, not a prefix). Token row r = s*local_len + i of x[n,
 * nheads*hd] rotates by position pos[i] (0 <= pos[i] < the table's
 * seq_len); pos NULL means pos[i] = i. With pos[i] = i and local_len =
 * seq_len these equal hxk_rope_forward / hxk_rope_backward_inplace bit for
 * bit. */
void hxk_rope_forward_pos(float *x, const float *tab, long n, int nheads,
                          int hd, const int *pos, long local_len);
void hxk_rope_backward_pos_inplace(float *dy, const float *tab, long n,
                                   int nheads, int hd, const int *pos,
                                   long local_len);

/* Block-wise causal GQA attention by GLOBAL token positions: the building
 * block of ring attention and of the tiled CPU attention (tiles of
 * HXK_ATTN_TILE queries x HXK_ATTN_TILE keys; nothing of size queries x keys
 * is ever held, tiles whose keys are all invisible are skipped).
 *
 * nseq sequences: query row s*nq_tok + i (i < nq_tok) sits at global
 * position q_pos[i]; key/value row s*nk_tok + j at k_pos[j]; a query sees a
 * key iff k_pos[j] <= q_pos[i] (positions need not be sorted nor
 * contiguous; NULL means 0, 1, 2, ...). q [nseq*nq_tok, nq*hd], k and v
 * [nseq*nk_tok, nkv*hd]; local query head h reads kv head kv_of[h].
 *
 * Online softmax: (o, lse) is the running state over the key blocks merged
 * so far, o [nseq*nq_tok, nq*hd] normalised, lse [nseq*nq_tok, nq] = log sum
 * exp of every visible score s = q.k / sqrt(hd) seen. Merging a block with
 * block state (o_b, lse_b):  lse' = log(e^lse + e^lse_b),
 * o' = o e^(lse - lse') + o_b e^(lse_b - lse').  `first` initialises the
 * state (o = 0, lse = -inf) before merging, so a ring's first hop passes
 * true and the others false; the blocks may be merged in any order. Rows
 * that have seen no visible key keep lse = -inf and o = 0. After all blocks
 * of the sequence, (o, lse) equal hxk_attention_forward's. */
#define HXK_ATTN_TILE 64
long hxk_attention_block_scratch_floats(long nq_tok, long nk_tok, int nq,
                                        int hd);
void hxk_attention_block_forward(float *o, float *lse, const float *q,
                                 const int *q_pos, long nq_tok, const float *k,
                                 const float *v, const int *k_pos,
                                 long nk_tok, const int *kv_of, long nseq,
                                 int nq, int nkv, int hd, bool first,
                                 float *scratch);
/* delta [n, nq] = rowsum(dout * o) per token and head (flash-attention's
 * D), dout and o [n, nq*hd]. Written, not added. */
void hxk_attention_block_delta(float *delta, const float *dout, const float *o,
                               long n, int nq, int hd);
/* Backward of one key block given the FINAL lse (after every block was
 * merged) and delta: on visible pairs P = exp(s - lse),
 *   dV += P^T dO,  dP = dO V^T,  dS = P (dP - delta),
 *   dQ += dS K / sqrt(hd),  dK += dS^T Q / sqrt(hd).
 * ADDS into dq [nseq*nq_tok, nq*hd], dk and dv [nseq*nk_tok, nkv*hd]; GQA:
 * dk/dv of a kv head sum over the query heads that read it. Summed over the
 * key blocks of a sequence this is hxk_attention_backward. Rows with lse =
 * -inf contribute nothing. scratch: hxk_attention_block_scratch_floats. */
void hxk_attention_block_backward(float *dq, float *dk, float *dv,
                                  const float *dout, const float *q,
                                  const int *q_pos, long nq_tok,
                                  const float *k, const float *v,
                                  const int *k_pos, long nk_tok,
                                  const float *lse, const float *delta,
                                  const int *kv_of, long nseq, int nq, int nkv,
                                  int hd, float *scratch);

/* h = silu(g) * u, silu(z) = z / (1 + e^-z); arrays of n elements. */
void hxk_swiglu_forward(float *h, const float *g, const float *u, long n);
/* dg += dh u silu'(g), silu'(z) = s(z) (1 + z (1 - s(z))), s the sigmoid;
 * du += dh silu(g). */
void hxk_swiglu_backward(float *dg, float *du, const float *dh, const float *g,
                         const float *u, long n);

/* y[n, out] = x[n, in] W^T + beta * y  (cblas_sgemm; beta 0 or 1). */
void hxk_linear_forward(float *y, const float *x, const float *w, long n,
                        int in, int out, float beta);
/* dx[n, in] += dy W (skipped when dx is NULL); dW[out, in] += dy^T x. */
void hxk_linear_backward(float *dx, float *dw, const float *dy, const float *x,
                         const float *w, long n, int in, int out);

/* y = a + b (n elements; y may alias a or b). */
void hxk_residual_forward(float *y, const float *a, const float *b, long n);
/* da += dy, db += dy. */
void hxk_residual_backward(float *da, float *db, const float *dy, long n);

/* Cross-entropy of logits[n, V] against targets[n], scaled by the caller's
 * normaliser (e.g. 1/(B*T)): returns scale * sum_t -log softmax(logits_t)[tgt_t],
 * accumulated in double. */
double hxk_cross_entropy_forward(const float *logits, const int32_t *targets,
                                 long n, int vocab, double scale);
/* dlogits_t += scale (softmax(logits_t) - onehot(tgt_t)); no aliasing. */
void hxk_cross_entropy_backward(float *dlogits, const float *logits,
                                const int32_t *targets, long n, int vocab,
                                double scale);

/* ---------------------------------------------------------------------------
 * Optimizer pieces.
 * ------------------------------------------------------------------------- */

struct hxk_adamw {
  double beta1, beta2, eps, weight_decay;
};

/* One AdamW step over a flat buffer, t = step + 1 (step 0-based):
 *   m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2;
 *   w -= lr (m/(1-b1^t) / (sqrt(v/(1-b2^t)) + eps) + lambda w),
 * lambda = weight_decay where decay_mask[i] != 0 (NULL: everywhere), else 0.
 * g is read as is: clip it first (hxk_scale). */
void hxk_adamw_step(float *w, const float *g, float *m, float *v,
                    const uint8_t *decay_mask, long n,
                    const struct hxk_adamw *hp, long step, double lr);

/* sum_i buf[i]^2 in double: the partial sum of one buffer, so that callers add
 * (and all-reduce) partials to get the global norm's square. */
double hxk_sum_squares(const float *buf, long n);

/* Factor that clipping applies to every gradient given the global sum of
 * squares: grad_clip / sqrt(sumsq) if grad_clip > 0 and the norm exceeds it,
 * else 1. */
double hxk_clip_factor(double global_sumsq, double grad_clip);

/* buf[i] *= factor. */
void hxk_scale(float *buf, long n, float factor);

/* Learning rate of step s (0-based): linear warmup lr (s+1)/warmup while
 * s < warmup, then cosine from lr to lr/10 over the remaining steps:
 * p = (s - warmup) / max(1, steps - warmup), lr/10 + 0.5 (1 + cos(pi p)) 0.9 lr. */
double hxk_lr_at(long step, double lr, long warmup_steps, long steps);

/* ---------------------------------------------------------------------------
 * (b) Decoder layer.
 *
 *   a = rmsnorm(x, attn_norm); q,k,v = a wq^T, a wk^T, a wv^T; RoPE(q, k);
 *   o = attention(q, k, v); x1 = x + allreduce(o wo^T);
 *   m = rmsnorm(x1, mlp_norm); h = silu(m w_gate^T) * (m w_up^T);
 *   out = x1 + allreduce(h w_down^T)
 *
 * Backward all-reduces da (the column-parallel input gradient of q/k/v) and
 * dm (of gate/up) through the same hook. In recompute mode the backward
 * first re-runs the forward, so it calls the hook for the forward's two
 * all-reduces too (in forward order), then the backward's two.
 *
 * Sequence parallelism (ctx->sp_size > 1): x, out, dout and dx are the
 * member's rows; rmsnorm and the residuals run on them; the normed rows are
 * all-gathered before q/k/v and before gate/up, and the two all-reduces
 * become reduce-scatters. The backward all-gathers dout's rows and the kept
 * a / m rows, and reduce-scatters da and dm (recompute: the forward's
 * collectives first, as above).
 *
 * Sequence splits (context / head parallelism): a rank may hold only some
 * tokens of each sequence, local_len of them at global positions
 * positions[0..local_len) (RoPE and the causal mask use these), n =
 * nseq*local_len tokens. positions NULL and local_len 0 mean 0..seq_len-1
 * and seq_len (the whole sequence, today's results bit for bit). The
 * attention itself can be handed to the caller through an attention hook
 * (ring attention, Ulysses all-to-all): the layer calls it with the local
 * tokens' q, k, v after RoPE. Without a hook the layer attends over its
 * local tokens only (by their positions).
 * ------------------------------------------------------------------------- */
struct hxk_attention_hook {
  /* Floats the hook keeps from a forward to its backward, per micro-batch
   * (the layer stores them in its acts buffer after its own activations;
   * in recompute mode in its scratch, re-filled by the re-run forward), and
   * the scratch floats forward and backward need. */
  long (*saved_floats)(long nseq, void *arg);
  long (*scratch_floats)(long nseq, void *arg);
  /* o [n, nq*hd] = attention of the local tokens' q [n, nq*hd], k and v
   * [n, nkv*hd] (after RoPE). */
  void (*forward)(float *o, const float *q, const float *k, const float *v,
                  long nseq, float *saved, float *scratch, void *arg);
  /* ADDS dq, dk, dv of the local tokens (they arrive zeroed from the
   * layer), given dout [n, nq*hd] and the forward's q, k, v, o and saved. */
  void (*backward)(float *dq, float *dk, float *dv, const float *dout,
                   const float *q, const float *k, const float *v,
                   const float *o, const float *saved, long nseq,
                   float *scratch, void *arg);
  void *arg;
};

/* Sequence parallelism (Megatron's): sum the TP partials send[n, width] over
 * the group and keep this member's rows in recv[rows, width]; and fill
 * buf[n, width] from every member's rows (this member's are already in place
 * at its offset). Rows as hxk_sp_rows. */
typedef void (*hxk_sp_reduce_scatter_fn)(const float *send, float *recv, long n, int width,
                                         void *arg);
typedef void (*hxk_sp_allgather_fn)(float *buf, long n, int width, void *arg);

/* The rows [*begin, *end) of n token rows that member r of a TP group of p
 * holds under sequence parallelism: p contiguous blocks, the first n % p
 * members one row more. */
void hxk_sp_rows(long n, int p, int r, long *begin, long *end);

struct hxk_layer_ctx {
  const struct hxk_dims *dims;
  const struct hxk_shard *shard;
  const float *rope;       /* hxk_rope_table(dims) */
  const int *kv_of;        /* hxk_kv_map(dims, shard): nq entries */
  bool recompute;          /* keep only the layer input; recompute in backward */
  hxk_allreduce_fn allreduce; /* NULL: TP degree 1 */
  void *allreduce_arg;
  const int *positions;    /* [local_len] global positions; NULL: 0..T-1 */
  long local_len;          /* tokens per sequence held here; 0: seq_len */
  const struct hxk_attention_hook *attention; /* NULL: local attention */
  /* Sequence parallelism (sp_size > 1; 0 or 1: off): x, out, dout and dx
   * are this member's rows only (hxk_sp_rows of n over sp_size); the layer
   * all-gathers the normed rows before the column-parallel products and
   * reduce-scatters the row-parallel outputs instead of all-reducing them.
   * The norm gains' gradients then hold this member's rows' contribution
   * only: the caller sums them over the TP group. */
  int sp_size, sp_rank;
  hxk_sp_reduce_scatter_fn reduce_scatter;
  hxk_sp_allgather_fn allgather;
  void *sp_arg;
};

/* The local hook: hxk_attention_block_* over the local tokens only (queries
 * and keys both at `positions`), the reference a ring hook must match on
 * one rank and the tiled CPU attention. It keeps lse [n, nq] as its saved
 * floats; its scratch is the block kernel's plus delta [n, nq]. `local` is
 * the hook's arg: it must outlive every use of *hook. */
struct hxk_attention_local {
  const int *positions; /* [local_len]; NULL: 0..local_len-1 */
  long local_len;
  const int *kv_of;     /* nq entries */
  int nq, nkv, hd;
};
void hxk_attention_hook_local(struct hxk_attention_hook *hook,
                              struct hxk_attention_local *local);

/* Floats of the activation buffer kept from a layer's forward to its
 * backward (one per micro-batch in flight) for nseq sequences: the layer
 * input only when ctx->recompute, else everything the backward reads
 * (with a hook: followed by the hook's saved floats). */
long hxk_layer_acts_floats(const struct hxk_layer_ctx *ctx, long nseq);

/* Floats of the scratch buffer forward and backward need (not kept between
 * calls; one per thread of execution is enough); with a hook it includes
 * the hook's scratch (and, recomputing, its saved floats). */
long hxk_layer_scratch_floats(const struct hxk_layer_ctx *ctx, long nseq);

/* out[n, D] = layer(x[n, D]), n = nseq*local_len. Fills acts (hxk_layer_acts
 * floats). out must not alias x; x may be reused by the caller afterwards
 * (acts keeps its own copy). */
void hxk_layer_forward(const struct hxk_layer_ctx *ctx,
                       const struct hxk_layer_params *w, const float *x,
                       float *out, float *acts, float *scratch, long nseq);

/* From dout[n, D] and the acts of the matching forward: WRITES dx[n, D] (the
 * gradient of the layer input) and ADDS the weight gradients into g. dx must
 * not alias dout. In recompute mode acts is only read as the layer input;
 * the recomputed activations live in scratch. */
void hxk_layer_backward(const struct hxk_layer_ctx *ctx,
                        const struct hxk_layer_params *w,
                        const struct hxk_layer_params *g, const float *dout,
                        float *dx, const float *acts, float *scratch,
                        long nseq);

/* ---------------------------------------------------------------------------
 * Model head: final rmsnorm + LM head + cross-entropy. Not TP-split (each
 * rank that runs it holds the whole lm_head; with tied embeddings pass
 * tok_emb and its gradient as lm_head).
 * ------------------------------------------------------------------------- */
struct hxk_head_params {
  float *final_norm; /* [D] */
  float *lm_head;    /* [V, D] */
};

/* Tokens the head processes per chunk: logits of one chunk only are held. */
#define HXK_HEAD_CHUNK 64

long hxk_head_scratch_floats(const struct hxk_dims *d, long n);

/* Loss of x[n, D] against targets[n]: returns scale * sum_t -log p(tgt_t).
 * When g and dx are not NULL, also the backward of that scaled loss: ADDS
 * into g->final_norm, g->lm_head and dx. Logits are computed by chunks of
 * HXK_HEAD_CHUNK tokens, so scratch stays O(n*D + chunk*V). */
double hxk_head_forward_backward(const struct hxk_dims *d,
                                 const struct hxk_head_params *w,
                                 const struct hxk_head_params *g,
                                 const float *x, const int32_t *targets, long n,
                                 double scale, float *dx, float *scratch);

#endif
