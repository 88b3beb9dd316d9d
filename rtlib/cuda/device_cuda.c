/* The CUDA device: GPU memory and the kernels of kernels/cuda/ (llama_cuda.h),
 * every call queued on one stream and checked (cuda_check.h), failures
 * ending the run through hx_rt_fatal with the rank, device, call and error.
 *
 * Precision (the plan's train precision):
 *   fp32: everything fp32, the forward reads the master weights;
 *   bf16: activations, their gradients and the weights the forward reads
 *         in bf16 — a bf16 copy of the master weights that every AdamW step
 *         refreshes (hxc_adamw_tensor.w_bf16) —, with fp32 master weights,
 *         gradients, moments and gradient sums.
 * Parameters are initialised on the device (init_weights: kernels/cuda's
 * hxc_init_param, the spec's stream of draws, each weight within one float
 * ulp of kernels/cpu's) where the executor asks for it, else on the host by
 * the executor and uploaded.
 *
 * HexiSeq stages (context/head parallelism): the layers take the rank's
 * token positions (uploaded once) and the executor's rtlib/seq hook, which
 * this device switches to its kernel table on device memory
 * (rtlib/cuda/seq_cuda.c) before the buffers are sized.
 *
 * Sequence parallelism (model->sp_size > 1): the layers run on this TP
 * member's rows and call the executor's reduce-scatter and all-gather
 * (tp_reduce_scatter, tp_allgather) where they would all-reduce; the layer
 * buffers (acts_bytes, scratch_bytes, recompute_bytes) are the kernels'
 * sizes for the rows, so the memory by kind counts what SP keeps.
 *
 * Binding: the rank takes GPU local_rank % count of its node, warns when its
 * name is not the plan's GPU type, and checks the free memory against what
 * the plan assumed for it before allocating anything. */
#include <mpi.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/llama_cuda.h"
#include "rtlib/cuda/cuda_backend.h"
#include "rtlib/rt_init.h"
#include "rtlib/seq/rt_seq.h"

/* Device scalars: losses, the rank's norm partial, the global sum of squares. */
enum { LOSS_COUNTED, LOSS_UNCOUNTED, NORM_PARTIAL, GLOBAL_SUMSQ, NSCALARS };

static struct {
  const struct hx_rt_rank_config *cfg;
  const struct rt_model *model;
  int device;
  char name[256];
  enum hxc_dtype dt;
  cudaStream_t stream;
  struct hxc_ctx *gpu;
  struct hxc_layer_ctx ctx;
  float *rope;
  int *positions; /* the rank's token positions (HexiSeq), device; NULL: whole sequences */
  struct rt_weights p;
  void *wf; /* what the forward reads: p.w (fp32) or its bf16 copy */
  struct hxc_layer_params *lw;
  struct hxc_layer_grads *lg;
  struct hxc_head_params hw;
  struct hxc_head_grads hg;
  struct hxc_adamw_group *adamw; /* every tensor: the optimizer step */
  struct hxc_adamw_group *norm;  /* the norm's runs: their sum of squares only */
  double *scalars;
  long tokens;
} cu;

struct CUstream_st *rt_cuda_stream(void) { return cu.stream; }

/* Ends the run for a device problem: one line launch.sh turns into its
 * verdict, then hx_rt_fatal (MPI_Abort: no peer is left waiting). */
_Noreturn __attribute__((format(printf, 1, 2))) static void device_fatal(const char *fmt, ...) {
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  fprintf(stderr, "hexic-rt: failed rank %d: %s\n", cu.cfg ? cu.cfg->rank : -1, msg);
  hx_rt_fatal(HX_RT_EXIT_DEVICE, "%s", msg);
}

/* The kernels' fatal hook (cuda_check.h): their message already names the
 * rank, device, call and error string. */
static void on_cuda_error(const char *message, void *arg) {
  (void)arg;
  const char *prefix = "hexic: ";
  if (!strncmp(message, prefix, strlen(prefix)))
    message += strlen(prefix);
  device_fatal("%s", message);
}

/* ---- memory ---- */

/* Counted as kind (rt_backend.h), as the CPU backend counts. */
static void *alloc_as(size_t bytes, enum rt_mem_kind kind) {
  void *p = NULL;
  HXC_CHECK(cudaMalloc(&p, bytes ? bytes : 1));
  HXC_CHECK(cudaMemsetAsync(p, 0, bytes, cu.stream));
  rt_mem_count(p, bytes, kind);
  return p;
}

static void *cu_alloc(size_t bytes) { return alloc_as(bytes, rt_mem_default_kind()); }

static void cu_free(void *p) {
  rt_mem_uncount(p);
  HXC_CHECK(cudaFree(p));
}

static void cu_zero(void *p, size_t bytes) { HXC_CHECK(cudaMemsetAsync(p, 0, bytes, cu.stream)); }

static void cu_copy(void *dst, const void *src, size_t bytes) {
  HXC_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, cu.stream));
}

static void cu_upload(void *dst, const void *host, size_t bytes) {
  HXC_CHECK(cudaMemcpyAsync(dst, host, bytes, cudaMemcpyHostToDevice, cu.stream));
  HXC_CHECK(cudaStreamSynchronize(cu.stream));
}

static void cu_download(void *host, const void *src, size_t bytes) {
  HXC_CHECK(cudaMemcpyAsync(host, src, bytes, cudaMemcpyDeviceToHost, cu.stream));
  HXC_CHECK(cudaStreamSynchronize(cu.stream));
}

/* One block of runs as one 2-D copy: rows of width floats, src_pitch and
 * dst_pitch floats apart. A pitch past what a 2-D copy takes goes row by row. */
static void copy_rows(float *dst, long dst_pitch, const float *src, long src_pitch, long width,
                      long rows) {
  size_t w = (size_t)width * sizeof(float);
  if ((size_t)(dst_pitch > src_pitch ? dst_pitch : src_pitch) * sizeof(float) <= (size_t)INT32_MAX) {
    HXC_CHECK(cudaMemcpy2DAsync(dst, (size_t)dst_pitch * sizeof(float), src,
                                (size_t)src_pitch * sizeof(float), w, (size_t)rows,
                                cudaMemcpyDeviceToDevice, cu.stream));
    return;
  }
  for (long r = 0; r < rows; r++)
    HXC_CHECK(cudaMemcpyAsync(dst + r * dst_pitch, src + r * src_pitch, w,
                              cudaMemcpyDeviceToDevice, cu.stream));
}

static void cu_pack(float *dst, const float *src, const struct rt_run *runs, int nruns) {
  struct rt_block b;
  long packed = 0;
  for (int k = 0; k < nruns; packed += b.width * b.rows) {
    k = rt_runs_block(runs, nruns, k, packed, &b);
    copy_rows(dst + b.packed, b.width, src + b.off, b.stride, b.width, b.rows);
  }
}

static void cu_unpack(float *dst, const float *src, const struct rt_run *runs, int nruns) {
  struct rt_block b;
  long packed = 0;
  for (int k = 0; k < nruns; packed += b.width * b.rows) {
    k = rt_runs_block(runs, nruns, k, packed, &b);
    copy_rows(dst + b.off, b.stride, src + b.packed, b.width, b.width, b.rows);
  }
}

/* ---- the model ---- */

/* The kernels' TP hook on the executor's; the transport orders itself
 * after the work queued on cu.stream, the stream the layer runs on. */
static void tp_hook(void *buf, long n, enum hxc_dtype dt, cudaStream_t stream, void *arg) {
  (void)dt, (void)stream, (void)arg;
  cu.model->tp_reduce(buf, n, cu.model->tp_arg);
}

/* Sequence parallelism's hooks on the executor's, likewise. */
static void sp_reduce_scatter_hook(const void *send, void *recv, long n, int width,
                                   enum hxc_dtype dt, cudaStream_t stream, void *arg) {
  (void)dt, (void)stream, (void)arg;
  cu.model->tp_reduce_scatter(send, recv, n, width, cu.model->tp_arg);
}

static void sp_allgather_hook(void *buf, long n, int width, enum hxc_dtype dt,
                              cudaStream_t stream, void *arg) {
  (void)dt, (void)stream, (void)arg;
  cu.model->tp_allgather(buf, n, width, cu.model->tp_arg);
}

