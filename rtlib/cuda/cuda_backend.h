/* The CUDA backend's own door: what device_cuda.c and
 * transport_mpi_staged.c share, and the pure rules of binding.c and
 * staging.c (no CUDA in them: tests/rtlib/test_rt_cuda_rules.c runs them on
 * any machine). This header includes no CUDA header, so that test compiles
 * without the toolkit. */
#ifndef HX_RT_CUDA_BACKEND_H
#define HX_RT_CUDA_BACKEND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "rtlib/rt_backend.h"

/* The stream every kernel and copy of this rank is queued on (device_cuda.c).
 * cudaStream_t is `struct CUstream_st *`; naming the struct keeps CUDA's
 * headers out of this one. */
struct CUstream_st;
struct CUstream_st *rt_cuda_stream(void);

/* rtlib/seq's kernel table on the device (seq_cuda.c): the HexiSeq hook's
 * block kernels, copies and positions on device memory, queued on `stream`
 * (the one above: the device's setup passes it, and hands the table to
 * rt_seq_use_kernels). */
struct rt_seq_kernels;
const struct rt_seq_kernels *rt_cuda_seq_kernels(struct CUstream_st *stream);

/* ---- binding.c: which GPU a rank takes, and whether it is the plan's ---- */

/* The GPU of the rank with this index among its node's ranks: local_rank
 * modulo the node's GPU count (several ranks share a GPU when there are
 * more ranks than GPUs, as the one-GPU tests run them). */
int rt_cuda_pick_device(int local_rank, int device_count);

/* Whether the device's name (cudaDeviceProp.name, e.g. "NVIDIA H100 80GB
 * HBM3") is the plan's GPU type (e.g. "H100"): the type with everything
 * but letters and digits dropped equals, ignoring case, one or more
 * consecutive words of the name joined ("RTX4090" is "NVIDIA GeForce RTX
 * 4090"); "L40" is not "L40S". An empty or NULL type matches anything. */
bool rt_cuda_name_matches(const char *device_name, const char *plan_type);

/* Whether needed bytes (the plan's memory model for the rank; <= 0:
 * unknown) fit in free_bytes; if not, the reason in msg: the device, what
 * the plan assumes, what is free, and what to do. */
bool rt_cuda_memory_fits(int64_t needed, int64_t free_bytes, int64_t total_bytes, int device,
                         const char *device_name, char *msg, size_t msg_size);

/* Which transport a rank uses (binding.c decides, transport_select.c asks):
 * want is HEXIC_TRANSPORT or else the build's default ("nccl" or "mpi");
 * have_nccl, whether the program was built with NCCL; shared, whether any
 * machine of the job runs more ranks than it has GPUs (NCCL refuses two
 * ranks of a communicator on one GPU). NCCL when wanted and possible; the
 * staged MPI transport when wanted, or when ranks share GPUs (a note in
 * note says why); -1 with the reason in note for a want that is neither, or
 * NCCL wanted from a program built without it. */
enum rt_cuda_transport { RT_CUDA_STAGED = 0, RT_CUDA_NCCL = 1 };
int rt_cuda_pick_transport(const char *want, bool have_nccl, bool shared, char *note,
                           size_t note_size);

/* The transports (transport_mpi_staged.c, transport_nccl.c); the backend's
 * rt_transport_open (transport_select.c) opens one. */
const struct rt_transport *rt_cuda_staged_open(const struct hx_rt_rank_config *cfg,
                                               const struct rt_device *dev);
const struct rt_transport *rt_cuda_nccl_open(const struct hx_rt_rank_config *cfg,
                                             const struct rt_device *dev);

/* ---- staging.c: MPI on device buffers through host memory ---- */

/* A collective on n device elements travels through a host staging area of
 * stage_bytes in pieces of this many elements, each taking bytes_per_elem
 * there (at least 1, at most INT_MAX: one piece is one MPI count). */
int64_t rt_stage_piece_elems(int64_t stage_bytes, int64_t bytes_per_elem);

/* bf16 <-> fp32 on the host (bf16 is the upper half of an fp32): sums of
 * bf16 activations are taken in fp32 and rounded once, to nearest even,
 * NaN kept NaN. */
void rt_f32_from_bf16(float *dst, const uint16_t *src, int64_t n);
void rt_bf16_from_f32(uint16_t *dst, const float *src, int64_t n);

/* A run of rows: `rows` runs of `width` floats, `stride` apart, starting at
 * `off`, whose packed copy starts at `packed`: one 2-D copy
 * (cudaMemcpy2DAsync) instead of one copy per run, for the column slices of
 * a TP-split matrix, which a gradient-sync group lists row by row. */
struct rt_block {
  long off, width, stride, rows, packed;
};

/* The block starting at runs[k] (the runs of one pack, in order): the
 * longest sequence of equal widths at one constant stride (a lone run is a
 * block of one row). Returns the index after it. */
int rt_runs_block(const struct rt_run *runs, int nruns, int k, long packed, struct rt_block *b);

/* ---- attention_cudnn.c: cuDNN's fused attention (--cuda-attention=cudnn) ----
 * The rules below are pure C (the CUDA-free test runs them); the rest
 * exists only in a build with -DHEXIC_ATTENTION_CUDNN, linked with libcudnn,
 * which is what the generated Makefile's ATTENTION=cudnn gives. */
