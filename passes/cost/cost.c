#include "cost.h"

#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ir/plan_util.h"

/* ---- sizes ------------------------------------------------------------- */

static double optimizer_bandwidth(const struct hx_cluster *c, int rank);

double hx_state_bytes_per_param(const struct hx_train *train) {
  bool adam = train->optimizer == HX_OPT_ADAMW;
  if (train->precision == HX_PREC_FP32)
    return adam ? 16.0 : 8.0; /* weight, grad (+ m, v) */
  return adam ? 18.0 : 10.0;  /* bf16 weight, fp32 grad, fp32 master (+ m, v) */
}

double hx_optimizer_state_bytes_per_param(const struct hx_train *train) {
  bool adam = train->optimizer == HX_OPT_ADAMW;
  if (train->precision == HX_PREC_FP32)
    return adam ? 8.0 : 0.0; /* m, v (the fp32 weight is the master) */
  return adam ? 12.0 : 4.0;  /* fp32 master (+ m, v) */
}

double hx_optimizer_traffic_per_param(const struct hx_train *train) {
  bool adam = train->optimizer == HX_OPT_ADAMW;
  /* the norm reads the fp32 gradient, clipping reads and writes it */
  const double norm_and_clip = 4.0 + 8.0;
  if (train->precision == HX_PREC_FP32) /* read w g m v, write w m v | read w g, write w */
    return (adam ? 28.0 : 12.0) + norm_and_clip;
  return (adam ? 30.0 : 14.0) + norm_and_clip; /* + the bf16 copy of the weight written */
}

/* Bytes per second a device copies within its memory: its copy_bandwidth,
 * else the optimizer's rate (what every copy was priced at before a
 * profile measured the two apart: on a CPU a memcpy of a stage's weights
 * runs 4-8x the rate of AdamW's square roots and divisions). */
static double copy_bandwidth(const struct hx_cluster *c, int rank) {
  const struct hx_gpu_type *g = &c->gpus[c->devices[rank].gpu_type];
  return g->copy_bandwidth > 0 ? g->copy_bandwidth : optimizer_bandwidth(c, rank);
}

double hx_rank_weight_repack_s(const struct hx_ctx *ctx, int rank, double params) {
  return params * 4.0 * hx_elem_bytes(&ctx->train) / copy_bandwidth(&ctx->cluster, rank);
}

/* ---- per stage --------------------------------------------------------- */

int64_t hx_stage_params(const struct hx_model *m, int layer_begin, int layer_end, bool first,
                        bool last) {
  int64_t p = (int64_t)(layer_end - layer_begin) * m->params_layer;
  if (first)
    p += m->params_embedding;
  if (last) {
    p += m->params_final_norm + m->params_head;
    if (m->tie_embeddings && !first)
      p += m->params_embedding; /* the LM head's own copy of tok_emb */
  }
  return p;
}

double hx_stage_fwd_flops(const struct hx_model *m, int layer_begin, int layer_end, bool first,
                          bool last, int64_t tokens) {
  double per_token = (double)(layer_end - layer_begin) * m->flops_layer_fwd;
  if (first)
    per_token += m->flops_embedding_fwd;
  if (last)
    per_token += m->flops_head_fwd;
  return per_token * (double)tokens;
}

double hx_stage_min_flops(const struct hx_cluster *c, const struct hx_stage *st) {
  double slowest = INFINITY;
  for (int i = 0; i < st->ndevices; i++) {
    double f = hx_device_flops(c, st->devices[i]);
    if (f < slowest)
      slowest = f;
  }
  return slowest;
}

static int64_t tokens_of(const struct hx_ctx *ctx, int64_t mbs) { return mbs * ctx->model.seq_len; }

/* ---- tensor parallelism and measured profiles (issue 18) --------------- */

const struct hx_profile *hx_gpu_profile(const struct hx_cluster *c, int gpu_type, int tp) {
  const struct hx_gpu_type *g = &c->gpus[gpu_type];
  for (int i = g->profile_first; i < g->profile_first + g->nprofiles; i++)
    if (c->profiles[i].tp == tp)
      return &c->profiles[i];
  return NULL;
}

/* y at x on the line through (x0, y0) and (x1, y1). */
static double on_line(double x, double x0, double y0, double x1, double y1) {
  return y0 + (x - x0) * (y1 - y0) / (x1 - x0);
}

void hx_profile_at(const struct hx_profile *p, int64_t mbs, double *fwd, double *bwd, double *act) {
  int n = p->npoints, hi = 0;
  while (hi < n - 1 && p->micro_batch[hi] < mbs)
    hi++;
  double x = (double)mbs, xh = (double)p->micro_batch[hi];
  if (x <= xh && (hi == 0 || x == xh)) { /* at a measured size, or below the smallest */
    double scale = x / xh;
    *fwd = p->fwd_s[hi] * scale;
    *bwd = p->bwd_s[hi] * scale;
    *act = p->act_bytes[hi] * scale;
    return;
  }
  if (n == 1) { /* above the only size measured */
    double scale = x / xh;
    *fwd = p->fwd_s[0] * scale, *bwd = p->bwd_s[0] * scale, *act = p->act_bytes[0] * scale;
    return;
  }
  int lo = x > xh ? n - 2 : hi - 1; /* above the largest: the last two */
  double xl = (double)p->micro_batch[lo];
  *fwd = on_line(x, xl, p->fwd_s[lo], xh, p->fwd_s[hi]);
  *bwd = on_line(x, xl, p->bwd_s[lo], xh, p->bwd_s[hi]);
  *act = on_line(x, xl, p->act_bytes[lo], xh, p->act_bytes[hi]);
  if (x > xh) { /* extrapolated: never below the largest measured size's figures */
    *fwd = fmax(*fwd, p->fwd_s[hi]);
    *bwd = fmax(*bwd, p->bwd_s[hi]);
    *act = fmax(*act, p->act_bytes[hi]);
  }
}

