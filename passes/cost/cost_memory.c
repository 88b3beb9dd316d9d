/* A rank's device memory by kind, as the runtime allocates it (issue 25,
 * item 1): rtlib/rt_backend.h's kinds, each priced from the buffers
 * rtlib/rt_exec_ops.c, rtlib/rt_exec_sync.c and the CPU kernels
 * (kernels/cpu/layer.c's carve_acts and carve_scratch, head.c) size, so
 * that tests/exec/run_memory.sh can hold every exec plan's measured peaks to
 * these figures within 5% per rank and kind. */
#include <math.h>
#include <string.h>

#include "cost.h"
#include "ir/plan_util.h"

const char *const hx_mem_kind_names[HX_MEM_NKINDS] = {
    "weights", "gradients", "optimizer", "activations", "recompute", "comm", "workspace"};

/* Buffers a stage with a neighbour receives its hops into besides the
 * slots (rtlib/rt_exec_ops.c's hops_init): one, and a second where a
 * receive is posted ahead at the op that consumes the previous one (its
 * two-buffer rule): a middle stage's gradient posted under the forward that
 * reads the activation just received; a first stage's cool-down backwards,
 * and a GPipe last stage's forwards, back to back, when there are two or
 * more micro-batches. HexiSeq stages: one (a leader's receive lands in its
 * whole buffer, scattered to the units at the RECV op). */
static double hop_receive_buffers(const struct hx_plan *plan, const struct hx_pipeline *pl, int si,
                                  const struct hx_stage *st) {
  bool first = si == 0, last = si == pl->nstages - 1;
  if (st->seq_layout)
    return 1;
  if (!first && !last)
    return 2;
  if (pl->micro_batches < 2)
    return 1;
  return first || plan->schedule == HX_PP_GPIPE ? 2 : 1;
}

/* A HexiSeq leader's pack (rtlib/rt_exec_ops.c's rt_hexiseq_init): the
 * rows of its stage's largest unit, elements; 0 off the leader (whole 0). */
static double seq_pack_elements(const struct hx_ctx *ctx, const struct hx_stage *st, double mbs,
                                double whole) {
  int64_t most = 0;
  for (int u = 0; whole > 0 && u < st->seq_layout->nunits; u++)
    most = st->seq_layout->tokens[u] > most ? st->seq_layout->tokens[u] : most;
  return mbs * (double)most * (double)ctx->model.hidden;
}

/* One TP rank's share of a decoder layer (kernels/cpu/params.c's shard:
 * query heads [k H / t, (k+1) H / t), the kv heads they read, ffn columns
 * [k F / t, (k+1) F / t), as codegen/emit_program_set.c's split_bounds). */
struct rank_shape {
  double dim, hd, nq, nkv, nf, qw, kvw;
};

static int split_point(int64_t n, int parts, int k) { return (int)(k * n / parts); }

static struct rank_shape shape_of(const struct hx_model *m, int tp, int tp_rank) {
  struct rank_shape s;
  int q0 = split_point(m->heads, tp, tp_rank), q1 = split_point(m->heads, tp, tp_rank + 1);
  int group = (int)(m->heads / m->kv_heads);
  s.dim = (double)m->hidden;
  s.hd = (double)(m->hidden / m->heads);
  s.nq = q1 - q0;
  s.nkv = q1 > q0 ? (q1 - 1) / group - q0 / group + 1 : 0;
  s.nf = split_point(m->ffn, tp, tp_rank + 1) - split_point(m->ffn, tp, tp_rank);
  s.qw = s.nq * s.hd;
  s.kvw = s.nkv * s.hd;
  return s;
}

/* Floats of one layer this rank holds: two norm gains, wq, wk, wv, wo and
 * the three MLP matrices of its shard. */
static double layer_floats(const struct rank_shape *s) {
  return 2 * s->dim + s->dim * (2 * s->qw + 2 * s->kvw) + 3 * s->dim * s->nf;
}

/* Floats of the activations a layer keeps per token (carve_acts): x, a, x1
 * and m whole (the runtime has no sequence parallelism), two rstd, q, o, k,
 * v, the per-head log-sum-exp and the three MLP intermediates of the shard. */
static double acts_floats_per_token(const struct rank_shape *s) {
  return 4 * s->dim + 2 + 2 * s->qw + 2 * s->kvw + s->nq + 3 * s->nf;
}

/* Floats of the layer's scratch besides a recomputed layer (carve_scratch):
 * partial, dx1, dm, da, the MLP and attention gradients, and the attention's
 * (the whole-head kernel's 2 T^2, or a HexiSeq stage's hook's). */
static double layer_scratch_floats(const struct rank_shape *s, double n, double attention) {
  return n * (4 * s->dim + 3 * s->nf + 2 * s->qw + 2 * s->kvw) + attention;
}

/* The head's scratch (kernels/cpu/head.c): xn, dxn, rstd and one chunk of
 * logits. */
static double head_scratch_floats(const struct hx_model *m, double n) {
  double chunk = n < 64 ? n : 64;
  return 2 * n * (double)m->hidden + n + chunk * (double)m->vocab;
}