#ifdef __cplusplus
extern "C" {
#endif

/* One whole-head causal attention call in hexic's layout (llama_cuda.h's
 * hxc_attention_forward): q, o [nseq*T, nq*hd], k, v [nseq*T, nkv*hd], token
 * n = s*T + t; query head i reads kv head (q_begin + i) / group - kv_begin. */
struct rt_cudnn_attn_shape {
  long nseq;
  int seq_len, nq, nkv, hd;
  int q_begin, group, kv_begin;
  bool bf16; /* false: fp32, which cuDNN's fused attention does not take */
};

/* Whether cuDNN's fused attention cannot take the shape: bf16 only, head dim
 * a multiple of 8 up to 128, and GQA as cuDNN maps it (query head i reads kv
 * head i / (nq / nkv)), which a TP shard cutting a group breaks. If so, why
 * (one sentence) in why. */
bool rt_cudnn_attention_refuses(const struct rt_cudnn_attn_shape *s, char *why, size_t why_size);

/* Whether two calls share cuDNN plans (the plan cache's key): every field
 * of the shape, dtype and head map included, since only a shape the cache
 * has not seen is checked by rt_cudnn_attention_refuses. */
bool rt_cudnn_same_plan(const struct rt_cudnn_attn_shape *a, const struct rt_cudnn_attn_shape *b);

/* Whether the cuDNN found at run time (cudnnGetVersion's number: 91900 for
 * 9.19.0) cannot take the shape, as cudnn-frontend knows its versions: 9.0
 * or later, not 9.10.0/9.10.1 (a backward with known bugs), no one-token
 * sequences, and before 9.15.1 a sequence length that is a multiple of 128
 * (cudnn-frontend adds a padding mask there; these graphs have none). */
bool rt_cudnn_version_refuses(long version, const struct rt_cudnn_attn_shape *s, char *why,
                              size_t why_size);

/* cuDNN's 4-d view (dims b, h, s, d and strides in elements) of a hexic
 * token-major tensor of `heads` heads: [nseq*T, heads*hd] row-major. With
 * transposed, the view of its transpose per head (dims b, h, d, s), the
 * K^T that the products read. */
void rt_cudnn_token_view(long nseq, int seq_len, int heads, int hd, bool transposed,
                         int64_t dims[4], int64_t strides[4]);
/* The softmax statistics (log-sum-exp per query row) as cuDNN keeps them:
 * [b, nq, T, 1], head-major, nseq*nq*T floats (the size of hexic's lse
 * [n, nq], in another order that only cuDNN's own backward reads). */
void rt_cudnn_stats_view(long nseq, int seq_len, int nq, int64_t dims[4], int64_t strides[4]);

/* Bytes of fp32 buffers the backward graph keeps besides cuDNN's own
 * workspace (the dQ accumulator [b, nq, T, hd] and the row sums dO.O
 * [b, nq, T]), each rounded up to 256. */
size_t rt_cudnn_backward_extra_bytes(const struct rt_cudnn_attn_shape *s);

/* Builds and finalizes every tensor and operation descriptor of the forward
 * and backward graphs of shape s, as the plans use them, without a handle:
 * no GPU needed (the operation graph, engines and plans need one). True
 * with the operation counts, else false with the failing call and cuDNN's
 * message in why. Without -DHEXIC_ATTENTION_CUDNN: false, saying so. */
bool rt_cudnn_attention_describe(const struct rt_cudnn_attn_shape *s, int *forward_ops,
                                 int *backward_ops, char *why, size_t why_size);

/* The runtime state: a cuDNN handle on one stream, the plans by shape (both
 * directions, built on first use or by prepare) and one workspace for all.
 * Every cuDNN call is checked: a failure ends the process through the
 * kernels' fatal handler (cuda_check.h) with the call, cuDNN's error string
 * and its last message. alloc/release make and free device memory (the
 * runtime counts it as workspace). */
struct rt_cudnn_attention;
typedef void *(*rt_cudnn_alloc_fn)(size_t bytes, void *arg);
typedef void (*rt_cudnn_release_fn)(void *p, void *arg);
struct rt_cudnn_attention *rt_cudnn_attention_open(struct CUstream_st *stream,
                                                   rt_cudnn_alloc_fn alloc,
                                                   rt_cudnn_release_fn release, void *arg);
void rt_cudnn_attention_close(struct rt_cudnn_attention *a);
/* cuDNN's version at run time (cudnnGetVersion: 91900 for 9.19.0). */
long rt_cudnn_version(void);
/* Builds the shape's plans now and sizes the workspace for them; returns the
 * workspace bytes. A refused shape is fatal (rt_cudnn_attention_refuses'
 * sentence). After seal, a shape whose plans need a larger workspace is
 * fatal, naming the sizes, instead of a reallocation in the middle of a step. */
size_t rt_cudnn_attention_prepare(struct rt_cudnn_attention *a, const struct rt_cudnn_attn_shape *s);
void rt_cudnn_attention_seal(struct rt_cudnn_attention *a);
/* hxc_attention_forward / _backward's math on cuDNN, on the handle's stream:
 * o and stats (rt_cudnn_stats_view's order) from q, k, v; dq, dk, dv
 * WRITTEN (not added into) from dout and the forward's q, k, v, o, stats.
 * Every pointer 16-byte aligned (fatal if not). Not deterministic: cuDNN
 * sums dQ with atomics. */
void rt_cudnn_attention_forward(struct rt_cudnn_attention *a, const struct rt_cudnn_attn_shape *s,
                                void *o, float *stats, const void *q, const void *k,
                                const void *v);
void rt_cudnn_attention_backward(struct rt_cudnn_attention *a,
                                 const struct rt_cudnn_attn_shape *s, void *dq, void *dk,
                                 void *dv, const void *dout, const void *q, const void *k,
                                 const void *v, const void *o, const float *stats);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif
