/* CUDA kernels of the Llama decoder: the same operations, names and
 * conventions as kernels/cpu/llama.h (read side by side: hxk_X there is
 * hxc_X here), on device pointers and a cudaStream_t. The math is
 * docs/model-spec.md; each kernel restates the part it computes above its
 * definition in the .cu file of its op group (init.cu, embedding.cu,
 * norm.cu (RMSNorm and residuals), rope.cu, swiglu.cu, linear.cu,
 * attention.cu, attention_tc.cu and attention_block.cu, head.cu, optim.cu,
 * layer.cu).
 *
 * Conventions (those of the CPU kernels, plus what a GPU adds):
 *  - Row-major; a linear layer y = x W^T has W [out, in]; token n = s*T + t.
 *  - Backward functions ADD into every gradient they produce, except where
 *    the CPU version writes (the layer-level backward WRITES dx).
 *  - Every pointer is a device pointer unless said otherwise; every call is
 *    asynchronous on `stream`, and every CUDA/cuBLAS call inside is checked
 *    (kernels/cuda/cuda_check.h): failures go to the fatal handler.
 *  - Precision. `dt` is the element type of activations, of their gradients
 *    and of the weights as the forward reads them:
 *      HXC_FP32: fp32 throughout, no TF32 (the exactness mode, checked
 *                against the CPU kernels within 1e-5);
 *      HXC_BF16: bf16 storage, fp32 arithmetic inside every kernel and fp32
 *                accumulation in every matrix product.
 *    Always fp32, whatever dt: weight gradients (float *dw, *dg, ...), the
 *    optimizer's master weights and moments, rstd and lse, the loss.
 *    `void *` arguments hold dt elements; `float *` ones hold fp32.
 *  - Deterministic: same inputs, same bits, on the same GPU and build,
 *    except hxc_embedding_backward (fp32 atomics into the table's rows).
 *  - A struct hxc_ctx holds the cuBLASLt handle, its workspace, the
 *    algorithm cache and a small reduction scratch; calls that take one use
 *    its buffers, so one ctx serves one stream at a time.
 *  - Device memory is allocated only by hxc_ctx_create, the growth of a
 *    ctx's scratch (first use of a larger shape) and
 *    hxc_adamw_group_create; every other buffer is the caller's, sized by a
 *    *_bytes() function.
 */
#ifndef HXC_LLAMA_CUDA_H
#define HXC_LLAMA_CUDA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

#include "kernels/cpu/llama.h"

/* ---------------------------------------------------------------------------
 * Element types and the context.
 * ------------------------------------------------------------------------- */
enum hxc_dtype {
  HXC_FP32 = 0,
  HXC_BF16 = 1,
};

/* Bytes of one element: 4 or 2. */
size_t hxc_dtype_bytes(enum hxc_dtype dt);

struct hxc_ctx;

/* Creates a context on the current device: a cuBLASLt handle and a matmul
 * workspace of workspace_bytes (0: 32 MiB, what Hopper's kernels want). */
struct hxc_ctx *hxc_ctx_create(size_t workspace_bytes);
void hxc_ctx_destroy(struct hxc_ctx *ctx);

/* Device bytes the context holds now (workspace + scratch), for the
 * runtime's memory check. A context nobody reserved for grows its scratch
 * on first use of a larger shape (synchronising the device: tests and
 * tools only). hxc_ctx_reserve allocates the scratch once, up front, and
 * seals it: a later call that needs more is a fatal error that names the
 * sizes, never a device-wide synchronisation, free or malloc in the middle
 * of a step (other streams' NCCL work may be in flight). The sizes come
 * from hxc_ctx_scratch_bound. */
size_t hxc_ctx_device_bytes(const struct hxc_ctx *ctx);
void hxc_ctx_reserve(struct hxc_ctx *ctx, size_t scratch_bytes);

/* The context scratch each call that takes one needs, at most, for every
 * shape up to the one given (rmsnorm: any n' <= n; attention: any nseq'
 * <= nseq), and the most the calls of a plan's shapes need: the layers
 * (hxc_layer_ctx_scratch_bytes) and the head (hxc_head_ctx_scratch_bytes)
 * over `tokens` rows. */
