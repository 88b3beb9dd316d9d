/* Forward values against direct double-precision transcriptions of
 * docs/model-spec.md (the gradient checks only prove each backward matches
 * its forward; this proves the forwards compute the spec). Tolerance: 1e-5
 * relative to max(1, |ref|), float against double. */
#include "kcheck.h"
#include "kernels/cpu/llama.h"

static struct hxk_dims dims = {.dim = 24, .ffn = 8, .heads = 6, .kv_heads = 2,
                               .vocab = 8, .seq_len = 9, .layers = 1,
                               .norm_eps = 1e-5f, .rope_theta = 50.0};
enum { NSEQ = 2, HD = 4 };
#define NTOK (NSEQ * 9)

/* RoPE: (x0, x1) -> (x0 c - x1 s, x0 s + x1 c), phi = t theta^(-2i/hd). */
static void test_rope(void) {
  int H = dims.heads;
  float *tab = kc_alloc(hxk_rope_table_floats(&dims));
  float *x = kc_alloc(NTOK * H * HD), *y = kc_alloc(NTOK * H * HD);
  float *ref = kc_alloc(NTOK * H * HD);
  hxk_rope_table(tab, &dims);
  kc_fill(x, NTOK * H * HD, 1.0f);
  memcpy(y, x, sizeof(float) * NTOK * H * HD);
  hxk_rope_forward(y, tab, NTOK, H, HD, dims.seq_len);
  for (int tok = 0; tok < NTOK; tok++)
    for (int h = 0; h < H; h++)
      for (int i = 0; i < HD / 2; i++) {
        double phi = (tok % dims.seq_len) * pow(dims.rope_theta, -2.0 * i / HD);
        long at = ((long)tok * H + h) * HD + 2 * i;
        ref[at] = (float)(x[at] * cos(phi) - x[at + 1] * sin(phi));
        ref[at + 1] = (float)(x[at] * sin(phi) + x[at + 1] * cos(phi));
      }
  double err = kc_max_err(y, ref, NTOK * H * HD);
  KC_CHECK(err < 1e-5, "rope off by %g", err);
  free(tab), free(x), free(y), free(ref);
}

/* Llama 3's RoPE scaling (transformers' _compute_llama3_parameters), in
 * terms of the ratio original / wavelength: above high_freq_factor a pair
 * keeps its frequency, below low_freq_factor it is divided by factor, and
 * between, the two are mixed linearly in the ratio. hd 32 over 300
 * positions with an original length of 256 puts pairs in all three bands. */
static void test_rope_llama3(void) {
  struct hxk_dims d = {.dim = 32, .ffn = 8, .heads = 1, .kv_heads = 1, .vocab = 8,
                       .seq_len = 300, .layers = 1, .norm_eps = 1e-5f, .rope_theta = 10000.0,
                       .rope_factor = 8, .rope_low_freq_factor = 1,
                       .rope_high_freq_factor = 4, .rope_original_max_len = 256};
  KC_CHECK(hxk_dims_check(&d), "llama3 dims");
  int half = d.head_dim / 2, bands[3] = {0, 0, 0};
  float *tab = kc_alloc(hxk_rope_table_floats(&d));
  hxk_rope_table(tab, &d);
  double worst = 0;
  for (int i = 0; i < half; i++) {
    double freq = 1.0 / pow(10000.0, (2.0 * i) / 32.0);
    double ratio = 256.0 / (2.0 * 3.14159265358979323846 / freq), scale;
    if (ratio > 4.0)
      scale = 1.0, bands[0]++;
    else if (ratio < 1.0)
      scale = 1.0 / 8.0, bands[2]++;
    else
      scale = (1.0 - (ratio - 1.0) / 3.0) / 8.0 + (ratio - 1.0) / 3.0, bands[1]++;
    for (int t = 0; t < d.seq_len; t++) {
      double phi = t * freq * scale;
      double dc = fabs(tab[((long)t * half + i) * 2] - cos(phi));
      double ds = fabs(tab[((long)t * half + i) * 2 + 1] - sin(phi));
      worst = fmax(worst, fmax(dc, ds));
    }
  }
  KC_CHECK(bands[0] && bands[1] && bands[2], "bands %d %d %d: not all three", bands[0], bands[1],
           bands[2]);
  KC_CHECK(worst < 1e-6, "llama3 rope table off by %g", worst);
  /* a bad scaling is no valid shape */
  d.rope_high_freq_factor = 1;
  KC_CHECK(!hxk_dims_check(&d), "high_freq_factor <= low_freq_factor accepted");
  free(tab);
}

