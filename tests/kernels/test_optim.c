/* AdamW, clipping and the lr schedule against values worked out by hand
 * (the arithmetic is in the comments). */
#include "kcheck.h"
#include "kernels/cpu/llama.h"

/* lr 0.1, beta1 0.9, beta2 0.95, eps 1e-8, weight_decay 0.1, w0 = 1.
 * Step 0, g = 0.5: m = 0.05, v = 0.0125, m^ = 0.5, v^ = 0.25,
 *   w = 1 - 0.1 (0.5 / (0.5 + 1e-8) + 0.1 * 1) = 0.890000002 (decayed),
 *   w = 1 - 0.1 (0.99999998) = 0.900000002 (not decayed).
 * Step 1, g = -0.25: m = 0.045 - 0.025 = 0.02, v = 0.011875 + 0.003125 =
 *   0.015, m^ = 0.02 / 0.19, v^ = 0.015 / 0.0975, m^/sqrt(v^) = 0.268370...
 *   decayed:   w = 0.890000002 - 0.1 (0.268370 + 0.089) = 0.85426306;
 *   undecayed: w = 0.900000002 - 0.1 (0.268370) = 0.87316306. */
static void test_adamw(void) {
  struct hxk_adamw hp = {0.9, 0.95, 1e-8, 0.1};
  float w[2] = {1.0f, 1.0f}, m[2] = {0}, v[2] = {0};
  const uint8_t mask[2] = {1, 0};
  float g0[2] = {0.5f, 0.5f}, g1[2] = {-0.25f, -0.25f};
  hxk_adamw_step(w, g0, m, v, mask, 2, &hp, 0, 0.1);
  KC_CHECK(fabs(w[0] - 0.890000002) < 1e-6 && fabs(w[1] - 0.900000002) < 1e-6,
           "step 0: %.9g %.9g", w[0], w[1]);
  hxk_adamw_step(w, g1, m, v, mask, 2, &hp, 1, 0.1);
  KC_CHECK(fabs(w[0] - 0.8542630579) < 1e-6 && fabs(w[1] - 0.8731630579) < 1e-6,
           "step 1: %.9g %.9g", w[0], w[1]);
  KC_CHECK(fabs(m[0] - 0.02) < 1e-8 && fabs(v[0] - 0.015) < 1e-8,
           "moments %.9g %.9g", m[0], v[0]);
  /* NULL mask: decay everywhere. */
  float w2 = 1.0f, m2 = 0.0f, v2 = 0.0f;
  hxk_adamw_step(&w2, g0, &m2, &v2, NULL, 1, &hp, 0, 0.1);
  KC_CHECK(fabs(w2 - 0.890000002) < 1e-6, "NULL mask: %.9g", w2);
}

static void test_clipping(void) {
  float g[4] = {3.0f, 0.0f, -4.0f, 0.0f};
  double sumsq = hxk_sum_squares(g, 4);
  KC_CHECK(sumsq == 25.0, "sum of squares %g", sumsq);
  /* partial sums add up: the caller all-reduces them */
  KC_CHECK(hxk_sum_squares(g, 2) + hxk_sum_squares(g + 2, 2) == sumsq,
           "partials");
  double f = hxk_clip_factor(sumsq, 1.0); /* norm 5 > 1: scale by 1/5 */
  KC_CHECK(fabs(f - 0.2) < 1e-15, "factor %g", f);
  hxk_scale(g, 4, (float)f);
  KC_CHECK(fabs(g[0] - 0.6f) < 1e-7 && fabs(g[2] + 0.8f) < 1e-7, "scaled");
  KC_CHECK(hxk_clip_factor(0.25, 1.0) == 1.0, "norm 0.5 under the clip");
  KC_CHECK(hxk_clip_factor(25.0, 0.0) == 1.0, "clip 0 disables");
  KC_CHECK(hxk_clip_factor(25.0, 5.0) == 1.0, "norm equal to the clip");
}

/* lr 1e-3, lr_min 1e-4, warmup 10, steps 110 (100 cosine steps). */
static void test_schedule(void) {
  struct {
    long step;
    double lr;
  } cases[] = {
      {0, 1e-4},    /* 1e-3 * 1/10 */
      {4, 5e-4},    /* 1e-3 * 5/10 */
      {9, 1e-3},    /* end of warmup */
      {10, 1e-3},   /* p = 0: cos 0 = 1 */
      {60, 5.5e-4}, /* p = 0.5: 1e-4 + 0.5 * 9e-4 */
      {35, 1e-4 + 0.5 * (1 + cos(3.14159265358979323846 * 0.25)) * 9e-4},
      {110, 1e-4},  /* p = 1 */
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    double lr = hxk_lr_at(cases[i].step, 1e-3, 10, 110);
    KC_CHECK(fabs(lr - cases[i].lr) < 1e-15, "step %ld: %.17g", cases[i].step,
             lr);
  }
  /* no warmup, one step: p = 0 / max(1, 1) */
  KC_CHECK(fabs(hxk_lr_at(0, 3e-4, 0, 1) - 3e-4) < 1e-18, "single step");
  /* no warmup: step 0 is the full lr */
  KC_CHECK(fabs(hxk_lr_at(0, 3e-4, 0, 100) - 3e-4) < 1e-18, "step 0");
}

int main(void) {
  test_adamw();
  test_clipping();
  test_schedule();
  return kc_finish("kernels_optim");
}