/* Element off of what the forward reads, in its dtype. */
static void *forward_weight(long off) {
  return (char *)cu.wf + (size_t)off * hxc_dtype_bytes(cu.dt);
}

/* A HexiSeq stage: the positions on the device, and the executor's hook
 * (rtlib/seq's) on this device's kernels; any other hook is host code the
 * CUDA layer cannot call. */
static void set_up_sequence_split(const struct rt_model *m) {
  if (m->positions && m->local_len > 0) {
    size_t bytes = (size_t)m->local_len * sizeof(int);
    cu.positions = alloc_as(bytes, RT_MEM_WORKSPACE);
    cu_upload(cu.positions, m->positions, bytes);
  }
  if (!m->attention)
    return;
  struct rt_seq *s = rt_seq_of_hook(m->attention);
  if (!s)
    device_fatal("the executor's attention hook is not rtlib/seq's: the CUDA layer runs only that "
                 "one on the device");
  rt_seq_use_kernels(s, rt_cuda_seq_kernels(cu.stream));
}

#ifdef HEXIC_ATTENTION_CUDNN
/* --cuda-attention=cudnn (the Makefile's ATTENTION=cudnn): the layers'
 * whole-head attention on cuDNN (attention_cudnn.c), its plans built and its
 * workspace allocated here, once, for the plan's one shape. Ranks whose
 * attention is a hook (HexiSeq's ring, a part of each sequence) keep it:
 * cuDNN would see whole sequences only. */
static struct rt_cudnn_attention *cudnn_attention;
static struct rt_cudnn_attn_shape cudnn_shape;

static void *cudnn_alloc(size_t bytes, void *arg) {
  (void)arg;
  return alloc_as(bytes, RT_MEM_WORKSPACE);
}
static void cudnn_release(void *p, void *arg) {
  (void)arg;
  cu_free(p);
}

static void cudnn_forward(void *arg, void *o, float *lse, const void *q, const void *k,
                          const void *v, struct hxc_kv_map map, long nseq, int seq_len, int nq,
                          int nkv, int hd, enum hxc_dtype dt, cudaStream_t stream) {
  (void)map, (void)dt, (void)stream; /* the prepared shape's, checked at setup */
  struct rt_cudnn_attn_shape s = cudnn_shape;
  s.nseq = nseq, s.seq_len = seq_len, s.nq = nq, s.nkv = nkv, s.hd = hd;
  rt_cudnn_attention_forward(arg, &s, o, lse, q, k, v);
}

static void cudnn_backward(void *arg, void *dq, void *dk, void *dv, const void *dout,
                           const void *q, const void *k, const void *v, const void *o,
                           const float *lse, struct hxc_kv_map map, long nseq, int seq_len,
                           int nq, int nkv, int hd, enum hxc_dtype dt, cudaStream_t stream) {
  (void)map, (void)dt, (void)stream;
  struct rt_cudnn_attn_shape s = cudnn_shape;
  s.nseq = nseq, s.seq_len = seq_len, s.nq = nq, s.nkv = nkv, s.hd = hd;
  rt_cudnn_attention_backward(arg, &s, dq, dk, dv, dout, q, k, v, o, lse);
}

static struct hxc_attention_ops cudnn_ops = {cudnn_forward, cudnn_backward, NULL};

static void set_up_cudnn_attention(const struct rt_model *m) {
  if (m->attention || cu.positions || (m->local_len > 0 && m->local_len != m->dims->seq_len))
    return;
  const struct hxk_shard *sh = m->shard;
  cudnn_shape = (struct rt_cudnn_attn_shape){m->nseq,
                                             m->dims->seq_len,
                                             sh->q_end - sh->q_begin,
                                             sh->kv_end - sh->kv_begin,
                                             m->dims->head_dim,
                                             sh->q_begin,
                                             m->dims->heads / m->dims->kv_heads,
                                             sh->kv_begin,
                                             cu.dt == HXC_BF16};
  char why[256];
  if (rt_cudnn_attention_refuses(&cudnn_shape, why, sizeof why))
    device_fatal("built with --cuda-attention=cudnn, but cuDNN cannot take this rank's attention: "
                 "%s (rebuild with make ATTENTION=hexic)",
                 why);
  cudnn_attention = rt_cudnn_attention_open(cu.stream, cudnn_alloc, cudnn_release, NULL);
  rt_cudnn_attention_prepare(cudnn_attention, &cudnn_shape);
  rt_cudnn_attention_seal(cudnn_attention);
  cudnn_ops.arg = cudnn_attention;
  cu.ctx.attention_ops = &cudnn_ops;
}
#else
static void set_up_cudnn_attention(const struct rt_model *m) { (void)m; }
#endif