/* Least squares of y = a x + b over n points; one point: b = 0. */
static void fit_line(const double *x, const double *y, int n, double *a, double *b) {
  double sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (int i = 0; i < n; i++) {
    sx += x[i], sy += y[i], sxx += x[i] * x[i], sxy += x[i] * y[i];
  }
  double det = n * sxx - sx * sx;
  if (n < 2 || !(det > 0)) {
    *a = sy / sx;
    *b = 0;
    return;
  }
  *a = (n * sxy - sx * sy) / det;
  *b = (sy - *a * sx) / n;
}

/* Seconds per sequence of one forward (fwd + bwd over 3) of a profile,
 * given the overhead b per micro-batch: the slope through the points with
 * intercept b, by least squares. */
static double slope_given_overhead(const struct hx_profile *p, double b) {
  double num = 0, den = 0;
  for (int i = 0; i < p->npoints; i++) {
    double x = (double)p->micro_batch[i], y = (p->fwd_s[i] + p->bwd_s[i]) / 3.0;
    num += x * (y - b);
    den += x * x;
  }
  return num / den;
}

bool hx_tp_calibrate(const struct hx_model *m, const struct hx_profile *profiles, int nprofiles,
                     struct hx_tp_fit *fit) {
  const struct hx_profile *one = NULL;
  for (int i = 0; i < nprofiles; i++)
    if (profiles[i].tp == 1)
      one = &profiles[i];
  if (!one || one->npoints < 1)
    return false;
  enum { MAX_POINTS = 64 };
  double x[MAX_POINTS], y[MAX_POINTS], a, b;
  int n = one->npoints < MAX_POINTS ? one->npoints : MAX_POINTS;
  for (int i = 0; i < n; i++) {
    x[i] = (double)one->micro_batch[i];
    y[i] = (one->fwd_s[i] + one->bwd_s[i]) / 3.0;
  }
  fit_line(x, y, n, &a, &b);
  if (b < 0) /* a negative overhead means none: refit through the origin */
    b = 0, a = slope_given_overhead(one, 0);
  fit->overhead = b;
  fit->rate = m->flops_layer_fwd * (double)m->seq_len / a;
  fit->npoints = 1;
  fit->efficiency[0] = 1.0;
  for (int k = 1; k < HX_TP_CURVE_POINTS; k++) {
    const struct hx_profile *p = NULL;
    for (int i = 0; i < nprofiles; i++)
      if (profiles[i].tp == 1 << k && profiles[i].npoints > 0)
        p = &profiles[i];
    if (!p)
      continue;
    double e = a / ((1 << k) * slope_given_overhead(p, b));
    for (int j = fit->npoints; j < k; j++) /* degrees not measured: on the log2 line */
      fit->efficiency[j] = on_line(j, fit->npoints - 1, fit->efficiency[fit->npoints - 1], k, e);
    fit->efficiency[k] = fmin(e, fit->efficiency[k - 1]);
    fit->npoints = k + 1;
  }
  for (int k = 1; k < fit->npoints; k++) /* non-increasing, after the interpolation too */
    fit->efficiency[k] = fmin(fit->efficiency[k], fit->efficiency[k - 1]);
  return true;
}

/* The slowest member's FLOP/s in the LM head's forward or backward. */
static double stage_min_head_flops(const struct hx_cluster *c, const struct hx_stage *st,
                                   bool backward) {
  double slowest = INFINITY;
  for (int i = 0; i < st->ndevices; i++)
    slowest = fmin(slowest, hx_device_head_flops(c, st->devices[i], backward));
  return slowest;
}

/* Compute seconds of the forward `flops` that every member of the stage's
 * TP group runs whole (the embedding, none, and the final norm and LM
 * head: hexic's runtime does not split them), on the slowest member at the
 * head's rate. */
static double unsplit_compute_s(const struct hx_ctx *ctx, const struct hx_stage *st, double flops) {
  return flops / stage_min_head_flops(&ctx->cluster, st, false);
}

/* One decoder layer's forward and backward compute for one micro-batch on
 * the stage (no TP collectives, no recompute): per member, its type's
 * profile at the stage's degree, else the FLOP model with the type's curve
 * and overhead; the slowest member's, as the group runs in lockstep. */
static void layer_compute(const struct hx_ctx *ctx, const struct hx_stage *st, int64_t mbs,
                          double *fwd, double *bwd) {
  const struct hx_cluster *c = &ctx->cluster;
  double flops = ctx->model.flops_layer_fwd * (double)tokens_of(ctx, mbs) / st->tp;
  *fwd = *bwd = 0;
  for (int i = 0; i < st->ndevices; i++) {
    int type = c->devices[st->devices[i]].gpu_type;
    const struct hx_gpu_type *g = &c->gpus[type];
    const struct hx_profile *p = g->nprofiles > 0 ? hx_gpu_profile(c, type, st->tp) : NULL;
    double f, b, act;
    if (p) {
      hx_profile_at(p, mbs, &f, &b, &act);
    } else {
      double tp_eff = hx_tp_efficiency(g, st->tp);
      f = flops / (hx_device_flops(c, st->devices[i]) * tp_eff) + g->layer_overhead;
      b = 2 * (flops / (hx_device_backward_flops(c, st->devices[i]) * tp_eff) + g->layer_overhead);
    }
    *fwd = fmax(*fwd, f);
    *bwd = fmax(*bwd, b);
  }
}

/* The model's activation bytes per token of one layer on one TP rank: all
 * of them / tp under sequence parallelism; without it the four [T, D]
 * tensors kept by rows (x, the normed a, x1, the normed m: 4 D elements,
 * model_stats.c's count) stay whole on every TP rank and only the rest is
 * split. The element size is what recompute keeps per token / D. */
