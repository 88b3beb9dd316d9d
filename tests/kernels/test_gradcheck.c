/* Finite-difference gradient check of every backward in kernels/cpu/llama.h.
 *
 * Each case defines a scalar loss L(inputs) = sum_i r_i out_i (r fixed random;
 * for cross-entropy and the head, the returned loss itself), accumulated in
 * double. The analytic gradient is the kernel's backward with dout = r; the
 * numerical one is the central difference (L(p+h) - L(p-h)) / 2h at up to
 * KC_SAMPLES evenly spaced elements of every input. A sample passes when
 *   |num - ana| <= rel_tol * max(|num|, |ana|) + abs_tol,
 * rel_tol 2e-3 and abs_tol 2e-4 * (largest |ana| of that input, at least
 * 1e-2): float forwards make the difference noisy at about 1e-5 of |L| / h.
 * A negative control checks that a 1% error in a gradient is caught. */
#include "kcheck.h"
#include "kernels/cpu/llama.h"

#define KC_SAMPLES 48
#define FD_STEP 1e-2f
#define REL_TOL 2e-3

typedef double (*loss_fn)(void);

static double dot_double(const float *a, const float *b, long n) {
  double s = 0.0;
  for (long i = 0; i < n; i++)
    s += (double)a[i] * b[i];
  return s;
}

/* Returns the number of failing samples (does not count them as failures:
 * the caller decides, which lets the negative control expect failures). */
static int fd_mismatches(const char *what, float *param, long n,
                         const float *analytic, loss_fn loss, bool report) {
  double scale = 0.0;
  for (long i = 0; i < n; i++)
    scale = fabs(analytic[i]) > scale ? fabs(analytic[i]) : scale;
  double abs_tol = 2e-4 * (scale > 1e-2 ? scale : 1e-2);
  long stride = n > KC_SAMPLES ? n / KC_SAMPLES : 1;
  int bad = 0;
  double worst = 0.0;
  for (long i = 0; i < n; i += stride) {
    float saved = param[i];
    param[i] = saved + FD_STEP;
    double up = loss();
    param[i] = saved - FD_STEP;
    double down = loss();
    param[i] = saved;
    /* the step actually taken, after float rounding of saved +- h */
    double num = (up - down) / ((double)(saved + FD_STEP) - (saved - FD_STEP));
    double ana = analytic[i];
    double err = fabs(num - ana);
    double allowed = REL_TOL * fmax(fabs(num), fabs(ana)) + abs_tol;
    worst = fmax(worst, err / allowed);
    if (err > allowed) {
      bad++;
      if (report)
        fprintf(stderr, "  %s[%ld]: numerical %.6g analytic %.6g\n", what, i,
                num, ana);
    }
  }
  if (report)
    printf("  %-22s n=%-5ld worst err/allowed %.3f\n", what, n, worst);
  return bad;
}

static void check_grad(const char *what, float *param, long n,
                       const float *analytic, loss_fn loss) {
  int bad = fd_mismatches(what, param, n, analytic, loss, true);
  KC_CHECK(bad == 0, "%s: %d sample(s) off", what, bad);
}

/* ---- embedding ---------------------------------------------------------- */
enum { E_V = 7, E_D = 5, E_N = 9 };
static float e_emb[E_V * E_D], e_out[E_N * E_D], e_r[E_N * E_D];
static const int32_t e_tok[E_N] = {3, 0, 6, 3, 1, 3, 5, 0, 2};
static double e_loss(void) {
  hxk_embedding_forward(e_out, e_tok, e_emb, E_N, E_D);
  return dot_double(e_out, e_r, E_N * E_D);
}
static void test_embedding(void) {
  float demb[E_V * E_D] = {0};
  kc_fill(e_emb, E_V * E_D, 1.0f);
  kc_fill(e_r, E_N * E_D, 1.0f);
  hxk_embedding_backward(demb, e_tok, e_r, E_N, E_D);
  check_grad("embedding.emb", e_emb, E_V * E_D, demb, e_loss);
}

/* ---- rmsnorm ------------------------------------------------------------ */
enum { R_N = 4, R_D = 8 };
static float r_x[R_N * R_D], r_g[R_D], r_out[R_N * R_D], r_rstd[R_N],
    r_r[R_N * R_D];
