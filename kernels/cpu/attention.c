/* Causal grouped-query attention, one (sequence, query head) at a time: the
 * score matrix of one head lives in scratch; only the row log-sum-exp is kept
 * for the backward, which recomputes the probabilities from it. */
#include <cblas.h>
#include <math.h>

#include "llama.h"

long hxk_attention_scratch_floats(int seq_len) {
  return 2L * seq_len * seq_len;
}

/* Strided views of one head of one sequence inside the token-major q/k/v. */
struct head_view {
  int seq_len, hd, ldq, ldkv;
  float scale; /* 1/sqrt(hd) */
};

static struct head_view make_view(int seq_len, int nq, int nkv, int hd) {
  struct head_view view = {seq_len, hd, nq * hd, nkv * hd,
                           (float)(1.0 / sqrt((double)hd))};
  return view;
}

/* scores[T, T] = scale * Q K^T (the upper triangle is computed and ignored). */
static void head_scores(float *scores, const float *q, const float *k,
                        const struct head_view *vw) {
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, vw->seq_len,
              vw->seq_len, vw->hd, vw->scale, q, vw->ldq, k, vw->ldkv, 0.0f,
              scores, vw->seq_len);
}

/* Causal softmax of every row in place; row t's log-sum-exp goes to
 * lse[t * lse_stride]; masked entries become exactly 0. */
static void causal_softmax(float *p, float *lse, long lse_stride, int seq_len) {
  for (int t = 0; t < seq_len; t++) {
    float *row = p + (long)t * seq_len;
    float peak = row[0];
    for (int u = 1; u <= t; u++)
      peak = row[u] > peak ? row[u] : peak;
    float sum = 0.0f;
    for (int u = 0; u <= t; u++) {
      row[u] = expf(row[u] - peak);
      sum += row[u];
    }
    float inv = 1.0f / sum;
    for (int u = 0; u <= t; u++)
      row[u] *= inv;
    for (int u = t + 1; u < seq_len; u++)
      row[u] = 0.0f;
    lse[(long)t * lse_stride] = peak + logf(sum);
  }
}

void hxk_attention_forward(float *o, float *lse, const float *q,
                           const float *k, const float *v, const int *kv_of,
                           long nseq, int seq_len, int nq, int nkv, int hd,
                           float *scratch) {
  struct head_view vw = make_view(seq_len, nq, nkv, hd);
  for (long s = 0; s < nseq; s++) {
    long tok0 = s * seq_len;
    for (int h = 0; h < nq; h++) {
      const float *qh = q + tok0 * vw.ldq + (long)h * hd;
      const float *kh = k + tok0 * vw.ldkv + (long)kv_of[h] * hd;
      const float *vh = v + tok0 * vw.ldkv + (long)kv_of[h] * hd;
      head_scores(scratch, qh, kh, &vw);
      causal_softmax(scratch, lse + tok0 * nq + h, nq, seq_len);
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, seq_len, hd,
                  seq_len, 1.0f, scratch, seq_len, vh, vw.ldkv, 0.0f,
                  o + tok0 * vw.ldq + (long)h * hd, vw.ldq);
    }
  }
}

/* p = exp(scores - lse_t) on the causal triangle, 0 above it. */
static void probs_from_lse(float *p, const float *lse, long lse_stride,
                           int seq_len) {
  for (int t = 0; t < seq_len; t++) {
    float *row = p + (long)t * seq_len;
    float l = lse[(long)t * lse_stride];
    for (int u = 0; u <= t; u++)
      row[u] = expf(row[u] - l);
    for (int u = t + 1; u < seq_len; u++)
      row[u] = 0.0f;
  }
}

/* dS = P (dP - rowsum(P dP)), in place over dP. */
static void softmax_backward(float *dp, const float *p, int seq_len) {
  for (int t = 0; t < seq_len; t++) {
    const float *prow = p + (long)t * seq_len;
    float *drow = dp + (long)t * seq_len;
    float dot = 0.0f;
    for (int u = 0; u <= t; u++)
      dot += prow[u] * drow[u];
    for (int u = 0; u < seq_len; u++)
      drow[u] = prow[u] * (drow[u] - dot);
  }
}

void hxk_attention_backward(float *dq, float *dk, float *dv, const float *dout,
                            const float *q, const float *k, const float *v,
                            const float *lse, const int *kv_of, long nseq,
                            int seq_len, int nq, int nkv, int hd,
                            float *scratch) {
  struct head_view vw = make_view(seq_len, nq, nkv, hd);
  float *p = scratch, *dp = scratch + (long)seq_len * seq_len;
  int T = seq_len;
  for (long s = 0; s < nseq; s++) {
    long tok0 = s * seq_len;
    for (int h = 0; h < nq; h++) {
      long qoff = tok0 * vw.ldq + (long)h * hd;
      long kvoff = tok0 * vw.ldkv + (long)kv_of[h] * hd;
      head_scores(p, q + qoff, k + kvoff, &vw);
      probs_from_lse(p, lse + tok0 * nq + h, nq, T);
      /* dP = dO V^T;  dV += P^T dO */
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, T, hd, 1.0f,
                  dout + qoff, vw.ldq, v + kvoff, vw.ldkv, 0.0f, dp, T);
      cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, T, hd, T, 1.0f, p,
                  T, dout + qoff, vw.ldq, 1.0f, dv + kvoff, vw.ldkv);
      softmax_backward(dp, p, T);
      /* dQ += scale dS K;  dK += scale dS^T Q */
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, T, hd, T,
                  vw.scale, dp, T, k + kvoff, vw.ldkv, 1.0f, dq + qoff, vw.ldq);
      cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, T, hd, T, vw.scale,
                  dp, T, q + qoff, vw.ldq, 1.0f, dk + kvoff, vw.ldkv);
    }
  }
}