/* Sequence parallelism (hx_stage_sequence_parallel, whole sequences of n
 * tokens): what changes from the whole-row figures, as kernels/cpu/layer.c
 * and rtlib/rt_exec_ops.c size it with the rank's `rows` of hxk_sp_rows
 * (the first n % tp TP ranks one row more). A layer keeps x, a, x1, m and
 * the two rstd by rows (recompute: the input by rows, and the rebuilt
 * layer's those by rows too); its scratch holds dx1 by rows plus the
 * gathered [n, D] and the reduce-scattered rows; x0 and x1 are rows; a
 * stage with the embedding or the head holds one whole activation more. */
struct sp_shape {
  double n, rows, D, e, slots, nlayers;
  bool recompute, ends;
};

static void sp_adjust(const struct hx_model *m, const struct rank_shape *s,
                      const struct sp_shape *p, double *bytes) {
  double D = p->D, e = p->e, n = p->n, rows = p->rows;
  double per_row = 4 * D + 2, full = n * (4 * D + 2 + 2 * s->qw + 2 * s->kvw + s->nq + 3 * s->nf);
  double full_sp = full - (n - rows) * per_row;
  double kept_fewer = p->recompute ? (n - rows) * D : (n - rows) * per_row;
  bytes[HX_MEM_ACTIVATIONS] -= p->slots * (p->nlayers > 0 ? p->nlayers : 1) * kept_fewer * e;
  double rc = p->recompute ? full * e : 0, rc_sp = p->recompute ? full_sp * e : 0;
  bytes[HX_MEM_RECOMPUTE] += rc_sp - rc;
  double layer = (n * (4 * D + 3 * s->nf + 2 * s->qw + 2 * s->kvw) +
                  2.0 * (double)m->seq_len * (double)m->seq_len) * e;
  double layer_sp = layer + (n * D + 2 * rows * D - n * D) * e; /* gathered, drows; dx1 by rows */
  double head = head_scratch_floats(m, n) * e;
  double scratch = fmax(rc + layer, head) - rc, scratch_sp = fmax(rc_sp + layer_sp, head) - rc_sp;
  bytes[HX_MEM_WORKSPACE] += scratch_sp - scratch - 2 * (n - rows) * D * e /* x0, x1 */ +
                             (p->ends ? n * D * e : 0);
}

/* Everything the per-kind model needs to know of a rank: its stage and TP
 * rank, the pipeline around it (hops, receive buffers, slots in flight) and
 * what its gradient sync holds. A plan gives it exactly (plan_places); a
 * searching planner, which has no plan yet, gives its best guess
 * (stage_place). Both are priced by rank_bytes, the one formula. */
struct mem_place {
  const struct hx_stage *st;
  bool first, last, hops;
  int tp_rank;
  double receive; /* hop receive buffers besides the slots */
  double mbs, slots;
  /* gradient sync, floats: the optimizer steps all it holds less unstepped
   * (or held / stepped_div when that is > 0); the pack is the whole held
   * set when pack_held, else pack; recv is ZeRO-1's own blocks */
  double unstepped, stepped_div, pack, recv;
  bool pack_held, recv_stepped; /* recv_stepped: it receives what it steps */
  /* a HexiSeq rank: its unit's tokens, its hook's attention scratch and, on
   * a leader, the whole activation it gathers (hx_seq_rank_buffers) and
   * its pack of one unit's rows at a time (seq_pack_elements), elements */
  bool seq;
  double tokens, attention, whole, unit;
};

static void cuda_rank_bytes(const struct hx_ctx *ctx, const struct mem_place *p,
                            const struct rank_shape *s, double *bytes);

static void rank_bytes(const struct hx_ctx *ctx, const struct mem_place *p, double *bytes) {
  memset(bytes, 0, HX_MEM_NKINDS * sizeof *bytes);
  const struct hx_model *m = &ctx->model;
  const struct hx_stage *st = p->st;
  struct rank_shape s = shape_of(m, st->tp, p->tp_rank);
  double nlayers = st->layer_end - st->layer_begin;
  /* the CPU backend computes in fp32 whatever the plan's precision */
  double e = ctx->opt.target == HX_TARGET_CPU ? 4.0 : hx_elem_bytes(&ctx->train);
  double held = nlayers * layer_floats(&s) + (double)hx_stage_params(m, 0, 0, p->first, p->last);
  double stepped = p->stepped_div > 0 ? held / p->stepped_div : held - p->unstepped;
  double pack = p->pack_held ? held : p->pack, recv = p->recv_stepped ? stepped : p->recv;
  bytes[HX_MEM_WEIGHTS] = held * (4.0 + (e < 4.0 ? e : 0.0)); /* master, and a bf16 copy */
  bytes[HX_MEM_GRADIENTS] = held * 4.0;
  bytes[HX_MEM_OPTIMIZER] = stepped * 8.0; /* AdamW m and v: the runtime steps AdamW */
  /* the gradient sync's pack and ZeRO-1's receive blocks (rt_exec_sync.c), fp32 on both */
  bytes[HX_MEM_COMM] = (pack + recv) * 4.0;
  if (ctx->opt.target == HX_TARGET_CUDA) {
    cuda_rank_bytes(ctx, p, &s, bytes);
    return;
  }

  double tokens = p->seq ? p->tokens : (double)m->seq_len;
  double attention = p->seq ? p->attention : 2.0 * tokens * tokens, whole = p->seq ? p->whole : 0;
  double n = p->mbs * tokens, D = (double)m->hidden;
  double full = n * acts_floats_per_token(&s); /* one layer's, floats */
  double kept = st->recompute ? n * D : full;  /* recompute keeps the layer input */
  bytes[HX_MEM_ACTIVATIONS] = p->slots * (nlayers > 0 ? nlayers : 1) * kept * e;
  double recompute = st->recompute ? full * e : 0.0;
  bytes[HX_MEM_RECOMPUTE] = recompute;

  /* out_act, dout and din per slot; out_act and din hold what a hop carries */
  double sent = whole > 0 ? whole : n * D;
  double boundary = p->slots * (n * D + 2 * sent) * e;
  double receive = p->hops ? p->receive * n * D * e : 0.0;
  double unit = p->seq ? p->unit : 0;
  bytes[HX_MEM_COMM] += p->hops ? boundary + receive + (whole + unit) * e : 0.0;
  double layer_scratch = recompute + layer_scratch_floats(&s, n, attention) * e;
  double scratch = fmax(layer_scratch, head_scratch_floats(m, n) * e);
  bytes[HX_MEM_WORKSPACE] = (p->hops ? 0.0 : boundary) + p->slots * 2 * n * 4.0 /* tokens */ +
                            2 * n * D * e /* x0, x1 */ + scratch - recompute +
                            (double)m->seq_len * s.hd * 4.0 /* RoPE */ + (double)m->heads * 4.0;
  if (hx_stage_sequence_parallel(ctx, st)) {
    int64_t tokens_mb = (int64_t)p->mbs * m->seq_len;
    struct sp_shape sp = {(double)tokens_mb,
                          (double)(tokens_mb / st->tp + (p->tp_rank < tokens_mb % st->tp ? 1 : 0)),
                          (double)m->hidden,
                          e,
                          p->slots,
                          nlayers,
                          st->recompute,
                          p->first || p->last};
    sp_adjust(m, &s, &sp, bytes);
  }
}

