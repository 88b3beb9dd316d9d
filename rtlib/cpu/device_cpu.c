/* The CPU device: host memory and the fp32 kernels of kernels/cpu/. What
 * the executor did before it had a device interface, moved behind it: the
 * same calls in the same order, so results are the same bits. */
#include <stdlib.h>
#include <string.h>

#include "rtlib/rt_backend.h"
#include "rtlib/rt_init.h"

static struct {
  const struct rt_model *model;
  struct hxk_layer_ctx ctx;
  float *rope;
  int *kv_of;
  struct rt_weights p;
  struct hxk_layer_params *lw, *lg; /* per local layer, into p.w and p.g */
  struct hxk_head_params hw, hg;
  long tokens; /* per micro-batch */
  double loss; /* counted since take_loss */
} cpu;

/* Counted as kind (rt_backend.h); hx_rt_calloc never returns NULL. */
static void *alloc_as(size_t bytes, enum rt_mem_kind kind) {
  void *p = hx_rt_calloc(1, bytes);
  rt_mem_count(p, bytes, kind);
  return p;
}

static void *cpu_alloc(size_t bytes) { return alloc_as(bytes, rt_mem_default_kind()); }

static void cpu_free(void *p) {
  rt_mem_uncount(p);
  free(p);
}
static void cpu_zero(void *p, size_t bytes) { memset(p, 0, bytes); }
static void cpu_copy(void *dst, const void *src, size_t bytes) { memcpy(dst, src, bytes); }

static void cpu_pack(float *dst, const float *src, const struct rt_run *runs, int nruns) {
  for (int k = 0; k < nruns; k++) {
    memcpy(dst, src + runs[k].off, (size_t)runs[k].n * sizeof(float));
    dst += runs[k].n;
  }
}

static void cpu_unpack(float *dst, const float *src, const struct rt_run *runs, int nruns) {
  for (int k = 0; k < nruns; k++) {
    memcpy(dst + runs[k].off, src, (size_t)runs[k].n * sizeof(float));
    src += runs[k].n;
  }
}

/* The kernels' TP hook (hxk_allreduce_fn) on the executor's. */
static void tp_hook(float *buf, long n, void *arg) {
  (void)arg;
  cpu.model->tp_reduce(buf, n, cpu.model->tp_arg);
}

/* Sequence parallelism's hooks (hxk_sp_*_fn) on the executor's. */
static void sp_reduce_scatter_hook(const float *send, float *recv, long n, int width, void *arg) {
  (void)arg;
  cpu.model->tp_reduce_scatter(send, recv, n, width, cpu.model->tp_arg);
}

static void sp_allgather_hook(float *buf, long n, int width, void *arg) {
  (void)arg;
  cpu.model->tp_allgather(buf, n, width, cpu.model->tp_arg);
}

static void set_up_layers(const struct rt_model *m) {
  const struct hxk_dims *d = m->dims;
  cpu.rope = alloc_as((size_t)hxk_rope_table_floats(d) * sizeof(float), RT_MEM_WORKSPACE);
  hxk_rope_table(cpu.rope, d);
  cpu.kv_of = alloc_as((size_t)d->heads * sizeof(int), RT_MEM_WORKSPACE);
  hxk_kv_map(cpu.kv_of, d, m->shard);
  cpu.ctx = (struct hxk_layer_ctx){.dims = d,
                                   .shard = m->shard,
                                   .rope = cpu.rope,
                                   .kv_of = cpu.kv_of,
                                   .recompute = m->recompute,
                                   .allreduce = m->tp_reduce ? tp_hook : NULL,
                                   .allreduce_arg = NULL,
                                   .positions = m->positions,
                                   .local_len = m->local_len,
                                   .attention = m->attention,
                                   .sp_size = m->sp_size,
                                   .sp_rank = m->sp_rank,
                                   .reduce_scatter = m->sp_size > 1 ? sp_reduce_scatter_hook : NULL,
                                   .allgather = m->sp_size > 1 ? sp_allgather_hook : NULL,
                                   .sp_arg = NULL};
}