size_t hxc_rmsnorm_backward_scratch(long n, int dim);
size_t hxc_attention_backward_scratch(long nseq, int seq_len, int nq);
size_t hxc_sum_squares_scratch(long n);

/* The launch of every kernel at given shapes, as its launcher computes it
 * (the same functions pick block size, grid and dynamic shared memory):
 * tests/gpures checks them against the registers and shared memory ptxas
 * gives each kernel. `kernel` is the kernel's name, with the template
 * arguments where the launch differs by them ("attention_forward_tc<64>"),
 * else bare (every instantiation). */
struct hxc_launch_dims {
  unsigned long gx, gy, gz; /* grid */
  int threads;              /* per block (x only) */
  size_t smem;              /* dynamic shared memory bytes */
  bool opt_in;              /* the launcher raises the kernel's limit */
};
struct hxc_launch_shapes {
  long nseq;       /* sequences per call (micro-batch) */
  int seq_len;     /* tokens per sequence */
  int hidden, ffn; /* per rank (a TP shard: at most the model's) */
  int nq, nkv, hd; /* heads per rank, head dim */
  long vocab;
  long group_elems;  /* elements of the optimizer's group */
  long group_chunks; /* its chunks (the group's tensors cut at 64 Ki) */
};
typedef void (*hxc_launch_fn)(void *arg, const char *kernel,
                              const struct hxc_launch_dims *launch);
void hxc_launch_table(const struct hxc_launch_shapes *s, hxc_launch_fn fn,
                      void *arg);

/* Sequences one attention launch takes at most (gridDim.z <= 65535):
 * larger micro-batches go in several launches over pointer offsets. A
 * test may lower it (n > 0) to check a split on a few sequences; 0 puts
 * the hardware's limit back. */
void hxc_attention_set_seq_chunk(long n);
long hxc_attention_seq_chunk(void);

/* Number of distinct matmul shapes whose algorithm the context cached. */
int hxc_ctx_cached_algos(const struct hxc_ctx *ctx);

/* dst[i] = (dst type) src[i], n elements, between any two dtypes. */
void hxc_convert(void *dst, enum hxc_dtype dst_dt, const void *src,
                 enum hxc_dtype src_dt, long n, cudaStream_t stream);

/* ---------------------------------------------------------------------------
 * (a) Single kernels. n = number of tokens.
 * ------------------------------------------------------------------------- */

/* The shard's slice of parameter p (fp32, packed as hxk_init_param packs
 * it) drawn on the device from the spec's stream: hxk_init_param's values,
 * each within one float ulp of the CPU's (the device's double log and cos
 * against glibc's; init.cu). */
void hxc_init_param(float *dst, const struct hxk_dims *d,
                    const struct hxk_shard *s, uint64_t seed,
                    enum hxk_param p, int layer, cudaStream_t stream);

/* out[n, D] = emb[tok[n], :]. */
void hxc_embedding_forward(void *out, const int32_t *tok, const void *emb,
                           long n, int dim, enum hxc_dtype dt,
                           cudaStream_t stream);
/* demb[tok[n], :] += dout[n, :]   (demb fp32: a weight gradient). */
void hxc_embedding_backward(float *demb, const int32_t *tok, const void *dout,
                            long n, int dim, enum hxc_dtype dt,
                            cudaStream_t stream);

/* out_i = g_i * x_i * r, r = 1/sqrt(mean_j x_j^2 + eps); rstd[n] keeps r.
 * out may alias x. */
void hxc_rmsnorm_forward(void *out, float *rstd, const void *x, const void *g,
                         long n, int dim, float eps, enum hxc_dtype dt,
                         cudaStream_t stream);
/* dg_i += sum_tokens dout_i xh_i;  dx_i += r (g_i dout_i - xh_i mean_j(g_j
 * dout_j xh_j)), xh = x r. dim <= 16384. */