/* ---- the CUDA backend ----------------------------------------------------
 * What rtlib/cuda/device_cuda.c and kernels/cuda allocate for a rank, in the
 * plan's element size es (fp32 or bf16; rstd, lse, the logits and every
 * hook buffer fp32): kernels/cuda/layer.cu and head.cu carve their buffers
 * in slices rounded up to 256 bytes (their take()), and the layer's
 * sequence-parallel rows, its fused qkv and gate/up products and its own
 * backward scratch are not the CPU kernels' (no T^2 attention scratch: the
 * tensor-core backward keeps per-row sums instead). */

static double al256(double bytes) { return ceil(bytes / 256.0) * 256.0; }

/* A layer call's shape (layer.cu's layer_shape): n tokens of nseq
 * sequences, rows of them in the residual stream (sequence parallelism),
 * and, on a HexiSeq stage, rtlib/seq's attention hook instead of the
 * whole-head kernel. */
struct cuda_layer {
  double n, rows, nseq, es;
  bool hook;
  double saved, hook_scratch; /* the hook's floats (rt_seq_attn.c) */
};

/* carve_acts: x, rstd1, a, q, k, v, lse (the whole-head kernel's), o, x1,
 * rstd2, m, gu [gate | up], h, and the hook's saved floats. */
static double cuda_acts_bytes(const struct rank_shape *s, const struct cuda_layer *c) {
  double n = c->n, rows = c->rows, D = s->dim, es = c->es;
  return al256(rows * D * es) + al256(rows * 4) + al256(rows * D * es) + al256(n * s->qw * es) +
         2 * al256(n * s->kvw * es) + (c->hook ? 0 : al256(n * s->nq * 4)) +
         al256(n * s->qw * es) + al256(rows * D * es) + al256(rows * 4) + al256(rows * D * es) +
         al256(n * 2 * s->nf * es) + al256(n * s->nf * es) + (c->hook ? al256(c->saved * 4) : 0);
}

/* carve_scratch after the recomputed layer's activations: partial [n, D]
 * (which the gathered rows share under SP), the hook's scratch, its fp32
 * views of bf16 buffers (carve_wide), qkv, dx1 by rows, dm, da, dh, dgu,
 * dO, dq, dk, dv. */
static double cuda_scratch_bytes(const struct rank_shape *s, const struct cuda_layer *c) {
  double n = c->n, D = s->dim, es = c->es, qn = n * s->qw, kvn = n * s->kvw;
  double wide = c->hook && es < 4 ? 4 * al256(qn * 4) + 4 * al256(kvn * 4) : 0;
  return al256(n * D * es) + (c->hook ? al256(c->hook_scratch * 4) : 0) + wide +
         al256((qn + 2 * kvn) * es) + al256(c->rows * D * es) + 2 * al256(n * D * es) +
         al256(n * s->nf * es) + al256(n * 2 * s->nf * es) + 2 * al256(qn * es) +
         2 * al256(kvn * es);
}

/* head.cu's carve_head over n tokens: xn and dxn [n, D], rstd and the
 * losses [n] fp32, one chunk of HXC_HEAD_CHUNK = 1024 tokens' fp32 logits
 * and, in bf16, their rounded gradient. */
static double cuda_head_bytes(const struct hx_model *m, double n, double es) {
  double chunk = n < 1024 ? n : 1024, cv = chunk * (double)m->vocab;
  return 2 * al256(n * (double)m->hidden * es) + 2 * al256(n * 4) + al256(cv * 4) +
         (es < 4 ? al256(cv * es) : 0);
}

