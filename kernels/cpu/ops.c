/* Element-wise and matrix kernels of the decoder: embedding, RMSNorm, RoPE,
 * SwiGLU, linear layers over cblas_sgemm, residual adds, cross-entropy. */
#include <cblas.h>
#include <math.h>

#include "internal.h"
#include "llama.h"

void hxk_embedding_forward(float *out, const int32_t *tok, const float *emb,
                           long n, int dim) {
  for (long t = 0; t < n; t++) {
    const float *row = emb + (long)tok[t] * dim;
    for (int i = 0; i < dim; i++)
      out[t * dim + i] = row[i];
  }
}

void hxk_embedding_backward(float *demb, const int32_t *tok, const float *dout,
                            long n, int dim) {
  for (long t = 0; t < n; t++) {
    float *row = demb + (long)tok[t] * dim;
    for (int i = 0; i < dim; i++)
      row[i] += dout[t * dim + i];
  }
}

void hxk_rmsnorm_forward(float *out, float *rstd, const float *x,
                         const float *g, long n, int dim, float eps) {
  for (long t = 0; t < n; t++) {
    const float *xt = x + t * dim;
    double sumsq = 0.0; /* double: D terms of one sign, no cancellation but long sums */
    for (int i = 0; i < dim; i++)
      sumsq += (double)xt[i] * xt[i];
    float r = (float)(1.0 / sqrt(sumsq / dim + eps));
    rstd[t] = r;
    for (int i = 0; i < dim; i++)
      out[t * dim + i] = g[i] * (xt[i] * r);
  }
}

void hxk_rmsnorm_backward(float *dx, float *dg, const float *dout,
                          const float *x, const float *g, const float *rstd,
                          long n, int dim) {
  for (long t = 0; t < n; t++) {
    const float *xt = x + t * dim, *dt = dout + t * dim;
    float r = rstd[t];
    double dot = 0.0; /* sum_j g_j dout_j xh_j */
    for (int i = 0; i < dim; i++)
      dot += (double)g[i] * dt[i] * (xt[i] * r);
    float mean_dot = (float)(dot / dim);
    for (int i = 0; i < dim; i++) {
      float xh = xt[i] * r;
      dg[i] += dt[i] * xh;
      dx[t * dim + i] += r * (g[i] * dt[i] - xh * mean_dot);
    }
  }
}

long hxk_rope_table_floats(const struct hxk_dims *d) {
  return (long)d->seq_len * d->head_dim;
}

/* Pair i's angle per position, theta^(-2i/hd), after Llama 3's scaling
 * when d has one (transformers' _compute_llama3_parameters, in double). */
static double rope_inv_freq(const struct hxk_dims *d, int i) {
  double inv_freq = pow(d->rope_theta, -2.0 * i / d->head_dim);
  if (!(d->rope_factor > 0))
    return inv_freq;
  double old_len = d->rope_original_max_len;
  double wavelen = 2 * M_PI / inv_freq;
  if (wavelen < old_len / d->rope_high_freq_factor)
    return inv_freq;
  if (wavelen > old_len / d->rope_low_freq_factor)
    return inv_freq / d->rope_factor;
  double smooth = (old_len / wavelen - d->rope_low_freq_factor) /
                  (d->rope_high_freq_factor - d->rope_low_freq_factor);
  return (1 - smooth) * inv_freq / d->rope_factor + smooth * inv_freq;
}

void hxk_rope_table(float *tab, const struct hxk_dims *d) {
  int half = d->head_dim / 2;
  for (int t = 0; t < d->seq_len; t++) {
    for (int i = 0; i < half; i++) {
      double phi = t * rope_inv_freq(d, i);
      tab[((long)t * half + i) * 2] = (float)cos(phi);
      tab[((long)t * half + i) * 2 + 1] = (float)sin(phi);
    }
  }
}

/* Rotates every head of token rows by +phi (sign 1) or -phi (sign -1); row
 * tok = s*local_len + i sits at position pos[i] (pos NULL: i). */
static void rope_rotate(float *x, const float *tab, long n, int nheads, int hd,
                        const int *pos, long local_len, float sign) {
  int half = hd / 2;
  for (long tok = 0; tok < n; tok++) {
    long i = tok % local_len;
    const float *cs = tab + (pos ? pos[i] : i) * (long)hd;
    float *row = x + tok * (long)nheads * hd;
    for (int h = 0; h < nheads; h++) {
      float *head = row + (long)h * hd;
      for (int i = 0; i < half; i++) {
        float c = cs[2 * i], s = sign * cs[2 * i + 1];
        float x0 = head[2 * i], x1 = head[2 * i + 1];
        head[2 * i] = x0 * c - x1 * s;
        head[2 * i + 1] = x0 * s + x1 * c;
      }
    }
  }
}

