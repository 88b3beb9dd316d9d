/* Issue 18: the tensor-parallel cost model and measured profiles.
 *  - the default efficiency curve: 1 at TP 1, the A100 measurement
 *    at TP 4 (6.6 ms measured where the flat model said 4.4 ms), and more
 *    TP never looks free (each doubling less than halves a layer's time,
 *    device-seconds per layer grow);
 *  - a profile's figures at measured micro-batch sizes, between them
 *    (linear), below (in proportion) and above (the last two's line, never
 *    below the largest);
 *  - a stage takes its profile's times and memory instead of the FLOP model;
 *  - the TP model calibrated from a profile table reproduces every entry
 *    for TP 1, 2 and 4 within 5%.
 * The IR is built by hand (tests/fixture.h). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "passes/cost/cost.h"
#include "ir/plan_util.h"

#include "tests/fixture.h"

/* 1 node of 8 GPUs of one type: the tflops and efficiency given. */
static void one_node(struct hx_ctx *ctx, double tflops, double bw, double lat) {
  static const int types[1] = {0};
  double fl[1] = {tflops}, mem[1] = {80};
  fx_cluster(ctx, 1, 8, types, fl, mem, 1, bw, bw, lat);
}

/* A stage of degree tp on ranks 0..tp-1 holding one decoder layer. */
static struct hx_stage layer_stage(struct hx_ctx *ctx, int tp) {
  int ranks[8] = {0, 1, 2, 3, 4, 5, 6, 7};
  struct hx_stage st;
  hx_stage_init(&ctx->arena, &st, ranks, tp, 0, 1, false);
  return st;
}

static double layer_fwd(struct hx_ctx *ctx, int tp, int64_t mbs) {
  struct hx_stage st = layer_stage(ctx, tp);
  return hx_layer_compute_s(ctx, &st, mbs);
}

/* One decoder layer's backward compute (no TP collectives). */
static double layer_bwd(struct hx_ctx *ctx, int tp, int64_t mbs) {
  struct hx_stage st = layer_stage(ctx, tp);
  struct hx_stage_times t;
  hx_stage_times(ctx, &st, false, false, mbs, false, &t);
  return t.layer_bwd;
}

static void set_default_curve(struct hx_gpu_type *g) {
  static const double curve[HX_TP_CURVE_POINTS] = HX_TP_DEFAULT_EFFICIENCY;
  memcpy(g->tp_efficiency, curve, sizeof curve);
  g->ntp_efficiency = HX_TP_CURVE_POINTS;
}

/* Llama-2-7B's layer on A100s (312 TFLOP/s, efficiency 0.5). */
static void a100_7b(struct hx_ctx *ctx) {
  fx_init(ctx);
  fx_model(ctx, "7b", 32, 4096, 11008, 32, 32, 32000, 4096);
  fx_train(ctx, HX_RECOMPUTE_NONE, 64);
  one_node(ctx, 312, 300e9, 2e-6);
  ctx->cluster.gpus[0].efficiency = 0.5;
}

static void test_default_curve(void) {
  struct hx_ctx ctx;
  a100_7b(&ctx);
  struct hx_gpu_type *g = &ctx.cluster.gpus[0];
  /* no curve (IR built by hand): TP scales perfectly, the old model */
  double flat4 = layer_fwd(&ctx, 4, 1);
  NEAR(flat4, layer_fwd(&ctx, 1, 1) / 4);
  set_default_curve(g);
  CHECK(hx_tp_efficiency(g, 1) == 1.0);
  /* the A100 measurement: 6.6 ms measured at TP 4 where the flat
   * model said 4.4 ms, 1.5x */
  NEAR(layer_fwd(&ctx, 4, 1) / flat4, 6.6 / 4.4);
  /* monotone: efficiency never grows; each step up in TP (any degree, not
   * only powers of two) shortens the layer by less than the degree grows,
   * collectives included, so device-seconds per layer grow */
  double prev_e = 2, prev_dev_s = 0;
  for (int tp = 1; tp <= 8; tp++) {
    double e = hx_tp_efficiency(g, tp);
    CHECK(e <= prev_e && e > 0);
    prev_e = e;
    struct hx_stage st = layer_stage(&ctx, tp);
    double t = hx_layer_compute_s(&ctx, &st, 1) + hx_layer_tp_comm_s(&ctx, &st, 1) +
               hx_layer_bwd_s(&ctx, &st, 1);
    CHECK(t * tp > prev_dev_s);
    prev_dev_s = t * tp;
  }
  /* past the curve's last point (16) the last value holds */
  CHECK(hx_tp_efficiency(g, 64) == g->tp_efficiency[HX_TP_CURVE_POINTS - 1]);
  /* a per-layer overhead does not shrink with TP */
  g->layer_overhead = 1e-3;
  NEAR(layer_fwd(&ctx, 4, 1) - 1e-3, flat4 * 1.5);
  NEAR(layer_bwd(&ctx, 4, 1), 2 * (flat4 * 1.5 + 1e-3));
  hx_arena_free(&ctx.arena);
}