static void set_up_layers(const struct rt_model *m) {
  cu.rope = alloc_as((size_t)hxk_rope_table_floats(m->dims) * sizeof(float), RT_MEM_WORKSPACE);
  hxc_rope_table(cu.rope, m->dims, cu.stream);
  set_up_sequence_split(m);
  cu.ctx = (struct hxc_layer_ctx){.dims = m->dims,
                                  .shard = m->shard,
                                  .rope = cu.rope,
                                  .recompute = m->recompute,
                                  .dt = cu.dt,
                                  .allreduce = m->tp_reduce ? tp_hook : NULL,
                                  .allreduce_arg = NULL,
                                  .gpu = cu.gpu,
                                  .stream = cu.stream,
                                  .positions = cu.positions,
                                  .local_len = m->local_len,
                                  .attention = m->attention};
  if (m->sp_size > 1) {
    if (!m->tp_reduce_scatter || !m->tp_allgather)
      device_fatal("internal: sequence parallel over %d ranks without the executor's "
                   "reduce-scatter and all-gather",
                   m->sp_size);
    cu.ctx.sp_size = m->sp_size;
    cu.ctx.sp_rank = m->sp_rank;
    cu.ctx.reduce_scatter = sp_reduce_scatter_hook;
    cu.ctx.allgather = sp_allgather_hook;
  }
  set_up_cudnn_attention(m);
}

static void bind_params(const struct rt_model *m) {
  const struct rt_layout *lay = m->layout;
  size_t bytes = (size_t)lay->n * sizeof(float);
  size_t moments = (size_t)lay->moments * sizeof(float); /* ZeRO-1: the own shards' only */
  cu.p = (struct rt_weights){alloc_as(bytes, RT_MEM_WEIGHTS), alloc_as(bytes, RT_MEM_GRADIENTS),
                             alloc_as(moments, RT_MEM_OPTIMIZER),
                             alloc_as(moments, RT_MEM_OPTIMIZER)};
  /* what the forward reads: weights too */
  cu.wf = cu.dt == HXC_BF16
              ? alloc_as((size_t)lay->n * hxc_dtype_bytes(HXC_BF16), RT_MEM_WEIGHTS)
              : cu.p.w;
  cu.lw = hx_rt_calloc((size_t)lay->nlayers, sizeof *cu.lw);
  cu.lg = hx_rt_calloc((size_t)lay->nlayers, sizeof *cu.lg);
  for (int l = 0; l < lay->nlayers; l++) {
    long off = lay->layers + l * lay->layer_floats;
    hxc_layer_bind(&cu.lw[l], forward_weight(off), cu.dt, m->dims, m->shard);
    hxc_layer_grads_bind(&cu.lg[l], cu.p.g + off, m->dims, m->shard);
  }
  if (lay->final_norm >= 0) {
    cu.hw = (struct hxc_head_params){forward_weight(lay->final_norm),
                                     forward_weight(lay->head_weight)};
    cu.hg = (struct hxc_head_grads){cu.p.g + lay->final_norm, cu.p.g + lay->head_weight};
  }
}

/* A multi-tensor group over ranges of the buffers; NULL when empty. With
 * refresh, the step also rewrites the bf16 copy the forward reads. */