static double r_loss(void) {
  hxk_rmsnorm_forward(r_out, r_rstd, r_x, r_g, R_N, R_D, 1e-5f);
  return dot_double(r_out, r_r, R_N * R_D);
}
static void test_rmsnorm(void) {
  float dx[R_N * R_D] = {0}, dg[R_D] = {0};
  kc_fill(r_x, R_N * R_D, 1.0f);
  for (int i = 0; i < R_D; i++)
    r_g[i] = 1.0f + kc_uniform(0.5f);
  kc_fill(r_r, R_N * R_D, 1.0f);
  r_loss();
  hxk_rmsnorm_backward(dx, dg, r_r, r_x, r_g, r_rstd, R_N, R_D);
  check_grad("rmsnorm.x", r_x, R_N * R_D, dx, r_loss);
  check_grad("rmsnorm.g", r_g, R_D, dg, r_loss);
}

/* ---- rope --------------------------------------------------------------- */
enum { P_SEQ = 2, P_T = 6, P_H = 3, P_HD = 8, P_N = P_SEQ * P_T };
static float p_x[P_N * P_H * P_HD], p_out[P_N * P_H * P_HD],
    p_r[P_N * P_H * P_HD], p_tab[P_T * P_HD];
static double p_loss(void) {
  memcpy(p_out, p_x, sizeof p_x);
  hxk_rope_forward(p_out, p_tab, P_N, P_H, P_HD, P_T);
  return dot_double(p_out, p_r, P_N * P_H * P_HD);
}
static void test_rope(void) {
  struct hxk_dims d = {.dim = P_H * P_HD, .ffn = 4, .heads = P_H,
                       .kv_heads = 1, .vocab = 4, .seq_len = P_T, .layers = 1,
                       .norm_eps = 1e-5f, .rope_theta = 100.0};
  KC_CHECK(hxk_dims_check(&d), "rope dims");
  hxk_rope_table(p_tab, &d);
  static float dx[P_N * P_H * P_HD], inplace[P_N * P_H * P_HD];
  kc_fill(p_x, P_N * P_H * P_HD, 1.0f);
  kc_fill(p_r, P_N * P_H * P_HD, 1.0f);
  hxk_rope_backward(dx, p_r, p_tab, P_N, P_H, P_HD, P_T);
  check_grad("rope.x", p_x, P_N * P_H * P_HD, dx, p_loss);
  memcpy(inplace, p_r, sizeof inplace);
  hxk_rope_backward_inplace(inplace, p_tab, P_N, P_H, P_HD, P_T);
  KC_CHECK(kc_max_err(inplace, dx, P_N * P_H * P_HD) < 1e-6,
           "in-place rope backward differs");
}

/* ---- attention ---------------------------------------------------------- */
enum { A_SEQ = 2, A_T = 5, A_NQ = 4, A_NKV = 2, A_HD = 4, A_N = A_SEQ * A_T };
static float a_q[A_N * A_NQ * A_HD], a_k[A_N * A_NKV * A_HD],
    a_v[A_N * A_NKV * A_HD], a_o[A_N * A_NQ * A_HD], a_lse[A_N * A_NQ],
    a_r[A_N * A_NQ * A_HD], a_scratch[2 * A_T * A_T];
static const int a_kv_of[A_NQ] = {0, 0, 1, 1};
static double a_loss(void) {
  hxk_attention_forward(a_o, a_lse, a_q, a_k, a_v, a_kv_of, A_SEQ, A_T, A_NQ,
                        A_NKV, A_HD, a_scratch);
  return dot_double(a_o, a_r, A_N * A_NQ * A_HD);
}
static void test_attention(void) {
  static float dq[A_N * A_NQ * A_HD], dk[A_N * A_NKV * A_HD],
      dv[A_N * A_NKV * A_HD];
  kc_fill(a_q, A_N * A_NQ * A_HD, 1.5f);
  kc_fill(a_k, A_N * A_NKV * A_HD, 1.5f);
  kc_fill(a_v, A_N * A_NKV * A_HD, 1.0f);
  kc_fill(a_r, A_N * A_NQ * A_HD, 1.0f);
  a_loss();
  hxk_attention_backward(dq, dk, dv, a_r, a_q, a_k, a_v, a_lse, a_kv_of, A_SEQ,
                         A_T, A_NQ, A_NKV, A_HD, a_scratch);
  check_grad("attention.q", a_q, A_N * A_NQ * A_HD, dq, a_loss);
  check_grad("attention.k", a_k, A_N * A_NKV * A_HD, dk, a_loss);
  check_grad("attention.v", a_v, A_N * A_NKV * A_HD, dv, a_loss);
}

/* ---- block attention by positions (two key blocks merged) --------------- */
/* Queries at shuffled positions (position 1 sees no key of either block:
 * its row stays 0 and must get no gradient), keys in two blocks whose
 * positions interleave with the queries'. */