/* The kernels' context scratch, reserved once (device_cuda.c's cu_setup:
 * hxc_layer_ctx_scratch_bytes, hxc_head_ctx_scratch_bytes): RMSNorm's
 * backward partials (norm.cu: up to RMS_MAX_BLOCKS = 512 rows of D fp32)
 * and the whole-head attention's backward scratch (attention.cu: the
 * larger of the tiled kernel's n x heads floats and the tensor-core one's,
 * attention_tc.cu's tc_scratch_bytes at hd 128: the backward's row sums
 * of dO o, dq's fp32 accumulator, a counter and flags per 32-query tile). */
static double cuda_ctx_scratch_bytes(const struct hx_model *m, const struct rank_shape *s,
                                     const struct cuda_layer *c, bool cudnn) {
  double D = s->dim, T = (double)m->seq_len;
  double norm_layer = fmin(c->rows, 512) * D * 4, norm_head = fmin(c->n, 512) * D * 4;
  double attn = 0;
  if (!c->hook && !cudnn && s->nq > 0) {
    double rows = c->nseq * T * s->nq, flags = c->nseq * s->nq * ceil(T / 32);
    attn = fmax(rows * 4, al256(rows * 4) + al256(rows * 128 * 4) + al256(8 + flags * 4));
  }
  return fmax(fmax(norm_layer, attn), norm_head);
}

/* --cuda-attention=cudnn (rtlib/cuda/attention_cudnn.c), on ranks without
 * a HexiSeq hook: the layer reserves no attention scratch of its own
 * (cuda_ctx_scratch_bytes without it), and cuDNN's backward keeps an fp32
 * dQ accumulator [rows, hd] and its D = rowsum(dO o) [rows], rows = nseq x
 * heads x T (rt_cudnn_backward_extra_bytes). The workspace cuDNN's plans ask
 * for and its handle are not priced: only a GPU's cuDNN can say them. */
static double cudnn_attention_bytes(const struct hx_model *m, const struct rank_shape *s,
                                    const struct cuda_layer *c) {
  double rows = c->nseq * s->nq * (double)m->seq_len;
  return al256(rows * s->hd * 4) + al256(rows * 4);
}

/* The layer calls of a placed rank: its tokens, its rows under sequence
 * parallelism (hxk_sp_rows: the first n % tp TP ranks hold one row more)
 * and a HexiSeq stage's hook. The hook saves one log-sum-exp per token and
 * head, as the CPU's; its scratch (rtlib/seq/rt_seq_attn.c's carve_bufs)
 * is the CPU's (hx_seq_hook_scratch_floats) less the CPU block kernel's
 * tile scratch, 2 x 64^2 + 64 hd + 2 x 64 floats, which the CUDA kernel
 * table has not (rtlib/cuda/seq_cuda.c's no_scratch); its slices' 64-float
 * alignment is left out (at most 64 floats each). */
static struct cuda_layer cuda_layer_of(const struct hx_ctx *ctx, const struct mem_place *p,
                                       const struct rank_shape *s) {
  const struct hx_stage *st = p->st;
  double n = p->mbs * (p->seq ? p->tokens : (double)ctx->model.seq_len), rows = n;
  if (hx_stage_sequence_parallel(ctx, st)) {
    int64_t whole = (int64_t)n;
    rows = (double)(whole / st->tp + (p->tp_rank < whole % st->tp ? 1 : 0));
  }
  double hook_scratch = p->seq ? p->attention - (2 * 64 * 64 + 64 * s->hd + 2 * 64) : 0;
  double saved = p->seq ? n * s->nq : 0;
  return (struct cuda_layer){n, rows, p->mbs, hx_elem_bytes(&ctx->train), p->seq, saved,
                             hook_scratch};
}

/* The CUDA kinds besides the model state and the gradient sync (in bytes
 * already): the executor's buffers (rtlib/rt_exec_ops.c's rt_slots_init,
 * hops_init and rt_hexiseq_init, as on the CPU but of es-byte elements),
 * the device's (device_cuda.c) and the NCCL transport's widening buffer. */
