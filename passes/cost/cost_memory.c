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

/* Where rank r runs: its stage and TP rank; false when unused. */
static bool place_of(const struct hx_plan *plan, int r, const struct hx_pipeline **pl, int *s,
                     int *tp_rank) {
  const struct hx_device_plan *d = &plan->devices[r];
  if (d->pipeline < 0)
    return false;
  *pl = &plan->pipelines[d->pipeline];
  *s = d->stage;
  const struct hx_stage *st = &(*pl)->stages[*s];
  *tp_rank = 0;
  for (int k = 0; k < st->ndevices; k++)
    if (st->devices[k] == r)
      *tp_rank = k % st->tp;
  return true;
}

static bool in_group(const struct hx_group *g, int r, int *member) {
  for (int i = 0; i < g->nranks; i++)
    if (g->ranks[i] == r) {
      *member = i;
      return true;
    }
  return false;
}

/* Floats of rank r's gradients a gradient-sync group reduces (its part of
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
 * emit_rank.c's group_shards). */
static void nonlayer_shares(const struct hx_ctx *ctx, const struct hx_plan *plan,
                            const struct hx_stage *st, double *stepped, double *recv) {
  const struct hx_model *m = &ctx->model;
  const struct hx_pipeline *pl = NULL;
  int index = -1;
  for (int i = 0; i < plan->npipelines && index < 0; i++)
    for (int s = 0; s < plan->pipelines[i].nstages; s++)
      if (&plan->pipelines[i].stages[s] == st) {
        pl = &plan->pipelines[i];
        index = s;
      }
  bool first = index == 0, last = index == pl->nstages - 1, tied = m->tie_embeddings;
  double emb = (double)m->params_embedding, head = (double)(m->params_final_norm + m->params_head);
  double parts[2] = {first || (tied && last) ? emb : 0.0, last ? head : 0.0};
  for (int k = 0; k < 2; k++) {
    int n = holders(plan, k == 0, tied);
    if (parts[k] <= 0 || n <= 1)
      continue;
    *stepped -= parts[k] * (1.0 - 1.0 / n);
    *recv += parts[k] / n;
  }
}

/* Floats rank r steps (m and v): all it holds, less the others' shares of
 * its ZeRO-1 groups; a plan with HexiSeq units splits evenly over the
 * replicas (hx_plan_optimizer_params). Also ZeRO-1's receive (its own
 * blocks) and the gradient-sync pack: every weight a rank holds has a
 * replica when the plan has several pipelines or its stage several
 * HexiSeq units (codegen derives the groups from the TP shards' overlaps,
 * so each held element is in exactly one); else a TP stage's ranks all hold
 * the norm gains, embedding and head whole, and one pipeline's tied
 * embedding is held by its first and last stages. */
static void sync_floats(const struct hx_ctx *ctx, const struct hx_plan *plan, int r,
                        const struct hx_stage *st, const struct rank_shape *s, double held,
                        double *stepped, double *pack, double *recv) {
  *stepped = held;
  *pack = *recv = 0;
  bool zero1 = plan->optimizer_sharding == HX_SHARD_ZERO1;
  for (int gi = 0; gi < plan->ngroups; gi++) {
    const struct hx_group *g = &plan->groups[gi];
    int member;
    if (!in_group(g, r, &member))
      continue;
    double floats = group_floats(ctx, plan, g, s, st->tp);
    if (!zero1 || !g->shard_ppm)
      continue;
    double share = g->shard_ppm[member] / (double)HX_PPM;
    *stepped -= floats * (1 - share);
    *recv += floats * share;
  }
  bool tied_pair = ctx->model.tie_embeddings && plan->npipelines == 1 &&
                   plan->pipelines[0].nstages > 1 &&
                   (st == &plan->pipelines[0].stages[0] ||
                    st == &plan->pipelines[0].stages[plan->pipelines[0].nstages - 1]);
  double layers = st->layer_end - st->layer_begin;
  if (plan->npipelines > 1 || (st->seq_layout && st->seq_layout->nunits > 1))
    *pack = held;
  else if (st->tp > 1) /* its TP ranks' whole norm gains, embedding and head */
    *pack = layers * 2 * s->dim + held - layers * layer_floats(s);
  else if (tied_pair)
    *pack = (double)ctx->model.params_embedding;
  if (zero1 && hx_plan_sharded(plan) && !hx_plan_has_units(plan) && !nonlayer_sharded(plan))
    nonlayer_shares(ctx, plan, st, stepped, recv);
  if (zero1 && hx_plan_has_units(plan)) {
    int width;
    hx_grad_slicing(plan, st->layer_begin, &width);
    *stepped = held / (width > 1 ? width : 1);
  }
}

