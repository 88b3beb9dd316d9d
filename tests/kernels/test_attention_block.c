/* Block attention by global positions (ring attention's building block) and
 * RoPE by positions, against the whole-sequence kernels:
 *  1. a sequence of T = 150 cut into uneven chunks dealt zig-zag to four
 *     "devices" (one of them a single token, one non-contiguous, one longer
 *     than a tile); each device merges every device's K/V block into its
 *     queries' state, in ring order and in reverse ring order; o and lse
 *     equal hxk_attention_forward's rows within 1e-5 (relative to max(1,
 *     |ref|)); GQA with 2 query heads per kv head, two sequences;
 *  2. the block backward, summed over the blocks with the final lse and
 *     delta, equals hxk_attention_backward (dq, dk, dv) within 1e-5;
 *  3. a block with no visible key leaves the state alone (first: o = 0,
 *     lse = -inf; otherwise bit for bit unchanged) and adds no gradient;
 *  4. one long sequence (T = 1024, 16 tiles) in a single block against the
 *     whole-head kernel: forward within 1e-6, backward within 1e-5;
 *  5. RoPE by positions: bit-identical to the seq_len version for pos = i;
 *     for shuffled positions each row equals that token rotated alone at its
 *     position; the in-place backward undoes the forward. */
#include <cblas.h>

#include "kcheck.h"
#include "kernels/cpu/llama.h"

enum { NSEQ = 2, T = 150, NQ = 4, NKV = 2, HD = 8, NDEV = 4 };
enum { QW = NQ * HD, KVW = NKV * HD };

static const int kv_of[NQ] = {0, 0, 1, 1};

/* The full sequence's tensors and the whole-sequence kernels' results. */
static float q[NSEQ * T * QW], k[NSEQ * T * KVW], v[NSEQ * T * KVW];
static float dout[NSEQ * T * QW];
static float ref_o[NSEQ * T * QW], ref_lse[NSEQ * T * NQ];
static float ref_dq[NSEQ * T * QW], ref_dk[NSEQ * T * KVW],
    ref_dv[NSEQ * T * KVW];

/* A device's tokens: chunks [begin, end) of the sequence, in local order. */
struct device {
  int npos;
  int pos[T];
  /* its rows of q, k, v, dout (gathered) and its results */
  float *q, *k, *v, *dout, *o, *lse, *delta, *dq, *dk, *dv;
};

static struct device devs[NDEV];

static void add_chunk(struct device *d, int begin, int end) {
  for (int p = begin; p < end; p++)
    d->pos[d->npos++] = p;
}

/* Copies rows at the device's positions out of a full [NSEQ*T, w] tensor. */
static void gather(float *dst, const float *full, const struct device *d,
                   int w) {
  for (int s = 0; s < NSEQ; s++)
    for (int i = 0; i < d->npos; i++)
      memcpy(dst + ((long)s * d->npos + i) * w,
             full + ((long)s * T + d->pos[i]) * w, (size_t)w * sizeof *dst);
}

/* Adds the device's rows back at their positions of a full tensor. */
static void scatter_add(float *full, const float *src, const struct device *d,
                        int w) {
  for (int s = 0; s < NSEQ; s++)
    for (int i = 0; i < d->npos; i++)
      for (int c = 0; c < w; c++)
        full[((long)s * T + d->pos[i]) * w + c] +=
            src[((long)s * d->npos + i) * w + c];
}

static void setup(void) {
  kc_fill(q, NSEQ * T * QW, 1.5f);
  kc_fill(k, NSEQ * T * KVW, 1.5f);
  kc_fill(v, NSEQ * T * KVW, 1.0f);
  kc_fill(dout, NSEQ * T * QW, 1.0f);
  float *scratch = kc_alloc(hxk_attention_scratch_floats(T));
  hxk_attention_forward(ref_o, ref_lse, q, k, v, kv_of, NSEQ, T, NQ, NKV, HD,
                        scratch);
  hxk_attention_backward(ref_dq, ref_dk, ref_dv, dout, q, k, v, ref_lse, kv_of,
                         NSEQ, T, NQ, NKV, HD, scratch);
  free(scratch);
  /* zig-zag and uneven: device 0 holds both ends, device 3 one token */
  add_chunk(&devs[0], 0, 20);
  add_chunk(&devs[0], 130, 150);
  add_chunk(&devs[1], 100, 130);
  add_chunk(&devs[2], 21, 100); /* 79 tokens: two query and key tiles */
  add_chunk(&devs[3], 20, 21);
  for (int i = 0; i < NDEV; i++) {
    struct device *d = &devs[i];
    long rows = (long)NSEQ * d->npos;
    d->q = kc_alloc(rows * QW), d->k = kc_alloc(rows * KVW);
    d->v = kc_alloc(rows * KVW), d->dout = kc_alloc(rows * QW);
    d->o = kc_alloc(rows * QW), d->lse = kc_alloc(rows * NQ);
    d->delta = kc_alloc(rows * NQ), d->dq = kc_alloc(rows * QW);
    d->dk = kc_alloc(rows * KVW), d->dv = kc_alloc(rows * KVW);
    gather(d->q, q, d, QW);
    gather(d->k, k, d, KVW);
    gather(d->v, v, d, KVW);
    gather(d->dout, dout, d, QW);
  }
}