static void cuda_rank_bytes(const struct hx_ctx *ctx, const struct mem_place *p,
                            const struct rank_shape *s, double *bytes) {
  const struct hx_model *m = &ctx->model;
  const struct hx_stage *st = p->st;
  struct cuda_layer c = cuda_layer_of(ctx, p, s);
  double es = c.es, D = (double)m->hidden, n = c.n, rows = c.rows, tokens = n / p->mbs;
  double nlayers = st->layer_end - st->layer_begin;
  bool sp = hx_stage_sequence_parallel(ctx, st);
  /* cuDNN takes a rank's attention where no HexiSeq hook does (device_cuda.c) */
  bool cudnn = ctx->opt.cuda_attention == HX_CUDA_ATTN_CUDNN && !c.hook;
  double full = cuda_acts_bytes(s, &c);
  /* hxc_layer_acts_bytes: recompute keeps only the input, by rows */
  double layer_acts = st->recompute ? al256(rows * D * es) : full;
  bytes[HX_MEM_ACTIVATIONS] = p->slots * (nlayers > 0 ? nlayers : 1) * layer_acts;
  /* the executor's scratch: the larger of the layer's (whose front holds a
   * recomputed layer's full activations, tagged recompute) and the head's */
  double recompute = st->recompute ? full : 0;
  double scratch = fmax(recompute + cuda_scratch_bytes(s, &c), cuda_head_bytes(m, n, es));
  bytes[HX_MEM_RECOMPUTE] = fmin(recompute, scratch);

  double act = n * D * es, whole = p->seq ? p->whole : 0;
  double sent = whole > 0 ? whole * es : act; /* out_act and din of a HexiSeq leader: whole */
  double boundary = p->slots * (act + 2 * sent);
  double receive = p->hops ? p->receive * act : 0;
  /* transport_nccl.c's wide_of: a bf16 TP sum widened to fp32 on the
   * device, [n, D] (all-reduce) or [n, D] and the own rows (SP's
   * reduce-scatter) */
  double widen = es < 4 && st->tp > 1 ? (n * D + (sp ? rows * D : 0)) * 4 : 0;
  double unit = p->seq ? p->unit : 0;
  /* a HexiSeq leader's whole and pack hold activations, in the plan's dtype */
  bytes[HX_MEM_COMM] += (p->hops ? boundary + receive + (whole + unit) * es : 0) + widen;
  bytes[HX_MEM_WORKSPACE] =
      (p->hops ? 0 : boundary) + p->slots * 2 * n * 4 /* tokens */ +
      2 * rows * D * es /* x0, x1 */ + (sp && (p->first || p->last) ? act : 0) /* sp_full */ +
      scratch - bytes[HX_MEM_RECOMPUTE] + (double)m->seq_len * s->hd * 4 /* RoPE */ +
      (p->seq ? (tokens + (double)m->seq_len) * 4 : 0) /* HexiSeq: positions, rt_seq's */ +
      4 * 8 /* device scalars */ + cuda_ctx_scratch_bytes(m, s, &c, cudnn) +
      (cudnn ? cudnn_attention_bytes(m, s, &c) : 0) +
      32.0 * 1024 * 1024 /* cuBLASLt's workspace: context.cu's hxc_ctx_create(0) */;
}

static double total_of(const double *bytes) {
  double sum = 0;
  for (int k = 0; k < HX_MEM_NKINDS; k++)
    sum += bytes[k];
  return sum;
}

/* Floats of a rank's gradients a gradient-sync group reduces (its part of
 * every bucket's pack): its TP shard's slice of the group's layers, the two
 * gains of each, or the weights outside the layers. */
static double group_floats(const struct hx_ctx *ctx, const struct hx_plan *plan,
                           const struct hx_group *g, const struct rank_shape *s, int tp) {
  double layers = g->layer_end - g->layer_begin, slices = g->nslices > 0 ? g->nslices : 1;
  if (g->kind == HX_GROUP_UNSPLIT)
    return layers * 2 * s->dim;
  if (g->kind != HX_GROUP_GRAD)
    return 0;
  if (g->layer_begin < 0)
    return hx_nonlayer_grad_bytes(ctx, hx_group_holds(plan, g)) / 4.0 / slices;
  return layers * (layer_floats(s) - 2 * s->dim) * tp / slices;
}

/* Ranks of the plan on stages that hold the embedding (first stages, and
 * last ones when tied) or the final norm and LM head (last stages). */
static int holders(const struct hx_plan *plan, bool embedding, bool tied) {
  int n = 0;
  for (int i = 0; i < plan->npipelines; i++) {
    const struct hx_pipeline *p = &plan->pipelines[i];
    for (int s = 0; s < p->nstages; s++) {
      bool first = s == 0, last = s == p->nstages - 1;
      if (embedding ? first || (tied && last) : last)
        n += p->stages[s].ndevices;
    }
  }
  return n;
}

/* Whether the plan's own groups of the weights outside the layers carry
 * ZeRO-1 shares (hexic's plans do; hand-written ones may leave them out). */
static bool nonlayer_sharded(const struct hx_plan *plan) {
  for (int g = 0; g < plan->ngroups; g++)
    if (plan->groups[g].layer_begin < 0 && plan->groups[g].shard_ppm)
      return true;
  return false;
}

/* ZeRO-1 of the weights outside the layers: codegen's group of every rank
 * that holds them (each TP rank holds them whole) matches no plan group, so
 * the runtime splits their state evenly over the holders (codegen/
 * emit_rank.c's group_shards). nholders: of the embedding, of the head. */
static void nonlayer_shares(const struct hx_ctx *ctx, struct mem_place *p, const int *nholders) {
  const struct hx_model *m = &ctx->model;
  bool tied = m->tie_embeddings;
  double emb = (double)m->params_embedding, head = (double)(m->params_final_norm + m->params_head);
  double parts[2] = {p->first || (tied && p->last) ? emb : 0.0, p->last ? head : 0.0};
  for (int k = 0; k < 2; k++) {
    if (parts[k] <= 0 || nholders[k] <= 1)
      continue;
    p->unstepped += parts[k] * (1.0 - 1.0 / nholders[k]);
    p->recv += parts[k] / nholders[k];
  }
}

/* The gradient sync of a placed rank (its ZeRO-1 group shares already in
 * unstepped and recv): every weight a rank holds has a replica when the
 * plan has several pipelines or its stage several HexiSeq units (codegen
 * derives the groups from the TP shards' overlaps, so each held element is
 * in exactly one); else a TP stage's ranks all hold the norm gains,
 * embedding and head whole, and one pipeline's tied embedding is held by
 * its first and last stages. A plan with HexiSeq units splits the state
 * evenly over the replicas (hx_plan_optimizer_params). */