void hx_rank_memory_by_kind(const struct hx_ctx *ctx, const struct hx_plan *plan, int r,
                            double *bytes) {
  memset(bytes, 0, HX_MEM_NKINDS * sizeof *bytes);
  const struct hx_pipeline *pl;
  int si, tp_rank;
  if (!place_of(plan, r, &pl, &si, &tp_rank))
    return;
  const struct hx_model *m = &ctx->model;
  const struct hx_stage *st = &pl->stages[si];
  bool first = si == 0, last = si == pl->nstages - 1, hops = pl->nstages > 1;
  struct rank_shape s = shape_of(m, st->tp, tp_rank);
  double nlayers = st->layer_end - st->layer_begin;
  /* the CPU backend computes in fp32 whatever the plan's precision */
  double e = ctx->opt.target == HX_TARGET_CPU ? 4.0 : hx_elem_bytes(&ctx->train);
  double held = nlayers * layer_floats(&s) + (double)hx_stage_params(m, 0, 0, first, last);
  double stepped, pack, recv;
  sync_floats(ctx, plan, r, st, &s, held, &stepped, &pack, &recv);
  bytes[HX_MEM_WEIGHTS] = held * (4.0 + (e < 4.0 ? e : 0.0)); /* master, and a bf16 copy */
  bytes[HX_MEM_GRADIENTS] = held * 4.0;
  bytes[HX_MEM_OPTIMIZER] = stepped * 8.0; /* AdamW m and v: the runtime steps AdamW */

  /* a HexiSeq rank holds its unit's tokens, and its leader whole activations */
  double tokens = (double)m->seq_len, attention = 2.0 * tokens * tokens, whole = 0;
  if (st->seq_layout)
    hx_seq_rank_buffers(ctx, plan, st, r, &tokens, &attention, &whole);
  double n = (double)pl->micro_batch_size * tokens, D = (double)m->hidden;
  double slots = (double)hx_in_flight(plan->schedule, si, pl->nstages, pl->micro_batches);
  double full = n * acts_floats_per_token(&s); /* one layer's, floats */
  double kept = st->recompute ? n * D : full;  /* recompute keeps the layer input */
  bytes[HX_MEM_ACTIVATIONS] = slots * (nlayers > 0 ? nlayers : 1) * kept * e;
  double recompute = st->recompute ? full * e : 0.0;
  bytes[HX_MEM_RECOMPUTE] = recompute;

  /* out_act, dout and din per slot; out_act and din hold what a hop carries */
  double sent = whole > 0 ? whole : n * D;
  double boundary = slots * (n * D + 2 * sent) * e;
  double receive = hops ? hop_receive_buffers(plan, pl, si, st) * n * D * e : 0.0;
  bytes[HX_MEM_COMM] = (hops ? boundary + receive + 2 * whole * e : 0.0) + (pack + recv) * 4.0;
  double layer_scratch = recompute + layer_scratch_floats(&s, n, attention) * e;
  double scratch = fmax(layer_scratch, head_scratch_floats(m, n) * e);
  bytes[HX_MEM_WORKSPACE] = (hops ? 0.0 : boundary) + slots * 2 * n * 4.0 /* tokens */ +
                            2 * n * D * e /* x0, x1 */ + scratch - recompute +
                            (double)m->seq_len * s.hd * 4.0 /* RoPE */ + (double)m->heads * 4.0;
  if (hx_stage_sequence_parallel(ctx, st)) {
    int64_t tokens_mb = pl->micro_batch_size * m->seq_len;
    struct sp_shape sp = {(double)tokens_mb,
                          (double)(tokens_mb / st->tp + (tp_rank < tokens_mb % st->tp ? 1 : 0)),
                          (double)m->hidden,
                          e,
                          (double)hx_in_flight(plan->schedule, si, pl->nstages, pl->micro_batches),
                          nlayers,
                          st->recompute,
                          first || last};
    sp_adjust(m, &s, &sp, bytes);
  }
}