enum { B_SEQ = 2, B_NQT = 5, B_NK1 = 4, B_NK2 = 3, B_NQ = 4, B_NKV = 2,
       B_HD = 4 };
enum { B_QF = B_SEQ * B_NQT * B_NQ * B_HD, B_K1F = B_SEQ * B_NK1 * B_NKV * B_HD,
       B_K2F = B_SEQ * B_NK2 * B_NKV * B_HD, B_LF = B_SEQ * B_NQT * B_NQ };
static const int b_qpos[B_NQT] = {7, 1, 12, 4, 9};
static const int b_k1pos[B_NK1] = {3, 8, 2, 11}, b_k2pos[B_NK2] = {10, 6, 4};
static float b_q[B_QF], b_k1[B_K1F], b_v1[B_K1F], b_k2[B_K2F], b_v2[B_K2F];
static float b_o[B_QF], b_lse[B_LF], b_r[B_QF], b_scratch[16384];
static double b_loss(void) {
  hxk_attention_block_forward(b_o, b_lse, b_q, b_qpos, B_NQT, b_k2, b_v2,
                              b_k2pos, B_NK2, a_kv_of, B_SEQ, B_NQ, B_NKV, B_HD,
                              true, b_scratch);
  hxk_attention_block_forward(b_o, b_lse, b_q, b_qpos, B_NQT, b_k1, b_v1,
                              b_k1pos, B_NK1, a_kv_of, B_SEQ, B_NQ, B_NKV, B_HD,
                              false, b_scratch);
  return dot_double(b_o, b_r, B_QF);
}
static void test_attention_block(void) {
  static float dq[B_QF], dk1[B_K1F], dv1[B_K1F], dk2[B_K2F], dv2[B_K2F],
      delta[B_LF];
  KC_CHECK(hxk_attention_block_scratch_floats(B_NQT, B_NK1, B_NQ, B_HD) <=
               (long)(sizeof b_scratch / sizeof *b_scratch),
           "block scratch");
  kc_fill(b_q, B_QF, 1.5f), kc_fill(b_k1, B_K1F, 1.5f);
  kc_fill(b_v1, B_K1F, 1.0f), kc_fill(b_k2, B_K2F, 1.5f);
  kc_fill(b_v2, B_K2F, 1.0f), kc_fill(b_r, B_QF, 1.0f);
  b_loss();
  hxk_attention_block_delta(delta, b_r, b_o, B_SEQ * B_NQT, B_NQ, B_HD);
  hxk_attention_block_backward(dq, dk1, dv1, b_r, b_q, b_qpos, B_NQT, b_k1,
                               b_v1, b_k1pos, B_NK1, b_lse, delta, a_kv_of,
                               B_SEQ, B_NQ, B_NKV, B_HD, b_scratch);
  hxk_attention_block_backward(dq, dk2, dv2, b_r, b_q, b_qpos, B_NQT, b_k2,
                               b_v2, b_k2pos, B_NK2, b_lse, delta, a_kv_of,
                               B_SEQ, B_NQ, B_NKV, B_HD, b_scratch);
  check_grad("attention_block.q", b_q, B_QF, dq, b_loss);
  check_grad("attention_block.k1", b_k1, B_K1F, dk1, b_loss);
  check_grad("attention_block.v1", b_v1, B_K1F, dv1, b_loss);
  check_grad("attention_block.k2", b_k2, B_K2F, dk2, b_loss);
  check_grad("attention_block.v2", b_v2, B_K2F, dv2, b_loss);
}

/* ---- swiglu ------------------------------------------------------------- */
enum { S_N = 24 };
static float s_g[S_N], s_u[S_N], s_h[S_N], s_r[S_N];
static double s_loss(void) {
  hxk_swiglu_forward(s_h, s_g, s_u, S_N);
  return dot_double(s_h, s_r, S_N);
}
static void test_swiglu(void) {
  float dg[S_N] = {0}, du[S_N] = {0};
  kc_fill(s_g, S_N, 4.0f);
  kc_fill(s_u, S_N, 1.0f);
  kc_fill(s_r, S_N, 1.0f);
  hxk_swiglu_backward(dg, du, s_r, s_g, s_u, S_N);
  check_grad("swiglu.gate", s_g, S_N, dg, s_loss);
  check_grad("swiglu.up", s_u, S_N, du, s_loss);
}

/* ---- linear ------------------------------------------------------------- */
enum { L_N = 5, L_IN = 6, L_OUT = 4 };
static float l_x[L_N * L_IN], l_w[L_OUT * L_IN], l_y[L_N * L_OUT],
    l_r[L_N * L_OUT];