static void sync_of(const struct hx_ctx *ctx, const struct hx_plan *plan, struct mem_place *p,
                    bool shard_nonlayer, const int *nholders) {
  const struct hx_stage *st = p->st;
  const struct hx_model *m = &ctx->model;
  bool zero1 = plan->optimizer_sharding == HX_SHARD_ZERO1;
  bool tied_pair = m->tie_embeddings && plan->npipelines == 1 && plan->pipelines[0].nstages > 1 &&
                   (p->first || p->last);
  double layers = st->layer_end - st->layer_begin;
  if (plan->npipelines > 1 || (st->seq_layout && st->seq_layout->nunits > 1))
    p->pack_held = true;
  else if (st->tp > 1) /* its TP ranks' whole norm gains, embedding and head */
    p->pack = layers * 2 * (double)m->hidden + (double)hx_stage_params(m, 0, 0, p->first, p->last);
  else if (tied_pair)
    p->pack = (double)m->params_embedding;
  if (zero1 && shard_nonlayer)
    nonlayer_shares(ctx, p, nholders);
  if (zero1 && hx_plan_has_units(plan)) {
    int width;
    hx_grad_slicing(plan, st->layer_begin, &width);
    p->stepped_div = width > 1 ? width : 1;
  }
}

/* Every rank's place in the plan (used[r] false for an unused rank), in one
 * pass over the stages and one over the groups' members, so that the fit
 * check costs O(ranks + members) however often a search calls it. */
static void plan_places(const struct hx_ctx *ctx, const struct hx_plan *plan,
                        struct mem_place *places, bool *used) {
  for (int r = 0; r < plan->ndevices; r++)
    used[r] = false;
  for (int i = 0; i < plan->npipelines; i++) {
    const struct hx_pipeline *pl = &plan->pipelines[i];
    for (int si = 0; si < pl->nstages; si++) {
      const struct hx_stage *st = &pl->stages[si];
      for (int k = 0; k < st->ndevices; k++) {
        int r = st->devices[k];
        struct mem_place *p = &places[r];
        memset(p, 0, sizeof *p);
        used[r] = true;
        p->st = st;
        p->first = si == 0;
        p->last = si == pl->nstages - 1;
        p->hops = pl->nstages > 1;
        p->tp_rank = k % st->tp;
        p->receive = hop_receive_buffers(plan, pl, si, st);
        p->mbs = (double)pl->micro_batch_size;
        p->slots = (double)hx_in_flight(plan->schedule, si, pl->nstages, pl->micro_batches);
        if (st->seq_layout) {
          p->seq = true;
          hx_seq_rank_buffers(ctx, plan, st, r, &p->tokens, &p->attention, &p->whole);
          p->unit = seq_pack_elements(ctx, st, p->mbs, p->whole);
        }
      }
    }
  }
  if (plan->optimizer_sharding == HX_SHARD_ZERO1)
    for (int gi = 0; gi < plan->ngroups; gi++) {
      const struct hx_group *g = &plan->groups[gi];
      if (!g->shard_ppm)
        continue;
      for (int i = 0; i < g->nranks; i++) {
        struct mem_place *p = &places[g->ranks[i]];
        if (!used[g->ranks[i]])
          continue;
        struct rank_shape s = shape_of(&ctx->model, p->st->tp, p->tp_rank);
        double floats = group_floats(ctx, plan, g, &s, p->st->tp);
        double share = g->shard_ppm[i] / (double)HX_PPM;
        p->unstepped += floats * (1 - share);
        p->recv += floats * share;
      }
    }
  bool shard_nonlayer = hx_plan_sharded(plan) && !hx_plan_has_units(plan) && !nonlayer_sharded(plan);
  int nholders[2] = {0, 0};
  if (shard_nonlayer) {
    nholders[0] = holders(plan, true, ctx->model.tie_embeddings);
    nholders[1] = holders(plan, false, ctx->model.tie_embeddings);
  }
  for (int r = 0; r < plan->ndevices; r++)
    if (used[r])
      sync_of(ctx, plan, &places[r], shard_nonlayer, nholders);
}

void hx_rank_memory_by_kind(const struct hx_ctx *ctx, const struct hx_plan *plan, int r,
                            double *bytes) {
  memset(bytes, 0, HX_MEM_NKINDS * sizeof *bytes);
  struct hx_arena scratch;
  hx_arena_init(&scratch);
  struct mem_place *places = HX_NEW_ARRAY(&scratch, struct mem_place, plan->ndevices + 1);
  bool *used = HX_NEW_ARRAY(&scratch, bool, plan->ndevices + 1);
  plan_places(ctx, plan, places, used);
  if (r >= 0 && r < plan->ndevices && used[r])
    rank_bytes(ctx, &places[r], bytes);
  hx_arena_free(&scratch);
}

/* ---- the fit check ------------------------------------------------------
 * Every planner's memory figure is rank_bytes' total plus the reserve: a
 * plan's ranks exactly (plan_memory), a searched stage by its best guess of
 * the pipeline around it (hx_stage_memory_bytes). */

/* What each rank needs: with_optimizer false leaves the optimizer state out
 * (the free memory a ZeRO-1 split is proportional to). */