/* A profile of npoints points in the test's arena. */
static struct hx_profile *new_profile(struct hx_ctx *ctx, int tp, int n, const int64_t *mbs,
                                      const double *fwd_ms, const double *bwd_ms,
                                      const double *act) {
  struct hx_arena *a = &ctx->arena;
  struct hx_profile *p = HX_NEW(a, struct hx_profile);
  p->tp = tp;
  p->npoints = n;
  p->micro_batch = HX_NEW_ARRAY(a, int64_t, n);
  p->fwd_s = HX_NEW_ARRAY(a, double, n);
  p->bwd_s = HX_NEW_ARRAY(a, double, n);
  p->act_bytes = HX_NEW_ARRAY(a, double, n);
  for (int i = 0; i < n; i++) {
    p->micro_batch[i] = mbs[i];
    p->fwd_s[i] = fwd_ms[i] * 1e-3;
    p->bwd_s[i] = bwd_ms[i] * 1e-3;
    p->act_bytes[i] = act ? act[i] : 0;
  }
  return p;
}

static void test_profile_interpolation(void) {
  struct hx_ctx ctx;
  fx_init(&ctx);
  int64_t mbs[3] = {2, 4, 8};
  double fwd[3] = {2, 3, 7}, bwd[3] = {4, 6, 14}, act[3] = {10, 20, 40};
  struct hx_profile *p = new_profile(&ctx, 1, 3, mbs, fwd, bwd, act);
  double f, b, m;
  hx_profile_at(p, 4, &f, &b, &m); /* measured */
  NEAR(f, 3e-3);
  NEAR(b, 6e-3);
  NEAR(m, 20);
  hx_profile_at(p, 6, &f, &b, &m); /* between 4 and 8: linear */
  NEAR(f, 5e-3);
  NEAR(b, 10e-3);
  NEAR(m, 30);
  hx_profile_at(p, 1, &f, &b, &m); /* below 2: in proportion from 2 */
  NEAR(f, 1e-3);
  NEAR(m, 5);
  hx_profile_at(p, 16, &f, &b, &m); /* above 8: the line through 4 and 8 */
  NEAR(f, 15e-3);
  NEAR(b, 30e-3);
  NEAR(m, 80);
  /* a line that falls above the largest size never goes below it */
  double down[3] = {2, 8, 7};
  p = new_profile(&ctx, 1, 3, mbs, down, down, NULL);
  hx_profile_at(p, 64, &f, &b, &m);
  NEAR(f, 7e-3);
  CHECK(m == 0);
  /* one size measured: in proportion on both sides */
  p = new_profile(&ctx, 1, 1, mbs + 1, fwd + 1, bwd + 1, act + 1);
  hx_profile_at(p, 12, &f, &b, &m);
  NEAR(f, 9e-3);
  NEAR(m, 60);
  hx_arena_free(&ctx.arena);
}

/* Installs profiles as sema does: the type's list, sorted by degree. */
static void install_profiles(struct hx_ctx *ctx, struct hx_profile **ps, int n) {
  struct hx_cluster *c = &ctx->cluster;
  c->profiles = HX_NEW_ARRAY(&ctx->arena, struct hx_profile, n);
  for (int i = 0; i < n; i++)
    c->profiles[i] = *ps[i];
  c->nprofiles = n;
  c->gpus[0].profile_first = 0;
  c->gpus[0].nprofiles = n;
}

/* A stage whose GPU type has a profile at its degree takes the profile's
 * times and memory; another degree keeps the FLOP model. */
static void test_stage_uses_profile(void) {
  struct hx_ctx ctx;
  a100_7b(&ctx);
  int64_t mbs[2] = {1, 2};
  double fwd[2] = {5, 9}, bwd[2] = {11, 19}, act[2] = {1e9, 2e9};
  struct hx_profile *p = new_profile(&ctx, 2, 2, mbs, fwd, bwd, act);
  double flat1 = layer_fwd(&ctx, 1, 1);
  install_profiles(&ctx, &p, 1);
  NEAR(layer_fwd(&ctx, 2, 2), 9e-3);
  NEAR(layer_bwd(&ctx, 2, 2), 19e-3);
  NEAR(layer_fwd(&ctx, 1, 1), flat1); /* no tp 1 profile: the FLOP model */
  struct hx_stage st = layer_stage(&ctx, 2);
  st.layer_end = 3;
  NEAR(hx_stage_act_bytes(&ctx, &st, false, false, 2, 4), 3 * 2e9 * 4);
  st.recompute = true; /* inputs of each layer kept, one layer's full activations */
  NEAR(hx_stage_act_bytes(&ctx, &st, false, false, 2, 4),
       8192.0 * 3 * ctx.model.act_bytes_layer_recompute * 4 / 2 + 2e9);
  hx_arena_free(&ctx.arena);
}