/* AdamW's decay per element, as hxk_adamw_step reads it, for chunks of
 * up to DECAY_CHUNK elements of one tensor: every element of a tensor decays
 * alike (rt_tensor.decay), so a chunk's mask is all ones or all zeros and no
 * per-parameter mask is kept (it cost one byte per parameter, optimizer
 * memory the plan does not price and the CUDA backend does not hold). */
enum { DECAY_CHUNK = 4096 };
static uint8_t decay_ones[DECAY_CHUNK];
static const uint8_t decay_zeros[DECAY_CHUNK];

static void bind_params(const struct rt_model *m) {
  const struct rt_layout *lay = m->layout;
  size_t bytes = (size_t)lay->n * sizeof(float);
  size_t moments = (size_t)(lay->moments > 0 ? lay->moments : 1) * sizeof(float);
  /* ZeRO-1: moments of the own shards only */
  cpu.p = (struct rt_weights){alloc_as(bytes, RT_MEM_WEIGHTS), alloc_as(bytes, RT_MEM_GRADIENTS),
                              alloc_as(moments, RT_MEM_OPTIMIZER),
                              alloc_as(moments, RT_MEM_OPTIMIZER)};
  memset(decay_ones, 1, sizeof decay_ones);
  /* host tables of pointers, not buffers: not counted */
  cpu.lw = hx_rt_calloc((size_t)(lay->nlayers > 0 ? lay->nlayers : 1), sizeof *cpu.lw);
  cpu.lg = hx_rt_calloc((size_t)(lay->nlayers > 0 ? lay->nlayers : 1), sizeof *cpu.lg);
  for (int l = 0; l < lay->nlayers; l++) {
    long off = lay->layers + l * lay->layer_floats;
    hxk_layer_bind(&cpu.lw[l], cpu.p.w + off, m->dims, m->shard);
    hxk_layer_bind(&cpu.lg[l], cpu.p.g + off, m->dims, m->shard);
  }
  if (lay->final_norm >= 0) {
    cpu.hw = (struct hxk_head_params){cpu.p.w + lay->final_norm, cpu.p.w + lay->head_weight};
    cpu.hg = (struct hxk_head_params){cpu.p.g + lay->final_norm, cpu.p.g + lay->head_weight};
  }
}

static void cpu_setup(const struct rt_model *m, struct rt_weights *out) {
  cpu.model = m;
  cpu.tokens = m->nseq * (m->local_len > 0 ? m->local_len : m->dims->seq_len);
  set_up_layers(m);
  bind_params(m);
  *out = cpu.p;
}

static void cpu_weights_changed(void) {} /* the forward reads the master weights */

static size_t cpu_acts_bytes(void) {
  return (size_t)hxk_layer_acts_floats(&cpu.ctx, cpu.model->nseq) * sizeof(float);
}

static size_t cpu_scratch_bytes(void) {
  long layer = hxk_layer_scratch_floats(&cpu.ctx, cpu.model->nseq);
  long head = hxk_head_scratch_floats(cpu.model->dims, cpu.tokens);
  return (size_t)(layer > head ? layer : head) * sizeof(float);
}

/* The scratch starts with the recomputed layer's full activations
 * (kernels/cpu/layer.c's carve_scratch). */
static size_t cpu_recompute_bytes(void) {
  if (!cpu.model->recompute)
    return 0;
  struct hxk_layer_ctx full = cpu.ctx;
  full.recompute = false;
  return (size_t)hxk_layer_acts_floats(&full, cpu.model->nseq) * sizeof(float);
}

static void cpu_embed_forward(void *x, const int32_t *tokens) {
  const struct rt_layout *lay = cpu.model->layout;
  hxk_embedding_forward(x, tokens, cpu.p.w + lay->tok_emb, cpu.tokens, cpu.model->dims->dim);
}