static bool plan_memory(const struct hx_ctx *ctx, const struct hx_plan *plan, double *need,
                        double *shortfall, int *worst_rank, bool with_optimizer) {
  const struct hx_cluster *c = &ctx->cluster;
  double worst = -INFINITY;
  int worst_at = -1;
  struct hx_arena scratch;
  hx_arena_init(&scratch);
  struct mem_place *places = HX_NEW_ARRAY(&scratch, struct mem_place, plan->ndevices + 1);
  bool *used = HX_NEW_ARRAY(&scratch, bool, plan->ndevices + 1);
  plan_places(ctx, plan, places, used);
  for (int r = 0; r < plan->ndevices; r++) {
    if (need)
      need[r] = 0;
    if (!used[r])
      continue;
    double bytes[HX_MEM_NKINDS];
    rank_bytes(ctx, &places[r], bytes);
    double mine = total_of(bytes) + HX_MEMORY_RESERVE_BYTES -
                  (with_optimizer ? 0.0 : bytes[HX_MEM_OPTIMIZER]);
    if (need)
      need[r] = mine;
    double have = (double)c->gpus[c->devices[r].gpu_type].memory_bytes;
    if (mine - have > worst) {
      worst = mine - have;
      worst_at = r;
    }
  }
  hx_arena_free(&scratch);
  if (shortfall)
    *shortfall = worst;
  if (worst_rank)
    *worst_rank = worst_at;
  return worst_at >= 0 && worst <= 0;
}

bool hx_plan_memory(const struct hx_ctx *ctx, const struct hx_plan *plan, double *need,
                    double *shortfall, int *worst_rank) {
  return plan_memory(ctx, plan, need, shortfall, worst_rank, true);
}

bool hx_plan_memory_fits(const struct hx_ctx *ctx, const struct hx_plan *plan, double *shortfall,
                         int *worst_rank) {
  return plan_memory(ctx, plan, NULL, shortfall, worst_rank, true);
}

void hx_plan_free_bytes(const struct hx_ctx *ctx, const struct hx_plan *plan, double *free_bytes) {
  plan_memory(ctx, plan, free_bytes, NULL, NULL, false);
  const struct hx_cluster *c = &ctx->cluster;
  for (int r = 0; r < plan->ndevices; r++)
    free_bytes[r] = (double)c->gpus[c->devices[r].gpu_type].memory_bytes - free_bytes[r];
}

/* A searched stage, before its plan exists: the pipeline around it guessed
 * from first, last and in_flight (hops unless it is a whole pipeline; two
 * receive buffers in the middle, and on a first stage with two or more
 * micro-batches in flight; a GPipe last stage too); its sync from what the
 * search knows (st->opt_share: a ZeRO-1 share, so replicated; HexiSeq
 * units: replicas), else a TP stage's replicated tensors. A plan's own
 * check prices its ranks exactly (plan_memory). */
static void stage_place(const struct hx_ctx *ctx, const struct hx_stage *st, bool first, bool last,
                        int64_t mbs, int64_t in_flight, int tp_rank, struct mem_place *p) {
  const struct hx_model *m = &ctx->model;
  memset(p, 0, sizeof *p);
  p->st = st;
  p->first = first;
  p->last = last;
  p->hops = !(first && last);
  p->tp_rank = tp_rank;
  bool two = in_flight >= 2 && (first || ctx->train.schedule == HX_PP_GPIPE);
  p->receive = !first && !last ? 2 : two ? 2 : 1;
  p->mbs = (double)mbs;
  p->slots = (double)in_flight;
  bool zero1 = ctx->train.optimizer_sharding == HX_SHARD_ZERO1;
  bool shared = zero1 && st->opt_share > 0 && st->opt_share < 1;
  double layers = st->layer_end - st->layer_begin;
  if (shared || hx_stage_replicas(st) > 1)
    p->pack_held = true;
  else if (st->tp > 1)
    p->pack = layers * 2 * (double)m->hidden + (double)hx_stage_params(m, 0, 0, first, last);
  if (shared) {
    p->stepped_div = 1.0 / st->opt_share;
    p->recv_stepped = true;
  } else if (zero1)
    p->stepped_div = hx_stage_replicas(st);
}

double hx_seq_unit_bytes_by_kind(const struct hx_ctx *ctx, const struct hx_stage *st, int u,
                                 bool first, bool last, int64_t mbs, int64_t in_flight) {
  const struct hx_seq_layout *l = st->seq_layout;
  const struct hx_model *m = &ctx->model;
  int leader_unit = 0;
  for (int k = 0; k < st->ndevices; k++)
    if (st->devices[k] == st->leader)
      leader_unit = k / st->tp;
  double most = 0, attention = hx_seq_hook_scratch_floats(m, l, u);
  for (int k = 0; k < st->tp; k++) {
    struct mem_place p;
    stage_place(ctx, st, first, last, mbs, in_flight, k, &p);
    p.seq = true;
    p.tokens = (double)l->tokens[u];
    p.attention = attention;
    p.whole = p.hops && u == leader_unit ? (double)mbs * (double)m->seq_len * (double)m->hidden : 0;
    p.unit = seq_pack_elements(ctx, st, (double)mbs, p.whole);
    p.receive = 1; /* a leader's receive lands in its whole buffer */
    double bytes[HX_MEM_NKINDS];
    rank_bytes(ctx, &p, bytes);
    most = fmax(most, total_of(bytes));
  }
  return most + HX_MEMORY_RESERVE_BYTES;
}