void hxc_rmsnorm_backward(struct hxc_ctx *ctx, void *dx, float *dg,
                          const void *dout, const void *x, const void *g,
                          const float *rstd, long n, int dim,
                          enum hxc_dtype dt, cudaStream_t stream);

/* The residual fused with the norm after it, as a layer has them:
 * y = a + b (rounded to dt; y may alias a or b), out = rmsnorm(y), rstd:
 * hxc_residual_forward then hxc_rmsnorm_forward, bit for bit, in one pass. */
void hxc_residual_rmsnorm_forward(void *y, void *out, float *rstd,
                                  const void *a, const void *b, const void *g,
                                  long n, int dim, float eps,
                                  enum hxc_dtype dt, cudaStream_t stream);
/* The norm's backward with the residual path's gradient dres added: WRITES
 * dx = dres + (the norm's dx term); dres may alias dx (then it is
 * hxc_rmsnorm_backward). dg as there. */
void hxc_rmsnorm_backward_residual(struct hxc_ctx *ctx, void *dx, float *dg,
                                   const void *dres, const void *dout,
                                   const void *x, const void *g,
                                   const float *rstd, long n, int dim,
                                   enum hxc_dtype dt, cudaStream_t stream);

/* The RoPE table of hxk_rope_table (fp32 [seq_len, hd/2, 2], computed in
 * double), written on the device: hxk_rope_table_floats(d) floats. */
void hxc_rope_table(float *tab, const struct hxk_dims *d, cudaStream_t stream);
/* In place on x[n, nheads*hd]: (y0, y1) = (x0 c - x1 s, x0 s + x1 c). */
void hxc_rope_forward(void *x, const float *tab, long n, int nheads, int hd,
                      int seq_len, enum hxc_dtype dt, cudaStream_t stream);
/* dx0 += dy0 c + dy1 s, dx1 += -dy0 s + dy1 c (dx must not alias dy). */
void hxc_rope_backward(void *dx, const void *dy, const float *tab, long n,
                       int nheads, int hd, int seq_len, enum hxc_dtype dt,
                       cudaStream_t stream);
/* dy := R^T dy, in place. */
void hxc_rope_backward_inplace(void *dy, const float *tab, long n, int nheads,
                               int hd, int seq_len, enum hxc_dtype dt,
                               cudaStream_t stream);
/* By global positions (hxk_rope_forward_pos): token row s*local_len + i
 * rotates by pos[i] (a device int array; NULL: i). */
void hxc_rope_forward_pos(void *x, const float *tab, long n, int nheads,
                          int hd, const int *pos, long local_len,
                          enum hxc_dtype dt, cudaStream_t stream);
void hxc_rope_backward_pos_inplace(void *dy, const float *tab, long n,
                                   int nheads, int hd, const int *pos,
                                   long local_len, enum hxc_dtype dt,
                                   cudaStream_t stream);

/* RoPE on the fused product qkv [n, (nq + 2 nkv) hd] (each token's q, k
 * and v columns back to back), in one launch for q and k: split WRITES
 * q [n, nq hd], k, v [n, nkv hd] (q and k rotated by +phi); merge WRITES
 * dqkv from dq, dk (rotated by -phi) and dv. Positions as
 * hxc_rope_forward_pos (pos NULL, local_len seq_len: whole sequences). */
void hxc_rope_qkv_split(void *q, void *k, void *v, const void *qkv,
                        const float *tab, long n, int nq, int nkv, int hd,
                        const int *pos, long local_len, enum hxc_dtype dt,
                        cudaStream_t stream);
void hxc_rope_qkv_merge(void *dqkv, const void *dq, const void *dk,
                        const void *dv, const float *tab, long n, int nq,
                        int nkv, int hd, const int *pos, long local_len,
                        enum hxc_dtype dt, cudaStream_t stream);

/* Which kv head a local query head reads: (q_begin + i) / group - kv_begin,
 * the rule of hxk_kv_map, as three numbers instead of a table. */