static double layer_act_bytes_per_token(const struct hx_ctx *ctx, const struct hx_stage *st) {
  const struct hx_model *m = &ctx->model;
  if (st->tp <= 1 || hx_stage_sequence_parallel(ctx, st))
    return m->act_bytes_layer / st->tp;
  double rows = 4.0 * m->act_bytes_layer_recompute; /* 4 D elements */
  return rows + (m->act_bytes_layer - rows) / st->tp;
}

/* What full recompute keeps per token of one layer: its input, by rows
 * under sequence parallelism, else whole on every TP rank. */
static double layer_recompute_bytes_per_token(const struct hx_ctx *ctx, const struct hx_stage *st) {
  double tp = hx_stage_sequence_parallel(ctx, st) ? st->tp : 1;
  return ctx->model.act_bytes_layer_recompute / tp;
}

/* Bytes one device of the stage keeps for one decoder layer's full
 * activations of one micro-batch: its type's profile when it gives them,
 * else the model's (layer_act_bytes_per_token); the largest over members. */
static double layer_act_bytes(const struct hx_ctx *ctx, const struct hx_stage *st, int64_t mbs) {
  const struct hx_cluster *c = &ctx->cluster;
  double model = (double)tokens_of(ctx, mbs) * layer_act_bytes_per_token(ctx, st), most = 0;
  for (int i = 0; i < st->ndevices; i++) {
    int type = c->devices[st->devices[i]].gpu_type;
    const struct hx_profile *p = c->gpus[type].nprofiles > 0 ? hx_gpu_profile(c, type, st->tp) : NULL;
    double f, b, act = 0;
    if (p)
      hx_profile_at(p, mbs, &f, &b, &act);
    most = fmax(most, act > 0 ? act : model);
  }
  return most;
}

/* Stages with a context x head layout are priced by passes/cost/cost_seq.c. */
static struct hx_seq_stage_cost seq_cost(const struct hx_ctx *ctx, const struct hx_stage *st,
                                         int64_t mbs, bool with_comm) {
  struct hx_seq_stage_cost c;
  hx_seq_stage_cost(ctx, st, mbs, with_comm, &c);
  return c;
}

double hx_layer_compute_s(const struct hx_ctx *ctx, const struct hx_stage *st, int64_t mbs) {
  if (st->seq_layout)
    return seq_cost(ctx, st, mbs, false).layer_fwd;
  double fwd, bwd;
  layer_compute(ctx, st, mbs, &fwd, &bwd);
  return fwd;
}

bool hx_stage_sequence_parallel(const struct hx_ctx *ctx, const struct hx_stage *st) {
  return ctx->train.sequence_parallel && st->tp > 1 && !st->seq_layout &&
         st->layer_end > st->layer_begin;
}

/* One TP all-reduce of a micro-batch's activations (mbs x T x D elements). */
static double tp_allreduce_s(const struct hx_ctx *ctx, const struct hx_stage *st, int64_t mbs) {
  if (st->tp <= 1)
    return 0;
  return hx_allreduce_s(&ctx->cluster, st->devices, st->tp, hx_hop_bytes(ctx, mbs));
}

/* One sequence-parallel reduce-scatter or all-gather of a micro-batch's
 * activations: a ring of tp - 1 steps, each moving the largest TP rank's
 * rows (ceil(n / tp) of hxk_sp_rows' split). */
static double sp_collective_s(const struct hx_ctx *ctx, const struct hx_stage *st, int64_t mbs) {
  if (st->tp <= 1)
    return 0;
  int64_t n = tokens_of(ctx, mbs), rows = (n + st->tp - 1) / st->tp;
  double row_bytes = hx_hop_bytes(ctx, mbs) / (double)n;
  return hx_reduce_scatter_s(&ctx->cluster, st->devices, st->tp, rows * row_bytes * st->tp, NULL);
}

double hx_layer_tp_comm_s(const struct hx_ctx *ctx, const struct hx_stage *st, int64_t mbs) {
  if (st->seq_layout) /* all of the layer's communication: TP, all-to-all, exposed ring */
    return seq_cost(ctx, st, mbs, true).layer_fwd - seq_cost(ctx, st, mbs, false).layer_fwd;
  if (hx_stage_sequence_parallel(ctx, st)) /* 2 reduce-scatters, 2 all-gathers */
    return 4 * sp_collective_s(ctx, st, mbs);
  return 2 * tp_allreduce_s(ctx, st, mbs);
}

static int nlayers(const struct hx_stage *st) { return st->layer_end - st->layer_begin; }

double hx_head_bwd_s(const struct hx_ctx *ctx, const struct hx_stage *st, int64_t mbs) {
  if (st->seq_layout)
    return seq_cost(ctx, st, mbs, true).head_bwd;
  /* 2x the forward's FLOPs, at the head's backward rate, whole on every member */
  double flops = 2 * ctx->model.flops_head_fwd * (double)tokens_of(ctx, mbs);
  return flops / stage_min_head_flops(&ctx->cluster, st, true);
}

/* A TP stage's communication per micro-batch, as the runtime runs it.
 * Without sequence parallelism: per layer 2 all-reduces forward, 2 backward
 * (of da and dm). With it (rtlib/rt_exec_ops.c, kernels/cpu/layer.c): per
 * layer forward 2 all-gathers (the normed rows) and 2 reduce-scatters;
 * backward 4 all-gathers (the output gradient twice, a and m again) and 2
 * reduce-scatters; and per stage one all-gather each way (the last layer's
 * rows before the head or the send; the input gradient's before the
 * embedding or the send). */
struct tp_comm {
  double layer_fwd, layer_bwd, stage_fwd, stage_bwd;
};

static struct tp_comm tp_comm(const struct hx_ctx *ctx, const struct hx_stage *st, int64_t mbs,
                              bool with_comm) {
  struct tp_comm c = {0, 0, 0, 0};
  if (!with_comm)
    return c;
  if (!hx_stage_sequence_parallel(ctx, st)) {
    double ar = tp_allreduce_s(ctx, st, mbs);
    c.layer_fwd = c.layer_bwd = 2 * ar;
    return c;
  }
  double one = sp_collective_s(ctx, st, mbs);
  c.layer_fwd = 4 * one;
  c.layer_bwd = 6 * one;
  c.stage_fwd = c.stage_bwd = one;
  return c;
}