static void cpu_embed_backward(const int32_t *tokens, const void *dx) {
  const struct rt_layout *lay = cpu.model->layout;
  hxk_embedding_backward(cpu.p.g + lay->tok_emb, tokens, dx, cpu.tokens, cpu.model->dims->dim);
}

static void cpu_layer_forward(int l, const void *x, void *out, void *acts, void *scratch) {
  hxk_layer_forward(&cpu.ctx, &cpu.lw[l], x, out, acts, scratch, cpu.model->nseq);
}

static void cpu_layer_backward(int l, const void *dout, void *dx, const void *acts,
                               void *scratch) {
  hxk_layer_backward(&cpu.ctx, &cpu.lw[l], &cpu.lg[l], dout, dx, acts, scratch,
                     cpu.model->nseq);
}

static void cpu_head(const void *x, const int32_t *targets, double scale, void *dx,
                     void *scratch, bool count) {
  double loss = hxk_head_forward_backward(cpu.model->dims, &cpu.hw, &cpu.hg, x, targets,
                                          cpu.tokens, scale, dx, scratch);
  if (count)
    cpu.loss += loss;
}

static double cpu_take_loss(void) {
  double loss = cpu.loss;
  cpu.loss = 0;
  return loss;
}

static double cpu_grad_norm_sumsq(void) {
  const struct rt_layout *lay = cpu.model->layout;
  double s = 0.0;
  for (int i = 0; i < lay->nnorm; i++)
    s += hxk_sum_squares(cpu.p.g + lay->norm[i].off, lay->norm[i].n);
  return s;
}

static void cpu_optimizer_step(double global_sumsq, double grad_clip, const struct hxk_adamw *hp,
                               long step, double lr) {
  double factor = hxk_clip_factor(global_sumsq, grad_clip);
  const struct rt_layout *lay = cpu.model->layout;
  for (int i = 0; i < lay->nopt; i++) {
    const struct rt_tensor *t = &lay->opt[i];
    /* only what AdamW reads: a ZeRO-1 rank's own shards, not the whole buffer */
    if (factor != 1.0)
      hxk_scale(cpu.p.g + t->off, t->n, (float)factor);
    /* element-wise, so chunks give the same bits as one call */
    for (long at = 0; at < t->n; at += DECAY_CHUNK) {
      long n = t->n - at < DECAY_CHUNK ? t->n - at : DECAY_CHUNK;
      hxk_adamw_step(cpu.p.w + t->off + at, cpu.p.g + t->off + at, cpu.p.m + t->moff + at,
                     cpu.p.v + t->moff + at, t->decay ? decay_ones : decay_zeros, n, hp, step,
                     lr);
    }
  }
}

static const struct rt_device cpu_device = {
    .backend = "cpu",
    .dtype = RT_FP32,
    .alloc = cpu_alloc,
    .free = cpu_free,
    .zero = cpu_zero,
    .copy = cpu_copy,
    .upload = cpu_copy,
    .download = cpu_copy,
    .pack = cpu_pack,
    .unpack = cpu_unpack,
    .setup = cpu_setup,
    .weights_changed = cpu_weights_changed,
    .acts_bytes = cpu_acts_bytes,
    .scratch_bytes = cpu_scratch_bytes,
    .recompute_bytes = cpu_recompute_bytes,
    .embed_forward = cpu_embed_forward,
    .embed_backward = cpu_embed_backward,
    .layer_forward = cpu_layer_forward,
    .layer_backward = cpu_layer_backward,
    .head = cpu_head,
    .take_loss = cpu_take_loss,
    .grad_norm_sumsq = cpu_grad_norm_sumsq,
    .optimizer_step = cpu_optimizer_step,
};

/* The CPU computes in fp32 whatever the plan's precision: a bf16 plan runs
 * here as its exactness mode, and says so once. */
const struct rt_device *rt_device_open(const struct hx_rt_rank_config *cfg) {
  if (cfg->rank == 0 && cfg->train->precision == HX_RT_BF16)
    hx_rt_log_banner("precision: the plan says bf16; the CPU backend computes in fp32");
  return &cpu_device;
}