/* Causal GQA attention: query head h reads kv head h / (H/K). */
static void test_attention(void) {
  int H = dims.heads, K = dims.kv_heads, T = dims.seq_len;
  struct hxk_shard s;
  int kv_of[6];
  KC_CHECK(hxk_shard_make(&dims, 0, H, 0, dims.ffn, &s), "shard");
  hxk_kv_map(kv_of, &dims, &s);
  float *q = kc_alloc(NTOK * H * HD), *k = kc_alloc(NTOK * K * HD);
  float *v = kc_alloc(NTOK * K * HD), *o = kc_alloc(NTOK * H * HD);
  float *ref = kc_alloc(NTOK * H * HD), *lse = kc_alloc(NTOK * H);
  float *scratch = kc_alloc(hxk_attention_scratch_floats(T));
  kc_fill(q, NTOK * H * HD, 2.0f);
  kc_fill(k, NTOK * K * HD, 2.0f);
  kc_fill(v, NTOK * K * HD, 1.0f);
  hxk_attention_forward(o, lse, q, k, v, kv_of, NSEQ, T, H, K, HD, scratch);
  for (int sq = 0; sq < NSEQ; sq++)
    for (int h = 0; h < H; h++) {
      int kvh = h / (H / K);
      for (int t = 0; t < T; t++) {
        double score[9], peak = -1e300, sum = 0.0;
        const float *qt = q + ((long)(sq * T + t) * H + h) * HD;
        for (int u = 0; u <= t; u++) {
          const float *ku = k + ((long)(sq * T + u) * K + kvh) * HD;
          double dot = 0.0;
          for (int c = 0; c < HD; c++)
            dot += (double)qt[c] * ku[c];
          score[u] = dot / sqrt((double)HD);
          peak = fmax(peak, score[u]);
        }
        for (int u = 0; u <= t; u++)
          sum += exp(score[u] - peak);
        for (int c = 0; c < HD; c++) {
          double acc = 0.0;
          for (int u = 0; u <= t; u++)
            acc += exp(score[u] - peak) / sum *
                   v[((long)(sq * T + u) * K + kvh) * HD + c];
          ref[((long)(sq * T + t) * H + h) * HD + c] = (float)acc;
        }
      }
    }
  double err = kc_max_err(o, ref, NTOK * H * HD);
  KC_CHECK(err < 1e-5, "attention off by %g", err);
  free(q), free(k), free(v), free(o), free(ref), free(lse), free(scratch);
}

/* rmsnorm g_i x_i / sqrt(mean x^2 + eps) and silu(g) u = g u / (1 + e^-g). */
static void test_rmsnorm_swiglu(void) {
  enum { N = 5, D = 24 };
  float x[N * D], g[D], y[N * D], ref[N * D], rstd[N];
  kc_fill(x, N * D, 3.0f);
  kc_fill(g, D, 2.0f);
  hxk_rmsnorm_forward(y, rstd, x, g, N, D, 1e-5f);
  for (int t = 0; t < N; t++) {
    double ms = 0.0;
    for (int i = 0; i < D; i++)
      ms += (double)x[t * D + i] * x[t * D + i] / D;
    for (int i = 0; i < D; i++)
      ref[t * D + i] = (float)(g[i] * x[t * D + i] / sqrt(ms + 1e-5));
  }
  KC_CHECK(kc_max_err(y, ref, N * D) < 1e-5, "rmsnorm");
  float gate[N * D], up[N * D];
  kc_fill(gate, N * D, 6.0f);
  kc_fill(up, N * D, 1.0f);
  hxk_swiglu_forward(y, gate, up, N * D);
  for (int i = 0; i < N * D; i++)
    ref[i] = (float)(gate[i] * (double)up[i] / (1.0 + exp(-(double)gate[i])));
  KC_CHECK(kc_max_err(y, ref, N * D) < 1e-5, "swiglu");
}

int main(void) {
  KC_CHECK(hxk_dims_check(&dims) && dims.head_dim == HD, "dims");
  test_rope();
  test_rope_llama3();
  test_attention();
  test_rmsnorm_swiglu();
  return kc_finish("kernels_forward");
}