void hx_stage_times(const struct hx_ctx *ctx, const struct hx_stage *st, bool first, bool last,
                    int64_t mbs, bool with_comm, struct hx_stage_times *out) {
  int nl = nlayers(st);
  /* The last stage's forward op runs the final norm, LM head and loss
   * forward and backward in one call (rtlib/rt_exec_ops.c forward(): the
   * head's kernels, CPU and CUDA, compute both in one pass), so the head's
   * backward is the forward's time, not the backward's: priced there, the
   * forward came out 4% short at one sequence a micro-batch and the
   * backward as much long (bench/measured.sh's per-kind rows). */
  if (st->seq_layout) {
    struct hx_seq_stage_cost c = seq_cost(ctx, st, mbs, with_comm);
    out->fwd = nl * c.layer_fwd + (last ? c.head_fwd + c.head_bwd : 0) +
               (first ? c.embed_fwd : 0);
    out->layer_bwd = c.layer_bwd;
    out->head_bwd = 0;
  } else {
    double lf, lb; /* one decoder layer's compute */
    layer_compute(ctx, st, mbs, &lf, &lb);
    double ends = hx_stage_fwd_flops(&ctx->model, 0, 0, first, last, tokens_of(ctx, mbs));
    struct tp_comm comm = tp_comm(ctx, st, mbs, with_comm);
    /* the embedding and the head run whole on every TP rank (no vocab
     * parallelism in hexic's runtime) */
    out->fwd = nl * (lf + comm.layer_fwd) + unsplit_compute_s(ctx, st, ends) + comm.stage_fwd +
               (last ? hx_head_bwd_s(ctx, st, mbs) : 0);
    /* The embedding's backward is a scatter-add: no FLOPs counted, like its
     * forward. The stage's own backward gather is spread over its layers. */
    out->layer_bwd = lb + comm.layer_bwd + (st->recompute ? lf + comm.layer_fwd : 0) +
                     (nl > 0 ? comm.stage_bwd / nl : 0);
    out->head_bwd = nl > 0 ? 0 : comm.stage_bwd; /* the backward's own gather, no layer */
  }
  out->bwd = nl * out->layer_bwd + out->head_bwd;
}

double hx_stage_fwd_s(const struct hx_ctx *ctx, const struct hx_stage *st, bool first, bool last,
                      int64_t mbs) {
  struct hx_stage_times t;
  hx_stage_times(ctx, st, first, last, mbs, true, &t);
  return t.fwd;
}

double hx_stage_bwd_s(const struct hx_ctx *ctx, const struct hx_stage *st, bool first, bool last,
                      int64_t mbs) {
  struct hx_stage_times t;
  hx_stage_times(ctx, st, first, last, mbs, true, &t);
  return t.bwd;
}

double hx_layer_bwd_s(const struct hx_ctx *ctx, const struct hx_stage *st, int64_t mbs) {
  struct hx_stage_times t;
  hx_stage_times(ctx, st, false, false, mbs, true, &t);
  return t.layer_bwd;
}

int64_t hx_in_flight(enum hx_pp_schedule schedule, int stage_index, int nstages,
                     int64_t micro_batches) {
  if (schedule == HX_PP_GPIPE)
    return micro_batches;
  int64_t keep = nstages - stage_index;
  return keep < micro_batches ? keep : micro_batches;
}

/* Parameters one device of the stage holds. TP splits the decoder layers'
 * matrices; hexic's runtime keeps whole on every TP rank what it does not
 * split: each layer's two norm gains, the embedding, the final norm and the
 * LM head (kernels/cpu/llama.h: the head is not TP-split). */
double hx_stage_device_params(const struct hx_model *m, const struct hx_stage *st, bool first,
                              bool last) {
  double layers = st->layer_end - st->layer_begin, gains = 2.0 * (double)m->hidden;
  double split = layers * ((double)m->params_layer - gains);
  double whole = layers * gains + (double)hx_stage_params(m, 0, 0, first, last);
  return split / st->tp + whole;
}

/* The optimizer-state part of hx_stage_static_bytes: whole, or st->opt_share
 * of it (a searching planner's ZeRO-1 estimate). */
static double stage_opt_bytes(const struct hx_ctx *ctx, const struct hx_stage *st, bool first,
                              bool last) {
  double whole = hx_stage_device_params(&ctx->model, st, first, last) *
                 hx_optimizer_state_bytes_per_param(&ctx->train);
  if (ctx->train.optimizer_sharding != HX_SHARD_ZERO1)
    return whole;
  if (st->opt_share > 0 && st->opt_share < 1)
    return whole * st->opt_share;
  /* HexiSeq: the units of a stage are weight replicas; at least they share */
  return whole / hx_stage_replicas(st);
}

double hx_stage_static_bytes(const struct hx_ctx *ctx, const struct hx_stage *st, bool first,
                             bool last) {
  double weight_grad = hx_state_bytes_per_param(&ctx->train) -
                       hx_optimizer_state_bytes_per_param(&ctx->train);
  return hx_stage_device_params(&ctx->model, st, first, last) * weight_grad +
         stage_opt_bytes(ctx, st, first, last);
}

double hx_stage_act_bytes(const struct hx_ctx *ctx, const struct hx_stage *st, bool first,
                          bool last, int64_t mbs, int64_t in_flight) {
  const struct hx_model *m = &ctx->model;
  double tokens = (double)tokens_of(ctx, mbs);
  double layer = layer_act_bytes(ctx, st, mbs); /* per device: already / tp */
  double per_mb;
  if (st->recompute)
    per_mb = tokens * nlayers(st) * layer_recompute_bytes_per_token(ctx, st);
  else
    per_mb = nlayers(st) * layer;
  double bytes = per_mb * (double)in_flight;
  if (st->recompute && nlayers(st) > 0)
    bytes += layer; /* the layer being recomputed */
  if (last)
    bytes += tokens * m->act_bytes_head; /* logits of one micro-batch, whole on every TP rank */
  (void)first;
  return bytes;
}