static struct hxc_adamw_group *make_group(const struct rt_run *runs, const bool *decay,
                                          const long *moff, int n, bool refresh) {
  if (n == 0)
    return NULL;
  struct hxc_adamw_tensor *t = hx_rt_calloc((size_t)n, sizeof *t);
  for (int i = 0; i < n; i++) {
    long off = runs[i].off;
    t[i] = (struct hxc_adamw_tensor){.w = cu.p.w + off,
                                     .g = cu.p.g + off,
                                     .m = cu.p.m + (moff ? moff[i] : off),
                                     .v = cu.p.v + (moff ? moff[i] : off),
                                     .w_bf16 = refresh ? forward_weight(off) : NULL,
                                     .n = runs[i].n,
                                     .decay = decay && decay[i]};
  }
  struct hxc_adamw_group *g = hxc_adamw_group_create(t, n);
  free(t);
  return g;
}

/* AdamW over the optimizer table (every tensor, or under ZeRO-1 the own
 * shards, each with its moments' offset); the norm over layout->norm. */
static void make_groups(const struct rt_layout *lay) {
  int n = lay->nopt;
  struct rt_run *runs = hx_rt_calloc((size_t)(n ? n : 1), sizeof *runs);
  bool *decay = hx_rt_calloc((size_t)(n ? n : 1), sizeof *decay);
  long *moff = hx_rt_calloc((size_t)(n ? n : 1), sizeof *moff);
  for (int i = 0; i < n; i++) {
    runs[i] = (struct rt_run){lay->opt[i].off, lay->opt[i].n};
    decay[i] = lay->opt[i].decay;
    moff[i] = lay->opt[i].moff;
  }
  cu.adamw = make_group(runs, decay, moff, n, cu.dt == HXC_BF16);
  cu.norm = make_group(lay->norm, NULL, NULL, lay->nnorm, false);
  free(runs);
  free(decay);
  free(moff);
}

static void cu_setup(const struct rt_model *m, struct rt_weights *out) {
  cu.model = m;
  cu.tokens = m->nseq * (m->local_len > 0 ? m->local_len : m->dims->seq_len);
  cu.gpu = hxc_ctx_create(0);
  set_up_layers(m);
  /* The kernels' reduction scratch for the plan's shapes, once: growing it
   * later would synchronise the device and reallocate in the middle of a
   * step, with NCCL work in flight on other streams. */
  size_t layer = hxc_layer_ctx_scratch_bytes(&cu.ctx, m->nseq);
  size_t head = hxc_head_ctx_scratch_bytes(m->dims, cu.tokens);
  hxc_ctx_reserve(cu.gpu, layer > head ? layer : head);
  /* counted under a key of ours: the kernels' context owns the pointers
   * (the reduction scratch, and cuBLASLt's matmul workspace, which was not
   * counted before) */
  rt_mem_count(&cu.gpu, hxc_ctx_device_bytes(cu.gpu), RT_MEM_WORKSPACE);
  bind_params(m);
  make_groups(m->layout);
  cu.scalars = alloc_as(NSCALARS * sizeof(double), RT_MEM_WORKSPACE);
  *out = cu.p;
}

static void cu_weights_changed(void) {
  if (cu.dt == HXC_BF16)
    hxc_convert(cu.wf, HXC_BF16, cu.p.w, HXC_FP32, cu.model->layout->n, cu.stream);
}

/* Every tensor of the layout drawn on the device, in buffer order (the
 * host's init_values in rtlib/rt_exec_params.c, tensor for tensor). */
static void cu_init_weights(uint64_t seed, int layer_begin) {
  const struct rt_layout *lay = cu.model->layout;
  const struct hxk_dims *d = cu.model->dims;
  const struct hxk_shard *s = cu.model->shard;
  if (lay->tok_emb >= 0)
    hxc_init_param(cu.p.w + lay->tok_emb, d, s, seed, HXK_TOK_EMB, 0, cu.stream);
  for (int l = 0; l < lay->nlayers; l++) {
    long off = lay->layers + (long)l * lay->layer_floats;
    for (int t = 0; t < HXK_LAYER_NPARAMS; t++) {
      hxc_init_param(cu.p.w + off, d, s, seed, (enum hxk_param)t, layer_begin + l, cu.stream);
      off += hxk_layer_param_floats(d, s, (enum hxk_param)t);
    }
  }
  if (lay->final_norm >= 0)
    hxc_init_param(cu.p.w + lay->final_norm, d, s, seed, HXK_FINAL_NORM, 0, cu.stream);
  if (lay->lm_head >= 0)
    hxc_init_param(cu.p.w + lay->lm_head, d, s, seed, HXK_LM_HEAD, 0, cu.stream);
  cu_weights_changed();
}