double hx_stage_memory_bytes(const struct hx_ctx *ctx, const struct hx_stage *st, bool first,
                             bool last, int64_t mbs, int64_t in_flight) {
  if (st->seq_layout) {
    double most = 0;
    for (int u = 0; u < st->seq_layout->nunits; u++)
      most = fmax(most, hx_seq_unit_bytes_by_kind(ctx, st, u, first, last, mbs, in_flight));
    return most;
  }
  double most = 0;
  for (int k = 0; k < st->tp; k++) { /* uneven shards: the largest */
    struct mem_place p;
    stage_place(ctx, st, first, last, mbs, in_flight, k, &p);
    double bytes[HX_MEM_NKINDS];
    rank_bytes(ctx, &p, bytes);
    most = fmax(most, total_of(bytes));
  }
  return most + HX_MEMORY_RESERVE_BYTES;
}

/* hx_stage_memory_bytes split at the optimizer share. A searching planner
 * prices one stage shape (TP degree, layers, recompute, ends, micro-batch
 * size, micro-batches in flight) at many shares (st->opt_share follows each
 * plan's devices), and the share reaches rank_bytes only through the
 * optimizer state and the gradient sync's pack and receive blocks: the
 * parts are rank_bytes of a place with no sync (the optimizer kind holds
 * held x 8, the comm kind the rest of comm), and the share's terms are put
 * back with rank_bytes' own arithmetic, so the total is its to the bit
 * (tests/cost/test_cost.c compares them). */
bool hx_stage_memory_parts(const struct hx_ctx *ctx, const struct hx_stage *st, bool first,
                           bool last, int64_t mbs, int64_t in_flight,
                           struct hx_stage_memory_parts *parts) {
  if (st->seq_layout || st->tp < 1 || st->tp > HX_MEMORY_PARTS_RANKS)
    return false;
  parts->nranks = st->tp;
  for (int k = 0; k < st->tp; k++) {
    struct mem_place p;
    stage_place(ctx, st, first, last, mbs, in_flight, k, &p);
    p.pack_held = p.recv_stepped = false;
    p.pack = p.recv = p.stepped_div = p.unstepped = 0;
    rank_bytes(ctx, &p, parts->bytes[k]);
  }
  return true;
}

double hx_stage_memory_from_parts(const struct hx_ctx *ctx, const struct hx_stage *st, bool first,
                                  bool last, int64_t mbs, int64_t in_flight,
                                  const struct hx_stage_memory_parts *parts) {
  /* the sync's terms are the same on every TP rank */
  struct mem_place p;
  stage_place(ctx, st, first, last, mbs, in_flight, 0, &p);
  double most = 0;
  for (int k = 0; k < parts->nranks; k++) {
    double bytes[HX_MEM_NKINDS];
    memcpy(bytes, parts->bytes[k], sizeof bytes);
    /* rank_bytes' held, stepped, pack and recv: held x 8 / 8 is exact */
    double held = bytes[HX_MEM_OPTIMIZER] / 8.0;
    double stepped = p.stepped_div > 0 ? held / p.stepped_div : held - p.unstepped;
    double pack = p.pack_held ? held : p.pack, recv = p.recv_stepped ? stepped : p.recv;
    bytes[HX_MEM_OPTIMIZER] = stepped * 8.0;
    bytes[HX_MEM_COMM] = (pack + recv) * 4.0 + bytes[HX_MEM_COMM];
    most = fmax(most, total_of(bytes));
  }
  return most + HX_MEMORY_RESERVE_BYTES;
}

/* A unit's memory is the per-kind model's (passes/cost/cost_memory.c,
 * plan.json's memory_by_kind) plus the reserve: the figure the plan's own
 * fit check gives its ranks. */
double hx_seq_unit_memory_bytes(const struct hx_ctx *ctx, const struct hx_stage *st, int u,
                                bool first, bool last, int64_t mbs, int64_t in_flight) {
  return hx_seq_unit_bytes_by_kind(ctx, st, u, first, last, mbs, in_flight);
}

bool hx_seq_stage_memory_fits(const struct hx_ctx *ctx, const struct hx_stage *st, bool first,
                              bool last, int64_t mbs, int64_t in_flight, double *worst) {
  const struct hx_seq_layout *l = st->seq_layout;
  double over = -INFINITY;
  for (int u = 0; u < l->nunits; u++)
    over = fmax(over, hx_seq_unit_memory_bytes(ctx, st, u, first, last, mbs, in_flight) -
                          l->unit_memory[u]);
  if (worst)
    *worst = over;
  return over <= 0;
}

/* The per-kind figure grows with the unit's tokens almost linearly (its
 * activations, hop buffers and scratch by rows; the attention hook's
 * scratch by its group's tokens): the capacity is read off the slope
 * between its tokens and one more. */
int64_t hx_seq_unit_token_capacity(const struct hx_ctx *ctx, const struct hx_stage *st, int u,
                                   bool first, bool last, int64_t mbs, int64_t in_flight) {
  /* the searches' layouts are their own: one more token, then back */
  struct hx_seq_layout *l = (struct hx_seq_layout *)st->seq_layout;
  int64_t had = l->tokens[u];
  double now = hx_seq_unit_memory_bytes(ctx, st, u, first, last, mbs, in_flight);
  l->tokens[u] = had + 1;
  double per = hx_seq_unit_memory_bytes(ctx, st, u, first, last, mbs, in_flight) - now;
  l->tokens[u] = had;
  double room = l->unit_memory[u] - (now - (double)had * per);
  if (room <= 0 || per <= 0)
    return room > 0 ? ctx->model.seq_len : 0;
  double cap = floor(room / per);
  return cap > (double)ctx->model.seq_len ? ctx->model.seq_len : (int64_t)cap;
}