struct hxc_kv_map {
  int q_begin, group, kv_begin;
};
struct hxc_kv_map hxc_kv_map_of(const struct hxk_dims *d,
                                const struct hxk_shard *s);

/* Attention implementations: the tensor-core kernel (bf16, head dims 64
 * and 128, sm_80+) and the fp32-arithmetic tiled kernel (every dtype, head
 * dims 16, 32, 64, 128). AUTO takes the tensor cores where they apply. */
enum hxc_attention_impl {
  HXC_ATTN_AUTO = 0,
  HXC_ATTN_TILED = 1,
  HXC_ATTN_TENSOR_CORE = 2,
};
/* Whether hxc_attention_* accept this head dimension / implementation. */
bool hxc_attention_supported(int hd, enum hxc_dtype dt,
                             enum hxc_attention_impl impl);
/* Process-wide choice; the checks and the bench pin one. Until it is
 * called, HEXIC_ATTENTION=tiled|tc in the environment chooses (default
 * AUTO): a way to run without the tensor-core kernel, no rebuild needed. */
void hxc_attention_set_impl(enum hxc_attention_impl impl);

/* Causal GQA attention, flash-attention style (tiles of queries and keys in
 * shared memory, online softmax; nothing of size seq_len^2 in memory):
 * q [n, nq*hd], k, v [n, nkv*hd]; per sequence and head
 *   s_{t,u} = q_t.k_u / sqrt(hd) (u <= t), p = softmax_u(s_t),
 *   o_t = sum_u p_{t,u} v_u, lse_t = log sum_u exp(s_{t,u}).
 * Writes o [n, nq*hd] and lse [n, nq] (fp32). */
void hxc_attention_forward(void *o, float *lse, const void *q, const void *k,
                           const void *v, struct hxc_kv_map map, long nseq,
                           int seq_len, int nq, int nkv, int hd,
                           enum hxc_dtype dt, cudaStream_t stream);
/* D_t = dO_t . O_t;  P from lse;  dP = dO V^T;  dS = P (dP - D);
 * dV += P^T dO;  dQ += dS K / sqrt(hd);  dK += dS^T Q / sqrt(hd).
 * Needs the forward's o (for D) besides its inputs. Deterministic: the
 * tiled kernel takes two passes (dQ, then dK/dV), the tensor-core kernel
 * one (each product once) whose dQ is summed in fp32 in key-tile order.
 * Scratch: hxc_attention_backward_scratch. */
void hxc_attention_backward(struct hxc_ctx *ctx, void *dq, void *dk, void *dv,
                            const void *dout, const void *q, const void *k,
                            const void *v, const void *o, const float *lse,
                            struct hxc_kv_map map, long nseq, int seq_len,
                            int nq, int nkv, int hd, enum hxc_dtype dt,
                            cudaStream_t stream);

/* Another whole-head attention the runtime may install in a layer context
 * (hxc_layer_ctx.attention_ops; rtlib/cuda/attention_cudnn.c's cuDNN under
 * --cuda-attention=cudnn): the arguments and math of hxc_attention_forward
 * and _backward, with two differences the layer allows for. lse may be kept
 * in the implementation's own order (only its backward reads it; the same
 * count of floats), and the backward WRITES dq, dk, dv where hexic's kernels
 * add into them: the layer hands it zeroed buffers, so the results agree.
 * The implementation refuses (fatal, saying why) a shape it cannot take. */
struct hxc_attention_ops {
  void (*forward)(void *arg, void *o, float *lse, const void *q, const void *k,
                  const void *v, struct hxc_kv_map map, long nseq,
                  int seq_len, int nq, int nkv, int hd, enum hxc_dtype dt,
                  cudaStream_t stream);
  void (*backward)(void *arg, void *dq, void *dk, void *dv, const void *dout,
                   const void *q, const void *k, const void *v, const void *o,
                   const float *lse, struct hxc_kv_map map, long nseq,
                   int seq_len, int nq, int nkv, int hd, enum hxc_dtype dt,
                   cudaStream_t stream);
  void *arg;
};

