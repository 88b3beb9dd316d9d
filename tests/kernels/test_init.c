/* Parameter init and layout: ids and std of the spec, one element against a
 * value computed outside C (Python, from the spec's formulas), every TP shard
 * equal bit for bit to the slice of the full tensor, sane statistics, norm
 * gains all ones, the flat layout and the decay mask. */
#include "kcheck.h"
#include "kernels/cpu/llama.h"

static struct hxk_dims dims = {.dim = 16, .ffn = 40, .heads = 4,
                               .kv_heads = 2, .vocab = 50, .seq_len = 8,
                               .layers = 3, .norm_eps = 1e-5f,
                               .rope_theta = 1e4};

static void test_ids_and_std(void) {
  KC_CHECK(hxk_splitmix64(0) == 0xE220A8397B1DCDAFull, "splitmix64(0)");
  KC_CHECK(hxk_param_id(HXK_TOK_EMB, 5) == 0, "tok_emb id");
  KC_CHECK(hxk_param_id(HXK_FINAL_NORM, 5) == 1, "final_norm id");
  KC_CHECK(hxk_param_id(HXK_LM_HEAD, 5) == 2, "lm_head id");
  KC_CHECK(hxk_param_id(HXK_ATTN_NORM, 0) == 16, "attn_norm id");
  KC_CHECK(hxk_param_id(HXK_W_DOWN, 3) == 16 + 48 + 8, "w_down id");
  KC_CHECK(hxk_param_std(HXK_WQ, 3) == 0.02, "wq std");
  KC_CHECK(fabs(hxk_param_std(HXK_WO, 3) - 0.02 / sqrt(6.0)) < 1e-15,
           "wo std");
  KC_CHECK(hxk_param_std(HXK_MLP_NORM, 3) == 0.0, "norm std");
  KC_CHECK(hxk_param_decays(HXK_TOK_EMB) && hxk_param_decays(HXK_W_UP) &&
               !hxk_param_decays(HXK_FINAL_NORM) &&
               !hxk_param_decays(HXK_ATTN_NORM),
           "decay flags");
}

/* wq of layer 1 (id 33), seed 42, element (5, 3) of [64, 16]: Python gives
 * 0.02 * sqrt(-2 ln u(166)) * cos(2 pi u(167)) = -0.011191160176972383. */
static void test_known_element(void) {
  struct hxk_shard full;
  KC_CHECK(hxk_shard_make(&dims, 0, 4, 0, 40, &full), "shard");
  float *wq = kc_alloc(64 * 16);
  hxk_init_param(wq, &dims, &full, 42, HXK_WQ, 1);
  KC_CHECK(fabs(wq[5 * 16 + 3] - -0.011191160176972383) < 1e-9,
           "wq[5,3] = %.9g", wq[5 * 16 + 3]);
  free(wq);
}

/* Every tensor of every shard of a split equals the full tensor's slice. */
static void check_split(const int *q_bounds, const int *f_bounds, int degree) {
  struct hxk_shard full;
  KC_CHECK(hxk_shard_make(&dims, 0, dims.heads, 0, dims.ffn, &full), "full");
  for (int j = 0; j < HXK_LAYER_NPARAMS; j++) {
    enum hxk_param p = (enum hxk_param)j;
    long rows, cols;
    hxk_param_shape(&dims, p, &rows, &cols);
    float *whole = kc_alloc(rows * cols);
    hxk_init_param(whole, &dims, &full, 7, p, 2);
    for (int r = 0; r < degree; r++) {
      struct hxk_shard s;
      KC_CHECK(hxk_shard_make(&dims, q_bounds[r], q_bounds[r + 1], f_bounds[r],
                              f_bounds[r + 1], &s),
               "shard");
      long r0, r1, c0, c1;
      hxk_param_slice(&dims, &s, p, &r0, &r1, &c0, &c1);
      float *part = kc_alloc((r1 - r0) * (c1 - c0));
      hxk_init_param(part, &dims, &s, 7, p, 2);
      for (long i = r0; i < r1; i++)
        KC_CHECK(memcmp(part + (i - r0) * (c1 - c0), whole + i * cols + c0,
                        (size_t)(c1 - c0) * sizeof *part) == 0,
                 "param %d shard %d row %ld differs", j, r, i);
      free(part);
    }
    free(whole);
  }
}