static double l_loss(void) {
  hxk_linear_forward(l_y, l_x, l_w, L_N, L_IN, L_OUT, 0.0f);
  return dot_double(l_y, l_r, L_N * L_OUT);
}
static void test_linear(void) {
  float dx[L_N * L_IN] = {0}, dw[L_OUT * L_IN] = {0};
  kc_fill(l_x, L_N * L_IN, 1.0f);
  kc_fill(l_w, L_OUT * L_IN, 1.0f);
  kc_fill(l_r, L_N * L_OUT, 1.0f);
  hxk_linear_backward(dx, dw, l_r, l_x, l_w, L_N, L_IN, L_OUT);
  check_grad("linear.x", l_x, L_N * L_IN, dx, l_loss);
  check_grad("linear.w", l_w, L_OUT * L_IN, dw, l_loss);
}

/* ---- residual ----------------------------------------------------------- */
enum { Q_N = 10 };
static float q_a[Q_N], q_b[Q_N], q_y[Q_N], q_r[Q_N];
static double q_loss(void) {
  hxk_residual_forward(q_y, q_a, q_b, Q_N);
  return dot_double(q_y, q_r, Q_N);
}
static void test_residual(void) {
  float da[Q_N] = {0}, db[Q_N] = {0};
  kc_fill(q_a, Q_N, 1.0f);
  kc_fill(q_b, Q_N, 1.0f);
  kc_fill(q_r, Q_N, 1.0f);
  hxk_residual_backward(da, db, q_r, Q_N);
  check_grad("residual.a", q_a, Q_N, da, q_loss);
  check_grad("residual.b", q_b, Q_N, db, q_loss);
}

/* ---- cross-entropy ------------------------------------------------------ */
enum { X_N = 6, X_V = 9 };
static float x_logits[X_N * X_V];
static const int32_t x_tgt[X_N] = {0, 8, 3, 3, 5, 1};
static double x_loss(void) {
  return hxk_cross_entropy_forward(x_logits, x_tgt, X_N, X_V, 1.0 / X_N);
}
static void test_cross_entropy(void) {
  float dlogits[X_N * X_V] = {0};
  kc_fill(x_logits, X_N * X_V, 2.0f);
  hxk_cross_entropy_backward(dlogits, x_logits, x_tgt, X_N, X_V, 1.0 / X_N);
  check_grad("cross_entropy.logits", x_logits, X_N * X_V, dlogits, x_loss);
  /* Uniform logits: the loss is log V exactly. */
  float flat[2 * X_V] = {0};
  int32_t tgt[2] = {4, 7};
  double loss = hxk_cross_entropy_forward(flat, tgt, 2, X_V, 0.5);
  KC_CHECK(fabs(loss - log((double)X_V)) < 1e-12, "uniform loss %.17g", loss);
}

/* ---- head: final norm + LM head + cross-entropy (2 chunks) -------------- */
enum { H_D = 8, H_V = 11, H_N = HXK_HEAD_CHUNK + 6 };
static struct hxk_dims h_dims = {.dim = H_D, .ffn = 4, .heads = 2,
                                 .kv_heads = 1, .vocab = H_V, .seq_len = H_N,
                                 .layers = 1, .norm_eps = 1e-5f,
                                 .rope_theta = 1e4};
static float h_x[H_N * H_D], h_norm[H_D], h_lm[H_V * H_D];
static int32_t h_tgt[H_N];
static float *h_scratch;
static double h_loss(void) {
  struct hxk_head_params w = {h_norm, h_lm};
  return hxk_head_forward_backward(&h_dims, &w, NULL, h_x, h_tgt, H_N,
                                   1.0 / H_N, NULL, h_scratch);
}
static void test_head(void) {
  KC_CHECK(hxk_dims_check(&h_dims), "head dims");
  h_scratch = kc_alloc(hxk_head_scratch_floats(&h_dims, H_N));
  static float dx[H_N * H_D], dnorm[H_D], dlm[H_V * H_D];
  kc_fill(h_x, H_N * H_D, 1.0f);
  for (int i = 0; i < H_D; i++)
    h_norm[i] = 1.0f + kc_uniform(0.5f);
  kc_fill(h_lm, H_V * H_D, 1.0f);
  for (int t = 0; t < H_N; t++)
    h_tgt[t] = (int32_t)((t * 7 + 3) % H_V);
  struct hxk_head_params w = {h_norm, h_lm}, g = {dnorm, dlm};
  double loss = hxk_head_forward_backward(&h_dims, &w, &g, h_x, h_tgt, H_N,
                                          1.0 / H_N, dx, h_scratch);
  KC_CHECK(fabs(loss - h_loss()) < 1e-12, "loss with/without backward differ");
  check_grad("head.x", h_x, H_N * H_D, dx, h_loss);
  check_grad("head.final_norm", h_norm, H_D, dnorm, h_loss);
  check_grad("head.lm_head", h_lm, H_V * H_D, dlm, h_loss);
  free(h_scratch);
}