/* Block attention by global token positions, the twins of
 * hxk_attention_block_* (ring attention's building block; the same math,
 * positions and online-softmax state; kernels/cuda/attention_block.cu).
 * q, k, v, dout are dt elements; the running state o [nseq*nq_tok, nq*hd]
 * and lse [nseq*nq_tok, nq], delta and the added-into gradients dq, dk, dv
 * are fp32 whatever dt (they accumulate over the blocks). q_pos [nq_tok]
 * and k_pos [nk_tok] are device int arrays (NULL: 0, 1, 2, ...); the kv map
 * replaces kv_of. Any even hd <= 128. No scratch, no atomics. */
void hxc_attention_block_forward(float *o, float *lse, const void *q,
                                 const int *q_pos, long nq_tok, const void *k,
                                 const void *v, const int *k_pos, long nk_tok,
                                 struct hxc_kv_map map, long nseq, int nq,
                                 int nkv, int hd, bool first,
                                 enum hxc_dtype dt, cudaStream_t stream);
/* delta [n, nq] = rowsum(dout * o) per token and head (written). */
void hxc_attention_block_delta(float *delta, const void *dout, const float *o,
                               long n, int nq, int hd, enum hxc_dtype dt,
                               cudaStream_t stream);
/* From the FINAL lse and delta: ADDS dq (query rows), dk, dv (this block's
 * key rows). */
void hxc_attention_block_backward(float *dq, float *dk, float *dv,
                                  const void *dout, const void *q,
                                  const int *q_pos, long nq_tok, const void *k,
                                  const void *v, const int *k_pos, long nk_tok,
                                  const float *lse, const float *delta,
                                  struct hxc_kv_map map, long nseq, int nq,
                                  int nkv, int hd, enum hxc_dtype dt,
                                  cudaStream_t stream);

/* Rows of width floats, rows apart by a pitch on each side:
 * dst[r * dst_pitch + i] = src[...] (add: +=), fp32; the strided copies
 * and sums of the attention hooks' exchanges (rtlib/seq through
 * rtlib/cuda/seq_cuda.c). dst and src must not overlap. */
void hxc_copy_rows(float *dst, long dst_pitch, const float *src,
                   long src_pitch, long width, long rows, bool add,
                   cudaStream_t stream);

/* h = silu(g) * u, n elements. */
void hxc_swiglu_forward(void *h, const void *g, const void *u, long n,
                        enum hxc_dtype dt, cudaStream_t stream);
/* dg += dh u silu'(g);  du += dh silu(g). */
void hxc_swiglu_backward(void *dg, void *du, const void *dh, const void *g,
                         const void *u, long n, enum hxc_dtype dt,
                         cudaStream_t stream);
/* The same on the fused gate/up product gu [n, 2 nf] (each token's gate
 * columns, then its up columns): h [n, nf] = silu(g) u, and the backward
 * WRITING dgu [n, 2 nf] (dg, du in gu's places). */
void hxc_swiglu_gu_forward(void *h, const void *gu, long n, int nf,
                           enum hxc_dtype dt, cudaStream_t stream);
void hxc_swiglu_gu_backward(void *dgu, const void *dh, const void *gu, long n,
                            int nf, enum hxc_dtype dt, cudaStream_t stream);

/* y[n, out] = x[n, in] W^T + beta y, on cuBLASLt: fp32 accumulation; the
 * algorithm is chosen once per shape and cached in ctx. */
void hxc_linear_forward(struct hxc_ctx *ctx, void *y, const void *x,
                        const void *w, long n, int in, int out, float beta,
                        enum hxc_dtype dt, cudaStream_t stream);
/* dx[n, in] += dy W (skipped when dx is NULL);  dW[out, in] += dy^T x, dW
 * fp32 (bf16 products accumulate straight into it). */
void hxc_linear_backward(struct hxc_ctx *ctx, void *dx, float *dw,
                         const void *dy, const void *x, const void *w, long n,
                         int in, int out, enum hxc_dtype dt,
                         cudaStream_t stream);