/* Device `me` merges every device's block, `step` = +1 (ring order from
 * itself) or -1 (reverse). */
static void ring_forward(int me, int step, float *scratch) {
  struct device *d = &devs[me];
  for (int hop = 0; hop < NDEV; hop++) {
    const struct device *src = &devs[((me + step * hop) % NDEV + NDEV) % NDEV];
    hxk_attention_block_forward(d->o, d->lse, d->q, d->pos, d->npos, src->k,
                                src->v, src->pos, src->npos, kv_of, NSEQ, NQ,
                                NKV, HD, hop == 0, scratch);
  }
}

static void test_forward(int step) {
  float *scratch = kc_alloc(hxk_attention_block_scratch_floats(T, T, NQ, HD));
  double worst_o = 0.0, worst_lse = 0.0;
  for (int me = 0; me < NDEV; me++) {
    struct device *d = &devs[me];
    long rows = (long)NSEQ * d->npos;
    float *want_o = kc_alloc(rows * QW), *want_lse = kc_alloc(rows * NQ);
    gather(want_o, ref_o, d, QW);
    gather(want_lse, ref_lse, d, NQ);
    ring_forward(me, step, scratch);
    worst_o = fmax(worst_o, kc_max_err(d->o, want_o, rows * QW));
    worst_lse = fmax(worst_lse, kc_max_err(d->lse, want_lse, rows * NQ));
    free(want_o), free(want_lse);
  }
  printf("  forward, %s ring order: o %.2e lse %.2e\n",
         step > 0 ? "forward" : "reverse", worst_o, worst_lse);
  KC_CHECK(worst_o < 1e-5 && worst_lse < 1e-5,
           "merged blocks differ from the whole sequence: o %.3g lse %.3g",
           worst_o, worst_lse);
  free(scratch);
}

/* Every device's queries against every device's keys, with the final lse of
 * the forward; dK/dV of a block go back to the block's owner. */
static void test_backward(void) {
  float *scratch = kc_alloc(hxk_attention_block_scratch_floats(T, T, NQ, HD));
  float *dq = kc_alloc(NSEQ * T * QW), *dk = kc_alloc(NSEQ * T * KVW);
  float *dv = kc_alloc(NSEQ * T * KVW);
  for (int me = 0; me < NDEV; me++) {
    struct device *d = &devs[me];
    ring_forward(me, 1, scratch);
    hxk_attention_block_delta(d->delta, d->dout, d->o, (long)NSEQ * d->npos,
                              NQ, HD);
  }
  for (int me = 0; me < NDEV; me++) {
    struct device *d = &devs[me];
    for (int src = 0; src < NDEV; src++) {
      struct device *b = &devs[src];
      hxk_attention_block_backward(d->dq, b->dk, b->dv, d->dout, d->q, d->pos,
                                   d->npos, b->k, b->v, b->pos, b->npos, d->lse,
                                   d->delta, kv_of, NSEQ, NQ, NKV, HD,
                                   scratch);
    }
  }
  for (int me = 0; me < NDEV; me++) {
    scatter_add(dq, devs[me].dq, &devs[me], QW);
    scatter_add(dk, devs[me].dk, &devs[me], KVW);
    scatter_add(dv, devs[me].dv, &devs[me], KVW);
  }
  double e_q = kc_max_err(dq, ref_dq, NSEQ * T * QW);
  double e_k = kc_max_err(dk, ref_dk, NSEQ * T * KVW);
  double e_v = kc_max_err(dv, ref_dv, NSEQ * T * KVW);
  printf("  backward summed over blocks: dq %.2e dk %.2e dv %.2e\n", e_q, e_k,
         e_v);
  KC_CHECK(e_q < 1e-5 && e_k < 1e-5 && e_v < 1e-5,
           "block backward differs: dq %.3g dk %.3g dv %.3g", e_q, e_k, e_v);
  free(scratch), free(dq), free(dk), free(dv);
}

/* Queries at positions 5, 6 against keys at 10..12: nothing visible. */
static void test_invisible_block(void) {
  enum { NQT = 2, NKT = 3, N = NSEQ * NQT };
  const int qp[NQT] = {6, 5}, kp[NKT] = {10, 12, 11};
  float bq[N * QW], bk[NSEQ * NKT * KVW], bv[NSEQ * NKT * KVW];
  float o[N * QW], lse[N * NQ], o0[N * QW], lse0[N * NQ];
  float *scratch = kc_alloc(hxk_attention_block_scratch_floats(NQT, NKT, NQ,
                                                               HD));
  kc_fill(bq, N * QW, 1.0f);
  kc_fill(bk, NSEQ * NKT * KVW, 1.0f);
  kc_fill(bv, NSEQ * NKT * KVW, 1.0f);
  kc_fill(o, N * QW, 1.0f); /* garbage that `first` must clear */
  hxk_attention_block_forward(o, lse, bq, qp, NQT, bk, bv, kp, NKT, kv_of,
                              NSEQ, NQ, NKV, HD, true, scratch);
  bool cleared = true;
  for (int i = 0; i < N * QW; i++)
    cleared = cleared && o[i] == 0.0f;
  for (int i = 0; i < N * NQ; i++)
    cleared = cleared && lse[i] == -INFINITY;
  KC_CHECK(cleared, "a first block with no visible key: o 0, lse -inf");
  /* a running state from other keys is left exactly as it was */
  const int kp_seen[NKT] = {0, 1, 2};
  hxk_attention_block_forward(o, lse, bq, qp, NQT, bk, bv, kp_seen, NKT,
                              kv_of, NSEQ, NQ, NKV, HD, true, scratch);
  memcpy(o0, o, sizeof o);
  memcpy(lse0, lse, sizeof lse);
  hxk_attention_block_forward(o, lse, bq, qp, NQT, bk, bv, kp, NKT, kv_of,
                              NSEQ, NQ, NKV, HD, false, scratch);
  KC_CHECK(memcmp(o, o0, sizeof o) == 0 && memcmp(lse, lse0, sizeof lse) == 0,
           "an invisible block changed the state");
  /* and its backward adds nothing */
  float dq[N * QW] = {0}, dk[NSEQ * NKT * KVW] = {0},
        dv[NSEQ * NKT * KVW] = {0}, delta[N * NQ], dO[N * QW];
  kc_fill(dO, N * QW, 1.0f);
  hxk_attention_block_delta(delta, dO, o, N, NQ, HD);
  hxk_attention_block_backward(dq, dk, dv, dO, bq, qp, NQT, bk, bv, kp, NKT,
                               lse, delta, kv_of, NSEQ, NQ, NKV, HD, scratch);
  double mag = 0.0;
  for (int i = 0; i < N * QW; i++)
    mag += fabs(dq[i]);
  for (int i = 0; i < NSEQ * NKT * KVW; i++)
    mag += fabs(dk[i]) + fabs(dv[i]);
  KC_CHECK(mag == 0.0, "an invisible block's backward added %.3g", mag);
  free(scratch);
}

/* One sequence of 1024 tokens as a single block (the layer's tiled path). */
static void test_long_sequence(void) {
  enum { LT = 1024, LQ = 2, LKV = 1, LHD = 8 };
  const int lkv_of[LQ] = {0, 0};
  long nq_f = (long)LT * LQ * LHD, nkv_f = (long)LT * LKV * LHD;
  float *lq = kc_alloc(nq_f), *lk = kc_alloc(nkv_f), *lv = kc_alloc(nkv_f);
  float *ldo = kc_alloc(nq_f);
  float *o1 = kc_alloc(nq_f), *l1 = kc_alloc(LT * LQ);
  float *o2 = kc_alloc(nq_f), *l2 = kc_alloc(LT * LQ);
  float *g1 = kc_alloc(nq_f + 2 * nkv_f), *g2 = kc_alloc(nq_f + 2 * nkv_f);
  float *delta = kc_alloc(LT * LQ);
  kc_fill(lq, nq_f, 2.0f), kc_fill(lk, nkv_f, 2.0f), kc_fill(lv, nkv_f, 1.0f);
  kc_fill(ldo, nq_f, 1.0f);
  float *whole = kc_alloc(hxk_attention_scratch_floats(LT));
  long block_scratch = hxk_attention_block_scratch_floats(LT, LT, LQ, LHD);
  KC_CHECK(block_scratch < 64L * 1024, "block scratch %ld floats", block_scratch);
  float *tiles = kc_alloc(block_scratch);
  hxk_attention_forward(o1, l1, lq, lk, lv, lkv_of, 1, LT, LQ, LKV, LHD, whole);
  hxk_attention_backward(g1, g1 + nq_f, g1 + nq_f + nkv_f, ldo, lq, lk, lv, l1,
                         lkv_of, 1, LT, LQ, LKV, LHD, whole);
  hxk_attention_block_forward(o2, l2, lq, NULL, LT, lk, lv, NULL, LT, lkv_of, 1,
                              LQ, LKV, LHD, true, tiles);
  hxk_attention_block_delta(delta, ldo, o2, LT, LQ, LHD);
  hxk_attention_block_backward(g2, g2 + nq_f, g2 + nq_f + nkv_f, ldo, lq, NULL,
                               LT, lk, lv, NULL, LT, l2, delta, lkv_of, 1, LQ,
                               LKV, LHD, tiles);
  double e_o = kc_max_err(o2, o1, nq_f), e_l = kc_max_err(l2, l1, LT * LQ);
  double e_g = kc_max_err(g2, g1, nq_f + 2 * nkv_f);
  printf("  T=%d in one block: o %.2e lse %.2e grads %.2e\n", LT, e_o, e_l,
         e_g);
  KC_CHECK(e_o < 1e-6 && e_l < 1e-6, "tiled forward off: o %.3g lse %.3g",
           e_o, e_l);
  KC_CHECK(e_g < 1e-5, "tiled backward off: %.3g", e_g);
  float *bufs[] = {lq, lk, lv, ldo, o1, l1, o2, l2, g1, g2, delta, whole, tiles};
  for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++)
    free(bufs[i]);
}

/* ---- RoPE by positions --------------------------------------------------- */
enum { R_T = 12, R_H = 3, R_HD = 8, R_W = R_H * R_HD, R_N = NSEQ * R_T };

static void test_rope_positions(void) {
  struct hxk_dims d = {.dim = R_W, .ffn = 4, .heads = R_H, .kv_heads = 1,
                       .vocab = 4, .seq_len = R_T, .layers = 1,
                       .norm_eps = 1e-5f, .rope_theta = 100.0};
  KC_CHECK(hxk_dims_check(&d), "rope dims");
  float tab[R_T * R_HD], x[R_N * R_W], a[R_N * R_W], b[R_N * R_W];
  hxk_rope_table(tab, &d);
  kc_fill(x, R_N * R_W, 1.0f);
  int ident[R_T];
  for (int i = 0; i < R_T; i++)
    ident[i] = i;
  memcpy(a, x, sizeof x), memcpy(b, x, sizeof x);
  hxk_rope_forward(a, tab, R_N, R_H, R_HD, R_T);
  hxk_rope_forward_pos(b, tab, R_N, R_H, R_HD, ident, R_T);
  KC_CHECK(memcmp(a, b, sizeof a) == 0, "rope by identity positions differs");
  hxk_rope_backward_inplace(a, tab, R_N, R_H, R_HD, R_T);
  hxk_rope_backward_pos_inplace(b, tab, R_N, R_H, R_HD, ident, R_T);
  KC_CHECK(memcmp(a, b, sizeof a) == 0, "rope backward by identity differs");

  /* 5 local tokens per sequence at shuffled positions */
  enum { L = 5 };
  const int pos[L] = {9, 2, 11, 0, 6};
  float y[NSEQ * L * R_W], one[R_T * R_W];
  kc_fill(y, NSEQ * L * R_W, 1.0f);
  memcpy(a, y, sizeof y);
  hxk_rope_forward_pos(a, tab, NSEQ * L, R_H, R_HD, pos, L);
  double worst = 0.0;
  for (int s = 0; s < NSEQ; s++)
    for (int i = 0; i < L; i++) {
      /* the token alone, placed at row pos[i] of a sequence */
      memset(one, 0, sizeof one);
      memcpy(one + pos[i] * R_W, y + (s * L + i) * R_W, R_W * sizeof *y);
      hxk_rope_forward(one, tab, R_T, R_H, R_HD, R_T);
      worst = fmax(worst, kc_max_err(a + (s * L + i) * R_W, one + pos[i] * R_W,
                                     R_W));
    }
  KC_CHECK(worst == 0.0, "rope by shuffled positions off by %.3g", worst);
  hxk_rope_backward_pos_inplace(a, tab, NSEQ * L, R_H, R_HD, pos, L);
  double back = kc_max_err(a, y, NSEQ * L * R_W);
  KC_CHECK(back < 1e-6, "rope backward does not undo the forward: %.3g", back);
}

int main(void) {
  openblas_set_num_threads(1);
  setup();
  test_forward(1);
  test_forward(-1);
  test_backward();
  test_invisible_block();
  test_long_sequence();
  test_rope_positions();
  for (int i = 0; i < NDEV; i++) {
    struct device *d = &devs[i];
    float *bufs[] = {d->q, d->k, d->v, d->dout, d->o, d->lse, d->delta,
                     d->dq, d->dk, d->dv};
    for (size_t j = 0; j < sizeof bufs / sizeof *bufs; j++)
      free(bufs[j]);
  }
  return kc_finish("kernels_attention_block");
}