static size_t cu_acts_bytes(void) { return hxc_layer_acts_bytes(&cu.ctx, cu.model->nseq); }

static size_t cu_scratch_bytes(void) {
  size_t layer = hxc_layer_scratch_bytes(&cu.ctx, cu.model->nseq);
  size_t head = hxc_head_scratch_bytes(cu.model->dims, cu.tokens, 0, cu.dt);
  return layer > head ? layer : head;
}

/* The scratch's front holds the recomputed layer's full activations (as
 * the CPU kernels' carve_scratch: kernels/cuda's layer scratch). */
static size_t cu_recompute_bytes(void) {
  if (!cu.model->recompute)
    return 0;
  struct hxc_layer_ctx full = cu.ctx;
  full.recompute = false;
  return hxc_layer_acts_bytes(&full, cu.model->nseq);
}

static void cu_embed_forward(void *x, const int32_t *tokens) {
  hxc_embedding_forward(x, tokens, forward_weight(cu.model->layout->tok_emb), cu.tokens,
                        cu.model->dims->dim, cu.dt, cu.stream);
}

static void cu_embed_backward(const int32_t *tokens, const void *dx) {
  hxc_embedding_backward(cu.p.g + cu.model->layout->tok_emb, tokens, dx, cu.tokens,
                         cu.model->dims->dim, cu.dt, cu.stream);
}

static void cu_layer_forward(int l, const void *x, void *out, void *acts, void *scratch) {
  hxc_layer_forward(&cu.ctx, &cu.lw[l], x, out, acts, scratch, cu.model->nseq);
}

static void cu_layer_backward(int l, const void *dout, void *dx, const void *acts,
                              void *scratch) {
  hxc_layer_backward(&cu.ctx, &cu.lw[l], &cu.lg[l], dout, dx, acts, scratch, cu.model->nseq);
}

static void cu_head(const void *x, const int32_t *targets, double scale, void *dx, void *scratch,
                    bool count) {
  double *loss = &cu.scalars[count ? LOSS_COUNTED : LOSS_UNCOUNTED];
  hxc_head_forward_backward(cu.gpu, cu.model->dims, &cu.hw, &cu.hg, x, targets, cu.tokens, scale,
                            dx, loss, scratch, 0, cu.dt, cu.stream);
}

static double cu_take_loss(void) {
  double loss = 0;
  cu_download(&loss, &cu.scalars[LOSS_COUNTED], sizeof loss);
  cu_zero(&cu.scalars[LOSS_COUNTED], 2 * sizeof(double)); /* and the uncounted one */
  return loss;
}

static double cu_grad_norm_sumsq(void) {
  double sumsq = 0;
  if (!cu.norm)
    return sumsq;
  cu_zero(&cu.scalars[NORM_PARTIAL], sizeof(double));
  hxc_adamw_group_sumsq(cu.norm, &cu.scalars[NORM_PARTIAL], cu.stream);
  cu_download(&sumsq, &cu.scalars[NORM_PARTIAL], sizeof sumsq);
  return sumsq;
}

static void cu_optimizer_step(double global_sumsq, double grad_clip, const struct hxk_adamw *hp,
                              long step, double lr) {
  if (!cu.adamw)
    return;
  cu_upload(&cu.scalars[GLOBAL_SUMSQ], &global_sumsq, sizeof global_sumsq);
  hxc_adamw_group_step(cu.adamw, &cu.scalars[GLOBAL_SUMSQ], grad_clip, hp, step, lr, cu.stream);
}