/* dx = dy W + dx_beta dx (0: the first write, nothing read; 1:
 * hxc_linear_backward); dW as there. */
void hxc_linear_backward_beta(struct hxc_ctx *ctx, void *dx, float dx_beta,
                              float *dw, const void *dy, const void *x,
                              const void *w, long n, int in, int out,
                              enum hxc_dtype dt, cudaStream_t stream);

/* y = a + b (y may alias a or b). */
void hxc_residual_forward(void *y, const void *a, const void *b, long n,
                          enum hxc_dtype dt, cudaStream_t stream);
/* da += dy, db += dy. */
void hxc_residual_backward(void *da, void *db, const void *dy, long n,
                           enum hxc_dtype dt, cudaStream_t stream);

/* ---------------------------------------------------------------------------
 * Model head: final rmsnorm + LM head + cross-entropy, fused by chunks of
 * tokens: the logits of one chunk exist at a time ([chunk, V] fp32, plus a
 * bf16 copy of their gradient in bf16 mode), never [n, V].
 * ------------------------------------------------------------------------- */
struct hxc_head_params {
  const void *final_norm; /* [D], dt */
  const void *lm_head;    /* [V, D], dt (tok_emb when tied) */
};
struct hxc_head_grads {
  float *final_norm; /* [D] */
  float *lm_head;    /* [V, D] */
};

/* Tokens per chunk when the caller passes 0. */
#define HXC_HEAD_CHUNK 1024

size_t hxc_head_scratch_bytes(const struct hxk_dims *d, long n, long chunk,
                              enum hxc_dtype dt);
/* The hxc_ctx scratch hxc_head_forward_backward needs (its final norm's
 * backward over n tokens): for hxc_ctx_reserve. */
size_t hxc_head_ctx_scratch_bytes(const struct hxk_dims *d, long n);

/* ADDS scale * sum_t -log p(tgt_t) into *loss (one device double). When g
 * and dx are not NULL, also the backward of that scaled loss: ADDS into
 * g->final_norm, g->lm_head and dx [n, D]. */
void hxc_head_forward_backward(struct hxc_ctx *ctx, const struct hxk_dims *d,
                               const struct hxc_head_params *w,
                               const struct hxc_head_grads *g, const void *x,
                               const int32_t *targets, long n, double scale,
                               void *dx, double *loss, void *scratch,
                               long chunk, enum hxc_dtype dt,
                               cudaStream_t stream);

/* ---------------------------------------------------------------------------
 * Optimizer: multi-tensor AdamW with global-norm clipping, fp32.
 * ------------------------------------------------------------------------- */

/* One tensor of a group: master weight, gradient, moments (fp32, n
 * elements), decay or not, and an optional bf16 copy of w that the step
 * refreshes (the weights the bf16 forward reads; NULL in fp32 mode). */
struct hxc_adamw_tensor {
  float *w;
  const float *g;
  float *m, *v;
  void *w_bf16;
  long n;
  bool decay;
};

struct hxc_adamw_group;

/* Uploads the group's table once (shapes never change during training);
 * tensors may be of any sizes. Synchronous. */
struct hxc_adamw_group *hxc_adamw_group_create(const struct hxc_adamw_tensor *t,
                                               int count);
void hxc_adamw_group_destroy(struct hxc_adamw_group *group);

/* *sumsq += sum over the group's gradients of g^2, in double, in a fixed
 * order (the partial the runtime all-reduces into the global norm). */
void hxc_adamw_group_sumsq(struct hxc_adamw_group *group, double *sumsq,
                           cudaStream_t stream);

/* One AdamW step over every tensor of the group, with the gradient clipped
 * by the factor hxk_clip_factor(*global_sumsq, grad_clip) read on the device
 * (global_sumsq NULL: no clipping). Same formulas as hxk_adamw_step; the
 * gradients are read, not scaled in place. */
void hxc_adamw_group_step(struct hxc_adamw_group *group,
                          const double *global_sumsq, double grad_clip,
                          const struct hxk_adamw *hp, long step, double lr,
                          cudaStream_t stream);