double hx_stage_memory_capacity(const struct hx_cluster *c, const struct hx_stage *st) {
  double least = INFINITY;
  for (int i = 0; i < st->ndevices; i++) {
    double m = (double)c->gpus[c->devices[st->devices[i]].gpu_type].memory_bytes;
    if (m < least)
      least = m;
  }
  return least;
}

/* Bytes per second the optimizer streams on one device. */
static double optimizer_bandwidth(const struct hx_cluster *c, int rank) {
  const struct hx_gpu_type *g = &c->gpus[c->devices[rank].gpu_type];
  if (g->mem_bandwidth > 0)
    return g->mem_bandwidth;
  return g->tflops * 1e12 / HX_ASSUMED_FLOPS_PER_BYTE;
}

double hx_rank_optimizer_s(const struct hx_ctx *ctx, int rank, double params) {
  return params * hx_optimizer_traffic_per_param(&ctx->train) /
         optimizer_bandwidth(&ctx->cluster, rank);
}

double hx_stage_optimizer_s(const struct hx_ctx *ctx, const struct hx_stage *st, bool first,
                            bool last) {
  double params = hx_stage_device_params(&ctx->model, st, first, last);
  double slowest = 0;
  for (int i = 0; i < st->ndevices; i++)
    slowest = fmax(slowest, hx_rank_optimizer_s(ctx, st->devices[i], params));
  return slowest;
}

/* ---- communication ----------------------------------------------------- */

double hx_p2p_s(const struct hx_cluster *c, int a, int b, double bytes) {
  if (a == b)
    return 0;
  return hx_pair_lat(c, a, b) + bytes / hx_pair_bw(c, a, b);
}

/* steps x max latency + volume / min bandwidth over the group. */
static double ring_s(const struct hx_cluster *c, const int *ranks, int n, double volume,
                     double steps) {
  if (n <= 1)
    return 0;
  double bw, lat;
  hx_group_links(c, ranks, n, &bw, &lat);
  return steps * lat + volume / bw;
}

double hx_allreduce_s(const struct hx_cluster *c, const int *ranks, int n, double bytes) {
  return ring_s(c, ranks, n, 2.0 * (n - 1) / n * bytes, 2.0 * (n - 1));
}

/* The largest share of an uneven split (NULL: even over n). */
static double largest_share(const int32_t *shard_ppm, int n) {
  if (!shard_ppm)
    return 1.0 / n;
  int32_t most = 0;
  for (int i = 0; i < n; i++)
    most = shard_ppm[i] > most ? shard_ppm[i] : most;
  return most / (double)HX_PPM;
}

double hx_reduce_scatter_s(const struct hx_cluster *c, const int *ranks, int n, double bytes,
                           const int32_t *shard_ppm) {
  if (n <= 1)
    return 0;
  return ring_s(c, ranks, n, (n - 1.0) * largest_share(shard_ppm, n) * bytes, n - 1.0);
}

double hx_allgather_s(const struct hx_cluster *c, const int *ranks, int n, double bytes,
                      const int32_t *shard_ppm) {
  return hx_reduce_scatter_s(c, ranks, n, bytes, shard_ppm);
}

double hx_broadcast_s(const struct hx_cluster *c, const int *ranks, int n, double bytes) {
  return ring_s(c, ranks, n, bytes, n - 1.0);
}

double hx_alltoall_s(const struct hx_cluster *c, const int *ranks, int n, double bytes) {
  return ring_s(c, ranks, n, (n - 1.0) / n * bytes, n - 1.0);
}

double hx_hop_bytes(const struct hx_ctx *ctx, int64_t mbs) {
  return (double)tokens_of(ctx, mbs) * (double)ctx->model.hidden * hx_elem_bytes(&ctx->train);
}

static double hop_with_leader(const struct hx_ctx *ctx, int from_leader, const struct hx_stage *to,
                              int to_leader, double bytes) {
  return hx_p2p_s(&ctx->cluster, from_leader, to_leader, bytes) +
         hx_broadcast_s(&ctx->cluster, to->devices, to->ndevices, bytes);
}

double hx_hop_s(const struct hx_ctx *ctx, const struct hx_stage *from, const struct hx_stage *to,
                int64_t mbs) {
  if (from->seq_layout || to->seq_layout)
    return hx_seq_hop_s(ctx, from, to, mbs);
  return hop_with_leader(ctx, from->leader, to, to->leader, hx_hop_bytes(ctx, mbs));
}

int hx_best_leader(const struct hx_ctx *ctx, const struct hx_stage *from, const struct hx_stage *to,
                   int64_t mbs) {
  double bytes = hx_hop_bytes(ctx, mbs), best_s = INFINITY;
  int best = to->devices[0];
  /* the broadcast inside `to` does not depend on the leader: priced once,
   * added as hop_with_leader adds it (the same sums, bit for bit) */
  double bcast = hx_broadcast_s(&ctx->cluster, to->devices, to->ndevices, bytes);
  for (int i = 0; i < to->ndevices; i++) {
    double t = hx_p2p_s(&ctx->cluster, from->leader, to->devices[i], bytes) + bcast;
    if (t < best_s) {
      best_s = t;
      best = to->devices[i];
    }
  }
  return best;
}

/* ---- gradient synchronisation ------------------------------------------ */

/* Gradient bytes of one decoder layer (4 each: Megatron all-reduces the
 * fp32 main_grad). */
static double layer_grad_bytes(const struct hx_ctx *ctx) {
  return 4.0 * (double)ctx->model.params_layer;
}