static struct rt_device cuda_device = {
    .backend = "cuda",
    .dtype = RT_FP32, /* set by rt_device_open from the plan */
    .alloc = cu_alloc,
    .free = cu_free,
    .zero = cu_zero,
    .copy = cu_copy,
    .upload = cu_upload,
    .download = cu_download,
    .pack = cu_pack,
    .unpack = cu_unpack,
    .setup = cu_setup,
    .weights_changed = cu_weights_changed,
    .init_weights = cu_init_weights,
    .acts_bytes = cu_acts_bytes,
    .scratch_bytes = cu_scratch_bytes,
    .recompute_bytes = cu_recompute_bytes,
    .embed_forward = cu_embed_forward,
    .embed_backward = cu_embed_backward,
    .layer_forward = cu_layer_forward,
    .layer_backward = cu_layer_backward,
    .head = cu_head,
    .take_loss = cu_take_loss,
    .grad_norm_sumsq = cu_grad_norm_sumsq,
    .optimizer_step = cu_optimizer_step,
};

/* ---- binding ---- */

/* This rank's index among the ranks of its node (collective over the world). */
static int local_rank(const struct hx_rt_rank_config *cfg) {
  MPI_Comm node;
  hx_rt_mpi_check(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, cfg->rank,
                                      MPI_INFO_NULL, &node),
                  "find the ranks of this node");
  int r = 0;
  hx_rt_mpi_check(MPI_Comm_rank(node, &r), "MPI_Comm_rank");
  MPI_Comm_free(&node);
  return r;
}

static int bind_device(const struct hx_rt_rank_config *cfg, int *count) {
  int local = local_rank(cfg);
  cudaError_t st = cudaGetDeviceCount(count);
  if (st != cudaSuccess || *count < 1)
    device_fatal("no CUDA device (cudaGetDeviceCount: %s): a --target=cuda program needs an "
                 "NVIDIA GPU and its driver",
                 st != cudaSuccess ? cudaGetErrorString(st) : "0 devices");
  int device = rt_cuda_pick_device(local, *count);
  hxc_set_error_context(cfg->rank, device);
  HXC_CHECK(cudaSetDevice(device));
  struct cudaDeviceProp prop;
  HXC_CHECK(cudaGetDeviceProperties(&prop, device));
  snprintf(cu.name, sizeof cu.name, "%s", prop.name);
  /* One line per node: a node's GPUs are of one type in a hexic cluster. */
  if (local == 0 && !rt_cuda_name_matches(cu.name, cfg->device_type)) {
    fprintf(stderr,
            "hexic-rt: rank %d: warning: the plan puts a %s here, but device %d is '%s': the "
            "plan's speed and memory figures assume the former\n",
            cfg->rank, cfg->device_type, device, cu.name);
    fflush(stderr);
  }
  return device;
}

/* Before anything is allocated: what the plan's memory model assumed for
 * this rank against what the device has free now. */
static void check_memory(const struct hx_rt_rank_config *cfg, int count) {
  size_t free_bytes = 0, total_bytes = 0;
  HXC_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
  char msg[512];
  if (!rt_cuda_memory_fits(cfg->device_memory_bytes, (int64_t)free_bytes, (int64_t)total_bytes,
                           cu.device, cu.name, msg, sizeof msg))
    device_fatal("%s", msg);
  if (cfg->rank == 0)
    hx_rt_log_banner("device: cuda, %s (device %d of %d on this node), %s; %.1f GiB free of %.1f "
                     "GiB",
                     cu.name, cu.device, count, cu.dt == HXC_BF16 ? "bf16" : "fp32",
                     (double)free_bytes / (1 << 30), (double)total_bytes / (1 << 30));
}

const struct rt_device *rt_device_open(const struct hx_rt_rank_config *cfg) {
  cu.cfg = cfg;
  hxc_set_error_context(cfg->rank, -1);
  hxc_set_fatal_handler(on_cuda_error, NULL);
  cu.dt = cfg->train->precision == HX_RT_BF16 ? HXC_BF16 : HXC_FP32;
  int count = 0;
  cu.device = bind_device(cfg, &count);
  check_memory(cfg, count);
  /* A blocking stream: ordered with the legacy default stream, which the
   * kernels' synchronous set-up copies use. */
  HXC_CHECK(cudaStreamCreate(&cu.stream));
  cuda_device.dtype = cu.dt == HXC_BF16 ? RT_BF16 : RT_FP32;
  return &cuda_device;
}