/* Single-buffer pieces, as on the CPU. */
void hxc_sum_squares(struct hxc_ctx *ctx, const float *buf, long n,
                     double *sumsq, cudaStream_t stream); /* *sumsq += */
void hxc_scale(float *buf, long n, float factor, cudaStream_t stream);
void hxc_adamw_step(float *w, const float *g, float *m, float *v,
                    const uint8_t *decay_mask, long n,
                    const struct hxk_adamw *hp, long step, double lr,
                    cudaStream_t stream);

/* ---------------------------------------------------------------------------
 * (b) Decoder layer, as hxk_layer_forward/backward: the same composition
 * of the kernels above, over caller-owned device buffers.
 * ------------------------------------------------------------------------- */

/* Sums buf[0..n) (dt elements) over the TP group, in place, ordered on
 * `stream`. Called in the same order on every rank of the group. */
typedef void (*hxc_allreduce_fn)(void *buf, long n, enum hxc_dtype dt,
                                 cudaStream_t stream, void *arg);

/* Sequence parallelism (Megatron's), the twins of hxk_sp_reduce_scatter_fn
 * and hxk_sp_allgather_fn on dt elements of device memory, ordered on
 * `stream`: sum the TP partials send[n, width] over the group into this
 * member's rows recv[rows, width]; fill buf[n, width] from every member's
 * rows (this member's already in place at its offset). Rows as
 * hxk_sp_rows. Called in the same order on every rank of the group. */
typedef void (*hxc_sp_reduce_scatter_fn)(const void *send, void *recv, long n,
                                         int width, enum hxc_dtype dt,
                                         cudaStream_t stream, void *arg);
typedef void (*hxc_sp_allgather_fn)(void *buf, long n, int width,
                                    enum hxc_dtype dt, cudaStream_t stream,
                                    void *arg);

/* One layer's tensors (a TP shard), laid out as hxk_layer_bind lays them.
 * Weights in dt, gradients fp32. wq, wk, wv must lie back to back, and
 * w_gate, w_up (in both structs): the layer multiplies by [wq; wk; wv] and
 * [w_gate; w_up] as one matrix each, and refuses other pointers. */
struct hxc_layer_params {
  const void *attn_norm, *wq, *wk, *wv, *wo;
  const void *mlp_norm, *w_gate, *w_up, *w_down;
};
struct hxc_layer_grads {
  float *attn_norm, *wq, *wk, *wv, *wo;
  float *mlp_norm, *w_gate, *w_up, *w_down;
};

/* Points p's members into a flat buffer of hxk_layer_floats() elements of
 * dt, in the order of hxk_layer_bind. */
void hxc_layer_bind(struct hxc_layer_params *p, const void *base,
                    enum hxc_dtype dt, const struct hxk_dims *d,
                    const struct hxk_shard *s);

/* The same for an fp32 gradient buffer (hxk_layer_bind's layout). */
void hxc_layer_grads_bind(struct hxc_layer_grads *g, float *base,
                          const struct hxk_dims *d, const struct hxk_shard *s);

/* Sequence splits (context / head parallelism), as hxk_layer_ctx has them:
 * a rank holds local_len tokens of each sequence (n = nseq * local_len) at
 * global positions positions[0..local_len) (a DEVICE int array; RoPE and
 * the causal mask use them), and attention may be handed to a hook
 * (struct hxk_attention_hook, the CPU layer's, with the same calls, order
 * and sizes) whose pointers are all DEVICE pointers to fp32: q, k, v after
 * RoPE, o, dout, dq, dk, dv, saved and scratch. In fp32 the hook reads and
 * writes the layer's own buffers. In bf16 it sees fp32 too: the layer
 * widens q, k, v (and in the backward the forward's bf16 o and dO) into
 * fp32 buffers of its scratch and rounds o, dq, dk, dv back to bf16 after
 * the hook, because the hook's exchanges carry fp32 (its lse and delta ride
 * in the same messages) and its state is fp32 anyway; the block kernels
 * would read bf16 directly, the exchanges could not. positions NULL and
 * local_len 0 (or seq_len) with no hook: the whole-head kernel, today's
 * results bit for bit; positions or a part of the sequence without a hook:
 * the local hook below (the block kernel over the local tokens). */