/* ---- whole layer (unsplit) ---------------------------------------------- */
static struct hxk_dims y_dims = {.dim = 16, .ffn = 12, .heads = 4,
                                 .kv_heads = 2, .vocab = 8, .seq_len = 5,
                                 .layers = 2, .norm_eps = 1e-5f,
                                 .rope_theta = 100.0};
enum { Y_SEQ = 2 };
static struct hxk_layer_ctx y_ctx;
static struct hxk_layer_params y_w;
static float *y_x, *y_out, *y_r, *y_acts, *y_scratch;
static double y_loss(void) {
  long n = Y_SEQ * (long)y_dims.seq_len * y_dims.dim;
  hxk_layer_forward(&y_ctx, &y_w, y_x, y_out, y_acts, y_scratch, Y_SEQ);
  return dot_double(y_out, y_r, n);
}
static void test_layer(void) {
  static const char *names[HXK_LAYER_NPARAMS] = {
      "layer.attn_norm", "layer.wq",     "layer.wk",   "layer.wv",
      "layer.wo",        "layer.mlp_norm", "layer.w_gate", "layer.w_up",
      "layer.w_down"};
  struct hxk_shard shard;
  KC_CHECK(hxk_dims_check(&y_dims), "layer dims");
  KC_CHECK(hxk_shard_make(&y_dims, 0, 4, 0, 12, &shard), "layer shard");
  float *rope = kc_alloc(hxk_rope_table_floats(&y_dims));
  int kv_of[4];
  hxk_rope_table(rope, &y_dims);
  hxk_kv_map(kv_of, &y_dims, &shard);
  y_ctx = (struct hxk_layer_ctx){
      .dims = &y_dims, .shard = &shard, .rope = rope, .kv_of = kv_of};
  long nparam = hxk_layer_floats(&y_dims, &shard);
  long n = Y_SEQ * (long)y_dims.seq_len * y_dims.dim;
  float *wbuf = kc_alloc(nparam), *gbuf = kc_alloc(nparam);
  struct hxk_layer_params g;
  hxk_layer_bind(&y_w, wbuf, &y_dims, &shard);
  hxk_layer_bind(&g, gbuf, &y_dims, &shard);
  kc_fill(wbuf, nparam, 0.4f);
  for (int i = 0; i < y_dims.dim; i++) {
    y_w.attn_norm[i] = 1.0f + kc_uniform(0.3f);
    y_w.mlp_norm[i] = 1.0f + kc_uniform(0.3f);
  }
  y_x = kc_alloc(n), y_out = kc_alloc(n), y_r = kc_alloc(n);
  float *dx = kc_alloc(n);
  y_acts = kc_alloc(hxk_layer_acts_floats(&y_ctx, Y_SEQ));
  y_scratch = kc_alloc(hxk_layer_scratch_floats(&y_ctx, Y_SEQ));
  kc_fill(y_x, n, 1.0f);
  kc_fill(y_r, n, 1.0f);
  y_loss();
  hxk_layer_backward(&y_ctx, &y_w, &g, y_r, dx, y_acts, y_scratch, Y_SEQ);
  check_grad("layer.x", y_x, n, dx, y_loss);
  float *wp = wbuf, *gp = gbuf;
  for (int j = 0; j < HXK_LAYER_NPARAMS; j++) {
    long count = hxk_layer_param_floats(&y_dims, &shard, (enum hxk_param)j);
    check_grad(names[j], wp, count, gp, y_loss);
    wp += count, gp += count;
  }
  /* Negative control: a gradient 1% off must be caught. */
  for (long i = 0; i < n; i++)
    dx[i] *= 1.01f;
  KC_CHECK(fd_mismatches("layer.x (1% off)", y_x, n, dx, y_loss, false) > 0,
           "the checker missed a wrong gradient");
  free(rope), free(wbuf), free(gbuf), free(y_x), free(y_out), free(y_r);
  free(dx), free(y_acts), free(y_scratch);
}

int main(void) {
  test_embedding();
  test_rmsnorm();
  test_rope();
  test_attention();
  test_attention_block();
  test_swiglu();
  test_linear();
  test_residual();
  test_cross_entropy();
  test_head();
  test_layer();
  return kc_finish("kernels_gradcheck");
}