void hxk_rope_forward(float *x, const float *tab, long n, int nheads, int hd,
                      int seq_len) {
  rope_rotate(x, tab, n, nheads, hd, NULL, seq_len, 1.0f);
}

void hxk_rope_backward_inplace(float *dy, const float *tab, long n, int nheads,
                               int hd, int seq_len) {
  /* The rotation is orthogonal: its transpose is the rotation by -phi. */
  rope_rotate(dy, tab, n, nheads, hd, NULL, seq_len, -1.0f);
}

void hxk_rope_forward_pos(float *x, const float *tab, long n, int nheads,
                          int hd, const int *pos, long local_len) {
  rope_rotate(x, tab, n, nheads, hd, pos, local_len, 1.0f);
}

void hxk_rope_backward_pos_inplace(float *dy, const float *tab, long n,
                                   int nheads, int hd, const int *pos,
                                   long local_len) {
  rope_rotate(dy, tab, n, nheads, hd, pos, local_len, -1.0f);
}

void hxk_rope_backward(float *dx, const float *dy, const float *tab, long n,
                       int nheads, int hd, int seq_len) {
  int half = hd / 2;
  for (long tok = 0; tok < n; tok++) {
    const float *cs = tab + (tok % seq_len) * (long)hd;
    long base = tok * (long)nheads * hd;
    for (int h = 0; h < nheads; h++) {
      for (int i = 0; i < half; i++) {
        long at = base + (long)h * hd + 2 * i;
        float c = cs[2 * i], s = cs[2 * i + 1];
        dx[at] += dy[at] * c + dy[at + 1] * s;
        dx[at + 1] += -dy[at] * s + dy[at + 1] * c;
      }
    }
  }
}

static float sigmoid(float z) { return 1.0f / (1.0f + expf(-z)); }

void hxk_swiglu_forward(float *h, const float *g, const float *u, long n) {
  for (long i = 0; i < n; i++)
    h[i] = g[i] * sigmoid(g[i]) * u[i];
}

void hxk_swiglu_backward(float *dg, float *du, const float *dh, const float *g,
                         const float *u, long n) {
  for (long i = 0; i < n; i++) {
    float s = sigmoid(g[i]);
    float silu = g[i] * s;
    dg[i] += dh[i] * u[i] * s * (1.0f + g[i] * (1.0f - s));
    du[i] += dh[i] * silu;
  }
}

void hxk_linear_forward(float *y, const float *x, const float *w, long n,
                        int in, int out, float beta) {
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)n, out, in, 1.0f,
              x, in, w, in, beta, y, out);
}

void hxk_linear_backward(float *dx, float *dw, const float *dy, const float *x,
                         const float *w, long n, int in, int out) {
  if (dx)
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)n, in, out,
                1.0f, dy, out, w, in, 1.0f, dx, in);
  cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, out, in, (int)n, 1.0f,
              dy, out, x, in, 1.0f, dw, in);
}

void hxk_residual_forward(float *y, const float *a, const float *b, long n) {
  for (long i = 0; i < n; i++)
    y[i] = a[i] + b[i];
}

void hxk_residual_backward(float *da, float *db, const float *dy, long n) {
  for (long i = 0; i < n; i++) {
    da[i] += dy[i];
    db[i] += dy[i];
  }
}

double hxk_log_sum_exp(const float *row, int vocab) {
  float peak = row[0];
  for (int j = 1; j < vocab; j++)
    peak = row[j] > peak ? row[j] : peak;
  double sum = 0.0;
  for (int j = 0; j < vocab; j++)
    sum += exp((double)row[j] - peak);
  return peak + log(sum);
}

double hxk_cross_entropy_forward(const float *logits, const int32_t *targets,
                                 long n, int vocab, double scale) {
  double total = 0.0;
  for (long t = 0; t < n; t++) {
    const float *row = logits + t * vocab;
    total += hxk_log_sum_exp(row, vocab) - row[targets[t]];
  }
  return total * scale;
}

void hxk_cross_entropy_backward(float *dlogits, const float *logits,
                                const int32_t *targets, long n, int vocab,
                                double scale) {
  for (long t = 0; t < n; t++) {
    const float *row = logits + t * vocab;
    float *drow = dlogits + t * vocab;
    double lse = hxk_log_sum_exp(row, vocab);
    for (int j = 0; j < vocab; j++)
      drow[j] += (float)(scale * exp((double)row[j] - lse));
    drow[targets[t]] -= (float)scale;
  }
}