/* A profile table shaped like a measured one (Llama-2-7B layer, A100-class
 * rates, TP 1/2/4 at micro-batches 1/2/4): neither linear in the
 * micro-batch nor exactly 2x between backward and forward. The TP model
 * calibrated from it must give every entry within 5%. */
static void test_calibration(void) {
  struct hx_ctx ctx;
  a100_7b(&ctx);
  static const int64_t mbs[3] = {1, 2, 4};
  static const double fwd[3][3] = {{11.9, 23.3, 46.2}, {7.1, 13.6, 26.9}, {4.6, 8.5, 16.4}};
  static const double bwd[3][3] = {{23.5, 46.9, 92.0}, {14.0, 27.5, 53.5}, {9.3, 17.2, 32.5}};
  struct hx_profile *ps[3];
  for (int k = 0; k < 3; k++)
    ps[k] = new_profile(&ctx, 1 << k, 3, mbs, fwd[k], bwd[k], NULL);
  struct hx_profile table[3] = {*ps[0], *ps[1], *ps[2]};
  struct hx_tp_fit fit;
  CHECK(hx_tp_calibrate(&ctx.model, table, 3, &fit));
  CHECK(fit.npoints == 3 && fit.efficiency[0] == 1);
  CHECK(fit.efficiency[1] <= 1 && fit.efficiency[2] <= fit.efficiency[1]);
  CHECK(fit.overhead >= 0);
  /* the fitted model as a gpu block would carry it, no profile */
  struct hx_gpu_type *g = &ctx.cluster.gpus[0];
  g->tflops = fit.rate / 1e12;
  g->efficiency = 1;
  memcpy(g->tp_efficiency, fit.efficiency, sizeof fit.efficiency);
  g->ntp_efficiency = fit.npoints;
  g->layer_overhead = fit.overhead;
  for (int k = 0; k < 3; k++)
    for (int i = 0; i < 3; i++) {
      double f = layer_fwd(&ctx, 1 << k, mbs[i]), b = layer_bwd(&ctx, 1 << k, mbs[i]);
      check_near(__FILE__, __LINE__, "calibrated forward", f, fwd[k][i] * 1e-3, 0.05);
      check_near(__FILE__, __LINE__, "calibrated backward", b, bwd[k][i] * 1e-3, 0.05);
    }
  /* no TP 1 profile: nothing to calibrate from */
  CHECK(!hx_tp_calibrate(&ctx.model, table + 1, 2, &fit));
  hx_arena_free(&ctx.arena);
}

/* hexic's runtime runs the embedding, final norm and LM head whole on
 * every TP rank and keeps them, and each layer's norm gains, whole: the
 * head's compute is not divided by the degree, no embedding all-reduce is
 * charged, and their weights, optimizer state and logits are not split. */
static void test_unsplit_ends(void) {
  struct hx_ctx ctx;
  a100_7b(&ctx);
  const struct hx_model *m = &ctx.model;
  struct hx_stage one = layer_stage(&ctx, 1), four = layer_stage(&ctx, 4);
  one.layer_end = four.layer_end = 0; /* the ends alone */
  NEAR(hx_head_bwd_s(&ctx, &four, 2), hx_head_bwd_s(&ctx, &one, 2));
  NEAR(hx_stage_fwd_s(&ctx, &four, true, true, 2), hx_stage_fwd_s(&ctx, &one, true, true, 2));
  NEAR(hx_stage_static_bytes(&ctx, &four, true, true),
       hx_stage_static_bytes(&ctx, &one, true, true));
  NEAR(hx_stage_optimizer_s(&ctx, &four, true, true), hx_stage_optimizer_s(&ctx, &one, true, true));
  NEAR(hx_stage_act_bytes(&ctx, &four, false, true, 1, 1), 4096.0 * m->act_bytes_head);
  /* a layer: its matrices / 4, its norm gains whole */
  one.layer_end = four.layer_end = 1;
  double gains = 2.0 * 4096;
  NEAR(hx_stage_static_bytes(&ctx, &four, false, false),
       ((double)(m->params_layer - 8192) / 4 + gains) * 18);
  hx_arena_free(&ctx.arena);
}

int main(void) {
  test_unsplit_ends();
  test_default_curve();
  test_profile_interpolation();
  test_stage_uses_profile();
  test_calibration();
  if (failures) {
    fprintf(stderr, "%d checks failed\n", failures);
    return 1;
  }
  printf("cost tp: all checks passed\n");
  return 0;
}