struct hxc_layer_ctx {
  const struct hxk_dims *dims;
  const struct hxk_shard *shard;
  const float *rope;          /* hxc_rope_table(dims), device */
  bool recompute;             /* keep only the layer input */
  enum hxc_dtype dt;
  hxc_allreduce_fn allreduce; /* NULL: TP degree 1 */
  void *allreduce_arg;
  struct hxc_ctx *gpu;        /* cuBLASLt and scratch of this stream */
  cudaStream_t stream;
  const int *positions;       /* device [local_len]; NULL: 0..seq_len-1 */
  long local_len;             /* tokens per sequence here; 0: seq_len */
  const struct hxk_attention_hook *attention; /* NULL: local attention */
  /* The whole-head attention when no hook takes it: NULL, hexic's kernels
   * (hxc_attention_*); else these (struct hxc_attention_ops). */
  const struct hxc_attention_ops *attention_ops;
  /* Sequence parallelism (sp_size > 1; 0 or 1: off), as hxk_layer_ctx has
   * it: x, out, dout and dx are this member's rows only (hxk_sp_rows of the
   * n tokens over sp_size); the layer all-gathers the normed rows before the
   * column-parallel products and reduce-scatters the row-parallel outputs
   * instead of all-reducing them (allreduce is then unused). RMSNorm and the
   * residuals run on the rows; x, rstd, a, x1, m are kept as rows (a and m
   * gathered again in the backward). The norm gains' gradients hold this
   * member's rows' contribution only: the caller sums them over the group. */
  int sp_size, sp_rank;
  hxc_sp_reduce_scatter_fn reduce_scatter;
  hxc_sp_allgather_fn allgather;
  void *sp_arg;
};

/* The local hook: hxc_attention_block_* over the local tokens only
 * (queries and keys both at `positions`, device ints; NULL: 0, 1, ...) on
 * `stream`, the twin of hxk_attention_hook_local. Saved floats: lse [n,
 * nq]; scratch: delta [n, nq]. `local` is the hook's arg and must outlive
 * every use of *hook. */
struct hxc_attention_local {
  const int *positions;
  long local_len;
  struct hxc_kv_map map;
  int nq, nkv, hd;
  cudaStream_t stream;
};
void hxc_attention_hook_local(struct hxk_attention_hook *hook,
                              struct hxc_attention_local *local);

/* Bytes of the activations kept from forward to backward (the layer input
 * only when recomputing; with a hook, followed by its saved floats) and of
 * the scratch both need (with a hook: its scratch, its saved floats when
 * recomputing, and in bf16 the fp32 copies it reads and writes). */
size_t hxc_layer_acts_bytes(const struct hxc_layer_ctx *ctx, long nseq);
size_t hxc_layer_scratch_bytes(const struct hxc_layer_ctx *ctx, long nseq);
/* The hxc_ctx scratch a layer's forward and backward need (its norms'
 * backward, the whole-head attention's D buffer): for hxc_ctx_reserve. */
size_t hxc_layer_ctx_scratch_bytes(const struct hxc_layer_ctx *ctx, long nseq);

/* out[n, D] = layer(x[n, D]), n = nseq * local_len (with sequence
 * parallelism x and out are this member's rows); fills acts. out must not
 * alias x. */
void hxc_layer_forward(const struct hxc_layer_ctx *ctx,
                       const struct hxc_layer_params *w, const void *x,
                       void *out, void *acts, void *scratch, long nseq);

/* WRITES dx[n, D] (sequence parallel: the rows); ADDS the weight
 * gradients into g. dx must not alias dout. */
void hxc_layer_backward(const struct hxc_layer_ctx *ctx,
                        const struct hxc_layer_params *w,
                        const struct hxc_layer_grads *g, const void *dout,
                        void *dx, const void *acts, void *scratch, long nseq);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif
