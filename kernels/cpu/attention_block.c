/* Block-wise causal GQA attention by global token positions: the building
 * block of ring attention (one call per K/V block that reaches the rank) and
 * the tiled CPU attention (nothing of size queries x keys is held).
 *
 * Math (docs/model-spec.md's attention, split over key blocks): for a query
 * row t and a key block B, with s_u = q_t.k_u / sqrt(hd) over the visible
 * keys u of B (k_pos[u] <= q_pos[t]),
 *   lse_B = log sum_u e^{s_u},   o_B = sum_u e^{s_u - lse_B} v_u,
 * and the running state (o, lse) over the blocks merged so far becomes
 *   lse' = log(e^lse + e^lse_B),   o' = o e^{lse - lse'} + o_B e^{lse_B - lse'},
 * which over all blocks is the softmax over all visible keys, in any order.
 * Inside a block the same merge runs tile by tile (running max m and sum l,
 * flash-attention's online softmax). The backward recomputes the tile's
 * probabilities from the FINAL lse: P = e^{s - lse}, then
 *   dV += P^T dO,  dP = dO V^T,  dS = P (dP - delta),  delta = rowsum(dO O),
 *   dQ += dS K / sqrt(hd),  dK += dS^T Q / sqrt(hd),
 * which is exact per block, so the sum over blocks is the full backward. */
#include <cblas.h>
#include <math.h>
#include <string.h>

#include "llama.h"

#define TILE HXK_ATTN_TILE

static int pos_at(const int *pos, long i) { return pos ? pos[i] : (int)i; }

static long min_long(long a, long b) { return a < b ? a : b; }

/* Scratch of either direction: a score/probability tile, its gradient tile,
 * the forward's unnormalised output tile and its running max and sum. */
long hxk_attention_block_scratch_floats(long nq_tok, long nk_tok, int nq,
                                        int hd) {
  (void)nq_tok; /* tiles are fixed-size: scratch does not grow with tokens */
  (void)nk_tok;
  (void)nq;
  return 2L * TILE * TILE + (long)TILE * hd + 2L * TILE;
}

struct tile_scratch {
  float *s, *dp, *acc, *m, *l;
};

static struct tile_scratch carve(float *scratch, int hd) {
  struct tile_scratch t;
  t.s = scratch;
  t.dp = t.s + TILE * TILE;
  t.acc = t.dp + TILE * TILE;
  t.m = t.acc + (long)TILE * hd;
  t.l = t.m + TILE;
  return t;
}

/* Range of positions of rows [b, e): decides whether a tile pair is fully
 * masked (skipped) or fully visible (no per-element test). */
struct pos_range {
  int lo, hi;
};

static struct pos_range range_of(const int *pos, long b, long e) {
  struct pos_range r = {pos_at(pos, b), pos_at(pos, b)};
  for (long i = b + 1; i < e; i++) {
    int p = pos_at(pos, i);
    r.lo = p < r.lo ? p : r.lo;
    r.hi = p > r.hi ? p : r.hi;
  }
  return r;
}

/* One (sequence, head) pair's strided views into q/k/v and the tile shapes. */
struct head_job {
  const float *q, *k, *v; /* first row of the sequence, at the head's column */
  const int *q_pos, *k_pos;
  long nq_tok, nk_tok;
  int ldq, ldkv, hd;
  float scale;
};

/* s[bq, bk] = scale * Q_tile K_tile^T, masked entries set to -inf. Returns
 * false when the tile pair has no visible key at all (nothing computed). */
static bool tile_scores(float *s, const struct head_job *job, long i0, long bq,
                        long j0, long bk, struct pos_range qr) {
  struct pos_range kr = range_of(job->k_pos, j0, j0 + bk);
  if (kr.lo > qr.hi)
    return false;
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)bq, (int)bk,
              job->hd, job->scale, job->q + i0 * job->ldq, job->ldq,
              job->k + j0 * job->ldkv, job->ldkv, 0.0f, s, (int)bk);
  if (kr.hi <= qr.lo)
    return true; /* every key precedes every query: no mask */
  for (long i = 0; i < bq; i++) {
    int qp = pos_at(job->q_pos, i0 + i);
    for (long j = 0; j < bk; j++)
      if (pos_at(job->k_pos, j0 + j) > qp)
        s[i * bk + j] = -INFINITY;
  }
  return true;
}

/* Online softmax over one score tile: rescales the running (m, l, acc) rows
 * and turns s into e^{s - m_new} (0 where masked or where the row has seen
 * no visible key yet). */
static void online_rows(float *s, float *m, float *l, float *acc, long bq,
                        long bk, int hd) {
  for (long i = 0; i < bq; i++) {
    float *row = s + i * bk;
    float peak = m[i];
    for (long j = 0; j < bk; j++)
      peak = row[j] > peak ? row[j] : peak;
    if (peak == -INFINITY) { /* nothing visible so far: keep the zero state */
      memset(row, 0, (size_t)bk * sizeof *row);
      continue;
    }
    float corr = expf(m[i] - peak); /* 0 when m[i] was -inf */
    float sum = 0.0f;
    for (long j = 0; j < bk; j++) {
      row[j] = expf(row[j] - peak); /* e^-inf = 0 for masked keys */
      sum += row[j];
    }
    l[i] = l[i] * corr + sum;
    m[i] = peak;
    if (corr != 1.0f)
      for (int c = 0; c < hd; c++)
        acc[i * hd + c] *= corr;
  }
}

/* Folds one query tile's block result (acc / l, lse_b = m + log l) into the
 * running state o, lse (rows of stride ldq / lse_stride). */
static void merge_rows(float *o, float *lse, int ldq, int lse_stride,
                       const struct tile_scratch *t, long bq, int hd) {
  for (long i = 0; i < bq; i++) {
    if (t->l[i] == 0.0f)
      continue; /* the block showed this row no visible key */
    float lse_b = t->m[i] + logf(t->l[i]);
    float *orow = o + i * ldq;
    float *lrow = lse + i * lse_stride;
    float old = *lrow;
    float hi = old > lse_b ? old : lse_b;
    float merged = hi + log1pf(expf(-fabsf(old - lse_b)));
    if (old == -INFINITY)
      merged = lse_b;
    float w_old = old == -INFINITY ? 0.0f : expf(old - merged);
    float w_new = expf(lse_b - merged) / t->l[i];
    for (int c = 0; c < hd; c++)
      orow[c] = orow[c] * w_old + t->acc[i * hd + c] * w_new;
    *lrow = merged;
  }
}

static void forward_head(float *o, float *lse, int lse_stride,
                         const struct head_job *job,
                         const struct tile_scratch *t) {
  int hd = job->hd;
  for (long i0 = 0; i0 < job->nq_tok; i0 += TILE) {
    long bq = min_long(TILE, job->nq_tok - i0);
    struct pos_range qr = range_of(job->q_pos, i0, i0 + bq);
    for (long i = 0; i < bq; i++) {
      t->m[i] = -INFINITY;
      t->l[i] = 0.0f;
    }
    memset(t->acc, 0, (size_t)(bq * hd) * sizeof *t->acc);
    for (long j0 = 0; j0 < job->nk_tok; j0 += TILE) {
      long bk = min_long(TILE, job->nk_tok - j0);
      if (!tile_scores(t->s, job, i0, bq, j0, bk, qr))
        continue;
      online_rows(t->s, t->m, t->l, t->acc, bq, bk, hd);
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)bq, hd,
                  (int)bk, 1.0f, t->s, (int)bk, job->v + j0 * job->ldkv,
                  job->ldkv, 1.0f, t->acc, hd);
    }
    merge_rows(o + i0 * job->ldq, lse + i0 * lse_stride, job->ldq, lse_stride,
               t, bq, hd);
  }
}

static struct head_job job_for(const float *q, const int *q_pos, long nq_tok,
                               const float *k, const float *v,
                               const int *k_pos, long nk_tok, long s, int h,
                               int kv, int nq, int nkv, int hd) {
  struct head_job job;
  job.ldq = nq * hd;
  job.ldkv = nkv * hd;
  job.q = q + s * nq_tok * job.ldq + (long)h * hd;
  job.k = k + s * nk_tok * job.ldkv + (long)kv * hd;
  job.v = v + s * nk_tok * job.ldkv + (long)kv * hd;
  job.q_pos = q_pos;
  job.k_pos = k_pos;
  job.nq_tok = nq_tok;
  job.nk_tok = nk_tok;
  job.hd = hd;
  job.scale = (float)(1.0 / sqrt((double)hd));
  return job;
}

void hxk_attention_block_forward(float *o, float *lse, const float *q,
                                 const int *q_pos, long nq_tok, const float *k,
                                 const float *v, const int *k_pos,
                                 long nk_tok, const int *kv_of, long nseq,
                                 int nq, int nkv, int hd, bool first,
                                 float *scratch) {
  long rows = nseq * nq_tok;
  if (first) {
    memset(o, 0, (size_t)(rows * nq * hd) * sizeof *o);
    for (long i = 0; i < rows * nq; i++)
      lse[i] = -INFINITY;
  }
  struct tile_scratch t = carve(scratch, hd);
  for (long s = 0; s < nseq; s++)
    for (int h = 0; h < nq; h++) {
      struct head_job job = job_for(q, q_pos, nq_tok, k, v, k_pos, nk_tok, s,
                                    h, kv_of[h], nq, nkv, hd);
      long row0 = s * nq_tok;
      forward_head(o + row0 * nq * hd + (long)h * hd, lse + row0 * nq + h, nq,
                   &job, &t);
    }
}

void hxk_attention_block_delta(float *delta, const float *dout, const float *o,
                               long n, int nq, int hd) {
  for (long r = 0; r < n * nq; r++) {
    const float *a = dout + r * hd, *b = o + r * hd;
    double dot = 0.0;
    for (int c = 0; c < hd; c++)
      dot += (double)a[c] * b[c];
    delta[r] = (float)dot;
  }
}

/* P = e^{s - lse} in place over the scores (masked entries are -inf, so 0;
 * a row with lse = -inf saw no key anywhere: 0). */
static void probs_rows(float *s, const float *lse, int lse_stride, long bq,
                       long bk) {
  for (long i = 0; i < bq; i++) {
    float l = lse[i * lse_stride];
    float *row = s + i * bk;
    for (long j = 0; j < bk; j++)
      row[j] = l == -INFINITY ? 0.0f : expf(row[j] - l);
  }
}

/* dS = P (dP - delta) in place over dP. */
static void dscores_rows(float *dp, const float *p, const float *delta,
                         int lse_stride, long bq, long bk) {
  for (long i = 0; i < bq; i++) {
    float d = delta[i * lse_stride];
    for (long j = 0; j < bk; j++)
      dp[i * bk + j] = p[i * bk + j] * (dp[i * bk + j] - d);
  }
}

struct head_grads {
  float *dq, *dk, *dv;   /* at the job's first row and head column */
  const float *dout;     /* same layout as q */
  const float *lse, *delta;
  int lse_stride;
};

static void backward_tile(const struct head_job *job,
                          const struct head_grads *g,
                          const struct tile_scratch *t, long i0, long bq,
                          long j0, long bk) {
  int hd = job->hd, ldq = job->ldq, ldkv = job->ldkv;
  probs_rows(t->s, g->lse + i0 * g->lse_stride, g->lse_stride, bq, bk);
  /* dV += P^T dO;  dP = dO V^T */
  cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)bk, hd, (int)bq,
              1.0f, t->s, (int)bk, g->dout + i0 * ldq, ldq, 1.0f,
              g->dv + j0 * ldkv, ldkv);
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)bq, (int)bk, hd,
              1.0f, g->dout + i0 * ldq, ldq, job->v + j0 * ldkv, ldkv, 0.0f,
              t->dp, (int)bk);
  dscores_rows(t->dp, t->s, g->delta + i0 * g->lse_stride, g->lse_stride, bq,
               bk);
  /* dQ += scale dS K;  dK += scale dS^T Q */
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)bq, hd, (int)bk,
              job->scale, t->dp, (int)bk, job->k + j0 * ldkv, ldkv, 1.0f,
              g->dq + i0 * ldq, ldq);
  cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)bk, hd, (int)bq,
              job->scale, t->dp, (int)bk, job->q + i0 * ldq, ldq, 1.0f,
              g->dk + j0 * ldkv, ldkv);
}

static void backward_head(const struct head_job *job,
                          const struct head_grads *g,
                          const struct tile_scratch *t) {
  for (long i0 = 0; i0 < job->nq_tok; i0 += TILE) {
    long bq = min_long(TILE, job->nq_tok - i0);
    struct pos_range qr = range_of(job->q_pos, i0, i0 + bq);
    for (long j0 = 0; j0 < job->nk_tok; j0 += TILE) {
      long bk = min_long(TILE, job->nk_tok - j0);
      if (tile_scores(t->s, job, i0, bq, j0, bk, qr))
        backward_tile(job, g, t, i0, bq, j0, bk);
    }
  }
}

void hxk_attention_block_backward(float *dq, float *dk, float *dv,
                                  const float *dout, const float *q,
                                  const int *q_pos, long nq_tok,
                                  const float *k, const float *v,
                                  const int *k_pos, long nk_tok,
                                  const float *lse, const float *delta,
                                  const int *kv_of, long nseq, int nq, int nkv,
                                  int hd, float *scratch) {
  struct tile_scratch t = carve(scratch, hd);
  for (long s = 0; s < nseq; s++)
    for (int h = 0; h < nq; h++) {
      struct head_job job = job_for(q, q_pos, nq_tok, k, v, k_pos, nk_tok, s,
                                    h, kv_of[h], nq, nkv, hd);
      long qoff = s * nq_tok * job.ldq + (long)h * hd;
      long kvoff = s * nk_tok * job.ldkv + (long)kv_of[h] * hd;
      long row0 = s * nq_tok;
      struct head_grads g = {dq + qoff,          dk + kvoff,
                             dv + kvoff,         dout + qoff,
                             lse + row0 * nq + h, delta + row0 * nq + h,
                             nq};
      backward_head(&job, &g, &t);
    }
}

/* The local hook: queries and keys are the rank's own tokens. */
static long local_saved_floats(long nseq, void *arg) {
  const struct hxk_attention_local *l = arg;
  return nseq * l->local_len * l->nq;
}

static long local_scratch_floats(long nseq, void *arg) {
  const struct hxk_attention_local *l = arg;
  return hxk_attention_block_scratch_floats(l->local_len, l->local_len, l->nq,
                                            l->hd) +
         nseq * l->local_len * l->nq;
}

static void local_forward(float *o, const float *q, const float *k,
                          const float *v, long nseq, float *saved,
                          float *scratch, void *arg) {
  const struct hxk_attention_local *l = arg;
  hxk_attention_block_forward(o, saved, q, l->positions, l->local_len, k, v,
                              l->positions, l->local_len, l->kv_of, nseq,
                              l->nq, l->nkv, l->hd, true, scratch);
}

static void local_backward(float *dq, float *dk, float *dv, const float *dout,
                           const float *q, const float *k, const float *v,
                           const float *o, const float *saved, long nseq,
                           float *scratch, void *arg) {
  const struct hxk_attention_local *l = arg;
  float *delta = scratch + hxk_attention_block_scratch_floats(
                               l->local_len, l->local_len, l->nq, l->hd);
  hxk_attention_block_delta(delta, dout, o, nseq * l->local_len, l->nq, l->hd);
  hxk_attention_block_backward(dq, dk, dv, dout, q, l->positions, l->local_len,
                               k, v, l->positions, l->local_len, saved, delta,
                               l->kv_of, nseq, l->nq, l->nkv, l->hd, scratch);
}

void hxk_attention_hook_local(struct hxk_attention_hook *hook,
                              struct hxk_attention_local *local) {
  hook->saved_floats = local_saved_floats;
  hook->scratch_floats = local_scratch_floats;
  hook->forward = local_forward;
  hook->backward = local_backward;
  hook->arg = local;
}