double hx_nonlayer_grad_bytes(const struct hx_ctx *ctx, unsigned holds) {
  const struct hx_model *m = &ctx->model;
  double params = 0;
  if (holds & HX_HOLDS_EMBEDDING)
    params += (double)m->params_embedding;
  if (holds & HX_HOLDS_HEAD)
    params += (double)(m->params_head + m->params_final_norm);
  return 4.0 * params;
}

/* Adds to per_rank each member's time in the plan's own groups for `layer`;
 * false when the plan has none. GRAD groups carry 1/nslices of the layer's
 * gradient; UNSPLIT groups the norm gains (2 D values per layer). */
static bool grad_sync_from_groups(const struct hx_ctx *ctx, const struct hx_plan *plan, int layer,
                                  double *per_rank) {
  bool any = false;
  for (int g = 0; g < plan->ngroups; g++) {
    const struct hx_group *gr = &plan->groups[g];
    if (!hx_grad_group_covers(gr, layer))
      continue;
    any = true;
    double bytes;
    if (gr->kind == HX_GROUP_UNSPLIT)
      bytes = 4.0 * 2.0 * (double)ctx->model.hidden;
    else if (layer < 0)
      bytes = hx_nonlayer_grad_bytes(ctx, hx_group_holds(plan, gr)) /
              (gr->nslices > 0 ? gr->nslices : 1);
    else
      bytes = layer_grad_bytes(ctx) / (gr->nslices > 0 ? gr->nslices : 1);
    /* ZeRO-1: reduce-scatter of the fp32 gradients, all-gather of the
     * updated weights in the plan's precision, instead of the all-reduce */
    double t = gr->shard_ppm ? hx_reduce_scatter_s(&ctx->cluster, gr->ranks, gr->nranks, bytes,
                                                   gr->shard_ppm) +
                                   hx_allgather_s(&ctx->cluster, gr->ranks, gr->nranks,
                                                  bytes / 4.0 * hx_elem_bytes(&ctx->train),
                                                  gr->shard_ppm)
                             : hx_allreduce_s(&ctx->cluster, gr->ranks, gr->nranks, bytes);
    for (int i = 0; i < gr->nranks; i++)
      per_rank[gr->ranks[i]] += t;
  }
  return any;
}

int64_t hx_grad_slicing(const struct hx_plan *plan, int layer, int *width) {
  int64_t nslices = 1;
  int n = 0;
  for (int i = 0; i < plan->npipelines; i++) {
    const struct hx_stage *st = hx_stage_holding(&plan->pipelines[i], layer);
    if (st) {
      nslices = hx_lcm(nslices, st->tp);
      n += hx_stage_replicas(st);
    }
  }
  *width = n;
  return nslices;
}

void hx_grad_slice_ranks(const struct hx_plan *plan, int layer, int64_t nslices, int64_t k,
                         int *ranks) {
  int n = 0;
  for (int i = 0; i < plan->npipelines; i++) {
    const struct hx_stage *st = hx_stage_holding(&plan->pipelines[i], layer);
    for (int j = 0; st && j < hx_stage_replicas(st); j++)
      ranks[n++] = st->devices[j * st->tp + k * st->tp / nslices];
  }
}

/* The lcm slicing for `bytes` of the weights of `layer`, derived from the
 * stages when the plan carries no gradient groups (symmetric plans). */
static void grad_sync_slices(const struct hx_ctx *ctx, struct hx_arena *scratch,
                             const struct hx_plan *plan, int layer, double bytes,
                             double *per_rank) {
  enum { STACK_MEMBERS = 256 };
  int stack[STACK_MEMBERS], width;
  int64_t nslices = hx_grad_slicing(plan, layer, &width);
  int *members = width <= STACK_MEMBERS ? stack : HX_NEW_ARRAY(scratch, int, width);
  for (int64_t k = 0; k < nslices; k++) {
    hx_grad_slice_ranks(plan, layer, nslices, k, members);
    double t = hx_allreduce_s(&ctx->cluster, members, width, bytes / (double)nslices);
    for (int i = 0; i < width; i++)
      per_rank[members[i]] += t;
  }
}

static void grad_sync_derived(const struct hx_ctx *ctx, struct hx_arena *scratch,
                              const struct hx_plan *plan, int layer, double *per_rank) {
  const struct hx_model *m = &ctx->model;
  if (layer >= 0) {
    grad_sync_slices(ctx, scratch, plan, layer, layer_grad_bytes(ctx), per_rank);
    return;
  }
  grad_sync_slices(ctx, scratch, plan, -1, 4.0 * (double)m->params_embedding, per_rank);
  /* A tied LM head's copy of tok_emb on a later stage is kept in step by
   * Megatron's first-last stage all-reduce, left out here (one extra vocab x
   * hidden reduce per iteration, across pipeline stages, not pipelines). */
  double head = (double)(m->params_final_norm + m->params_head);
  grad_sync_slices(ctx, scratch, plan, HX_LAYER_HEAD, 4.0 * head, per_rank);
}

int hx_stage_replicas(const struct hx_stage *st) {
  return st->seq_layout ? st->seq_layout->nunits : 1;
}

bool hx_plan_has_units(const struct hx_plan *plan) {
  for (int i = 0; i < plan->npipelines; i++)
    for (int s = 0; s < plan->pipelines[i].nstages; s++)
      if (hx_stage_replicas(&plan->pipelines[i].stages[s]) > 1)
        return true;
  return false;
}

bool hx_plan_replicates_weights(const struct hx_plan *plan) {
  return plan->npipelines > 1 || hx_plan_has_units(plan);
}

/* Sequence parallelism: once per step each TP group that holds the layer
 * sums its two norm gains' gradients (2 all-reduces of D fp32,
 * rtlib/rt_exec_sync.c) before the layer's gradient sync; the slowest. */
static double norm_gain_sum_s(const struct hx_ctx *ctx, const struct hx_plan *plan, int layer) {
  double most = 0;
  for (int i = 0; i < plan->npipelines; i++)
    for (int s = 0; s < plan->pipelines[i].nstages; s++) {
      const struct hx_stage *st = &plan->pipelines[i].stages[s];
      if (layer >= st->layer_begin && layer < st->layer_end && hx_stage_sequence_parallel(ctx, st))
        most = fmax(most, 2 * hx_allreduce_s(&ctx->cluster, st->devices, st->tp,
                                             4.0 * (double)ctx->model.hidden));
    }
  return most;
}

double hx_grad_sync_layer_s(const struct hx_ctx *ctx, const struct hx_plan *plan, int layer) {
  double norms = layer >= 0 ? norm_gain_sum_s(ctx, plan, layer) : 0;
  if (!hx_plan_replicates_weights(plan) || plan->ndevices <= 0)
    return norms;
  enum { STACK_RANKS = 1024 };
  double stack[STACK_RANKS] = {0};
  double *per_rank = stack;
  struct hx_arena scratch;
  hx_arena_init(&scratch);
  if (plan->ndevices > STACK_RANKS)
    per_rank = HX_NEW_ARRAY(&scratch, double, plan->ndevices);
  if (!grad_sync_from_groups(ctx, plan, layer, per_rank))
    grad_sync_derived(ctx, &scratch, plan, layer, per_rank);
  double busiest = 0;
  for (int r = 0; r < plan->ndevices; r++)
    if (per_rank[r] > busiest)
      busiest = per_rank[r];
  hx_arena_free(&scratch);
  return busiest + norms;
}

/* ---- whole plans ------------------------------------------------------- */

double hx_model_flops_per_iteration(const struct hx_ctx *ctx) {
  const struct hx_model *m = &ctx->model;
  double per_token = (double)m->layers * m->flops_layer_fwd + m->flops_head_fwd;
  return 3.0 * per_token * (double)ctx->train.global_batch * (double)m->seq_len;
}

double hx_plan_peak_flops(const struct hx_ctx *ctx, const struct hx_plan *plan) {
  double sum = 0;
  for (int i = 0; i < plan->npipelines; i++)
    for (int s = 0; s < plan->pipelines[i].nstages; s++) {
      const struct hx_stage *st = &plan->pipelines[i].stages[s];
      for (int k = 0; k < st->ndevices; k++) {
        const struct hx_cluster *c = &ctx->cluster;
        sum += c->gpus[c->devices[st->devices[k]].gpu_type].tflops * 1e12;
      }
    }
  return sum;
}

/* ---- ZeRO-1: the optimizer state split over gradient-sync groups ------- */

bool hx_plan_sharded(const struct hx_plan *plan) {
  if (plan->optimizer_sharding != HX_SHARD_ZERO1)
    return false;
  if (hx_plan_has_units(plan))
    return true;
  for (int g = 0; g < plan->ngroups; g++)
    if (plan->groups[g].shard_ppm)
      return true;
  return false;
}

double hx_group_params(const struct hx_ctx *ctx, const struct hx_plan *plan,
                       const struct hx_group *g) {
  const struct hx_model *m = &ctx->model;
  double gains = 2.0 * (double)m->hidden, layers = g->layer_end - g->layer_begin;
  double slices = g->nslices > 0 ? g->nslices : 1;
  if (g->kind == HX_GROUP_UNSPLIT)
    return layers * gains;
  if (g->kind != HX_GROUP_GRAD)
    return 0;
  if (g->layer_begin < 0)
    return hx_nonlayer_grad_bytes(ctx, hx_group_holds(plan, g)) / 4.0 / slices;
  return layers * ((double)m->params_layer - gains) / slices;
}

void hx_plan_optimizer_params(const struct hx_ctx *ctx, const struct hx_plan *plan,
                              double *params) {
  for (int r = 0; r < plan->ndevices; r++)
    params[r] = 0;
  for (int i = 0; i < plan->npipelines; i++) {
    const struct hx_pipeline *p = &plan->pipelines[i];
    for (int s = 0; s < p->nstages; s++) {
      const struct hx_stage *st = &p->stages[s];
      double held = hx_stage_device_params(&ctx->model, st, s == 0, s == p->nstages - 1);
      for (int k = 0; k < st->ndevices; k++)
        params[st->devices[k]] = held;
    }
  }
  if (plan->optimizer_sharding != HX_SHARD_ZERO1)
    return;
  if (hx_plan_has_units(plan)) { /* even over every replica (see cost.h) */
    for (int i = 0; i < plan->npipelines; i++)
      for (int s = 0; s < plan->pipelines[i].nstages; s++) {
        const struct hx_stage *st = &plan->pipelines[i].stages[s];
        int width;
        hx_grad_slicing(plan, st->layer_begin, &width);
        for (int k = 0; k < st->ndevices; k++)
          params[st->devices[k]] /= width > 1 ? width : 1;
      }
    return;
  }
  /* each member keeps only its share of a sharded group's elements */
  for (int g = 0; g < plan->ngroups; g++) {
    const struct hx_group *gr = &plan->groups[g];
    if (!gr->shard_ppm)
      continue;
    double elems = hx_group_params(ctx, plan, gr);
    for (int i = 0; i < gr->nranks; i++)
      params[gr->ranks[i]] -= elems * (1.0 - gr->shard_ppm[i] / (double)HX_PPM);
  }
  for (int r = 0; r < plan->ndevices; r++)
    params[r] = fmax(params[r], 0.0);
}

/* 1F1B and GPipe share the bubble term for a pipeline whose stages take
 * f_s + b_s: the slowest stage repeats m - 1 times, every stage (and hop)
 * once on the critical path. bwd[s] and hop[s] (to stage s + 1) are kept for
 * the gradient sync estimate. */
static double pipeline_estimate_s(const struct hx_ctx *ctx, const struct hx_pipeline *p,
                                  double *bwd, double *hop) {
  double slowest = 0, chain = 0;
  for (int s = 0; s < p->nstages; s++) {
    const struct hx_stage *st = &p->stages[s];
    bool last = s == p->nstages - 1;
    struct hx_stage_times times;
    hx_stage_times(ctx, st, s == 0, last, p->micro_batch_size, true, &times);
    double t = times.fwd + times.bwd;
    if (t > slowest)
      slowest = t;
    chain += t;
    bwd[s] = times.bwd;
    hop[s] = last ? 0 : hx_hop_s(ctx, st, &p->stages[s + 1], p->micro_batch_size);
    chain += 2 * hop[s];
  }
  return (double)(p->micro_batches - 1) * slowest + chain;
}

/* The next layer after `layer` where some pipeline starts a new stage. */
static int next_boundary(const struct hx_plan *plan, int layer) {
  int next = INT_MAX;
  for (int i = 0; i < plan->npipelines; i++) {
    const struct hx_stage *st = hx_stage_holding(&plan->pipelines[i], layer);
    if (st && st->layer_end < next)
      next = st->layer_end;
  }
  return next;
}

/* Pipeline i's stage s finishes the last micro-batch's backward at
 * ends[i][s]: that backward runs from the last stage to the first, so stage
 * s ends it at the pipeline's end minus the backward and hops of the stages
 * before it. */
static void backward_ends(const struct hx_pipeline *p, double end, const double *bwd,
                          const double *hop, double *ends) {
  double before = 0;
  for (int s = 0; s < p->nstages; s++) {
    ends[s] = end - before;
    before += bwd[s] + hop[s];
  }
}

/* Whether every pipeline starts a new stage at `layer`. */
static bool aligned_boundary(const struct hx_plan *plan, int layer) {
  for (int i = 0; i < plan->npipelines; i++) {
    const struct hx_stage *st = hx_stage_holding(&plan->pipelines[i], layer);
    if (st && st->layer_begin != layer)
      return false;
  }
  return true;
}

/* When the last layer range's gradient all-reduce ends. The all-reduces run
 * in layer order, last layer first, each when every pipeline's backward has
 * freed the layer (the stage's last backward frees its layers from its last
 * to its first) and its members' channels are free. Consecutive ranges share
 * members unless every pipeline changes stage between them, so staggered
 * stage boundaries chain the whole sync; aligned ones let stages sync in
 * parallel. ranges[k]: one layer's sync in [bounds[k], bounds[k + 1]). */
static double sync_chain_end_s(const struct hx_plan *plan, double *const *ends,
                               double *const *bwds, const int *bounds, const double *ranges,
                               int nranges) {
  double busy = 0, latest = 0;
  for (int k = nranges - 1; k >= 0; k--) {
    if (k + 1 < nranges && aligned_boundary(plan, bounds[k + 1]))
      busy = 0;
    double ready = 0;
    for (int i = 0; i < plan->npipelines; i++) {
      const struct hx_pipeline *p = &plan->pipelines[i];
      for (int s = 0; s < p->nstages; s++) {
        const struct hx_stage *st = &p->stages[s];
        if (st->layer_begin <= bounds[k] && bounds[k] < st->layer_end) {
          int nl = st->layer_end - st->layer_begin;
          double left = (double)(bounds[k] - st->layer_begin) / nl; /* of its backward */
          ready = fmax(ready, ends[i][s] - bwds[i][s] * left);
        }
      }
    }
    busy = fmax(ready, busy) + (bounds[k + 1] - bounds[k]) * ranges[k];
    latest = fmax(latest, busy);
  }
  return latest;
}

double hx_estimate_iteration_s(const struct hx_ctx *ctx, const struct hx_plan *plan) {
  return hx_estimate_iteration_below(ctx, plan, INFINITY);
}

double hx_estimate_iteration_below(const struct hx_ctx *ctx, const struct hx_plan *plan,
                                   double beat) {
  struct hx_arena scratch;
  hx_arena_init(&scratch);
  int layers = (int)ctx->model.layers, n = plan->npipelines;
  double **ends = HX_NEW_ARRAY(&scratch, double *, n), **bwds = HX_NEW_ARRAY(&scratch, double *, n);
  double pipes = 0, opt = 0;
  for (int i = 0; i < n; i++) {
    const struct hx_pipeline *p = &plan->pipelines[i];
    double *hop = HX_NEW_ARRAY(&scratch, double, p->nstages);
    bwds[i] = HX_NEW_ARRAY(&scratch, double, p->nstages);
    ends[i] = HX_NEW_ARRAY(&scratch, double, p->nstages);
    double t = pipeline_estimate_s(ctx, p, bwds[i], hop);
    backward_ends(p, t, bwds[i], hop, ends[i]);
    pipes = fmax(pipes, t);
    for (int s = 0; s < p->nstages; s++)
      opt = fmax(opt, hx_stage_optimizer_s(ctx, &p->stages[s], s == 0, s == p->nstages - 1));
  }
  double end = pipes;
  /* the sync only ever adds (fmax, then a sum of non-negative times): when
   * pipes + opt cannot beat `beat`, the estimate cannot either */
  if (pipes + opt >= beat) {
    hx_arena_free(&scratch);
    return pipes + opt;
  }
  if (hx_plan_replicates_weights(plan)) {
    /* one layer's sync per range of layers where no pipeline changes stage */
    int *bounds = HX_NEW_ARRAY(&scratch, int, layers + 2);
    double *ranges = HX_NEW_ARRAY(&scratch, double, layers + 1);
    int nranges = 0;
    for (int l = 0; l < layers; nranges++) {
      int next = next_boundary(plan, l);
      bounds[nranges] = l;
      ranges[nranges] = hx_grad_sync_layer_s(ctx, plan, l);
      l = next > l && next <= layers ? next : layers;
      bounds[nranges + 1] = l;
    }
    end = fmax(end, sync_chain_end_s(plan, ends, bwds, bounds, ranges, nranges));
    /* the embedding and head weights: after the first stages' backward */
    end += hx_grad_sync_layer_s(ctx, plan, -1);
  }
  hx_arena_free(&scratch);
  return end + opt;
}