static void test_shards(void) {
  const int q2[] = {0, 1, 4}, f2[] = {0, 13, 40};
  const int q3[] = {0, 1, 3, 4}, f3[] = {0, 5, 29, 40};
  check_split(q2, f2, 2);
  check_split(q3, f3, 3);
  /* an arbitrary rectangle of tok_emb */
  float *whole = kc_alloc(50 * 16), part[7 * 5];
  hxk_init_tensor(whole, 9, 0, 16, 0, 50, 0, 16, 0.02);
  hxk_init_tensor(part, 9, 0, 16, 40, 47, 3, 8, 0.02);
  for (int r = 0; r < 7; r++)
    KC_CHECK(memcmp(part + r * 5, whole + (40 + r) * 16 + 3,
                    5 * sizeof *part) == 0,
             "tok_emb rectangle row %d", r);
  free(whole);
}

/* 2^16 draws: mean within 4 standard errors of 0, std within 2% of 0.02
 * (fixed seed, so this cannot flake); different seeds and ids differ. */
static void test_statistics(void) {
  long n = 256 * 256;
  float *a = kc_alloc(n), *b = kc_alloc(n), *c = kc_alloc(n);
  hxk_init_tensor(a, 1, 0, 256, 0, 256, 0, 256, 0.02);
  hxk_init_tensor(b, 2, 0, 256, 0, 256, 0, 256, 0.02);
  hxk_init_tensor(c, 1, 17, 256, 0, 256, 0, 256, 0.02);
  double sum = 0.0, sumsq = 0.0;
  for (long i = 0; i < n; i++)
    sum += a[i], sumsq += (double)a[i] * a[i];
  double mean = sum / n, std = sqrt(sumsq / n - mean * mean);
  KC_CHECK(fabs(mean) < 4 * 0.02 / sqrt((double)n), "mean %g", mean);
  KC_CHECK(fabs(std / 0.02 - 1.0) < 0.02, "std %g", std);
  KC_CHECK(memcmp(a, b, (size_t)n * sizeof *a) != 0, "seed ignored");
  KC_CHECK(memcmp(a, c, (size_t)n * sizeof *a) != 0, "tensor id ignored");
  free(a), free(b), free(c);
}

static void test_layout(void) {
  struct hxk_shard s;
  KC_CHECK(hxk_shard_make(&dims, 1, 3, 5, 29, &s), "shard");
  KC_CHECK(s.kv_begin == 0 && s.kv_end == 2, "kv range %d..%d", s.kv_begin,
           s.kv_end);
  KC_CHECK(!hxk_shard_make(&dims, 2, 2, 0, 4, &s), "empty head range");
  KC_CHECK(!hxk_shard_make(&dims, 0, 5, 0, 4, &s), "heads out of range");
  KC_CHECK(hxk_shard_make(&dims, 1, 3, 5, 29, &s), "shard");
  long D = 16, hd = 4, nq = 2, nkv = 2, nf = 24;
  long expect = D + nq * hd * D + 2 * nkv * hd * D + D * nq * hd + D +
                2 * nf * D + D * nf;
  KC_CHECK(hxk_layer_floats(&dims, &s) == expect, "layer floats %ld",
           hxk_layer_floats(&dims, &s));
  float *buf = kc_alloc(expect);
  uint8_t *mask = calloc((size_t)expect, 1);
  struct hxk_layer_params p;
  hxk_layer_bind(&p, buf, &dims, &s);
  KC_CHECK(p.attn_norm == buf && p.wq == buf + D &&
               p.mlp_norm == p.wo + D * nq * hd &&
               p.w_down + D * nf == buf + expect,
           "bind layout");
  hxk_layer_decay_mask(mask, &dims, &s);
  long kept = 0;
  for (long i = 0; i < expect; i++)
    kept += mask[i] == 0;
  KC_CHECK(kept == 2 * D && mask[0] == 0 && mask[D] == 1 &&
               mask[p.mlp_norm - buf] == 0,
           "decay mask");
  float ones[16];
  hxk_init_param(ones, &dims, &s, 3, HXK_MLP_NORM, 0);
  for (int i = 0; i < 16; i++)
    KC_CHECK(ones[i] == 1.0f, "norm gain %d = %g", i, ones[i]);
  struct hxk_dims bad = dims;
  bad.heads = 5;
  KC_CHECK(!hxk_dims_check(&bad), "dim 16 with 5 heads accepted");
  free(buf), free(mask);
}

int main(void) {
  KC_CHECK(hxk_dims_check(&dims), "dims");
  test_ids_and_std();
  test_known_element();
  test_shards();
  test_statistics();
  test_layout();
  return kc_finish("kernels_init");
}
