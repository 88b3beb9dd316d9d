/* Model head: final RMSNorm, LM head and cross-entropy, forward and backward
 * in one pass over chunks of tokens, so only one chunk's logits exist. */
#include <math.h>
#include <string.h>

#include "internal.h"
#include "llama.h"

long hxk_head_scratch_floats(const struct hxk_dims *d, long n) {
  long chunk = n < HXK_HEAD_CHUNK ? n : HXK_HEAD_CHUNK;
  return 2 * n * d->dim + n + chunk * d->vocab;
}

/* Loss of `rows` logit rows; when `to_grad`, each row is replaced in place by
 * scale * (softmax - onehot(target)), its gradient. */
static double xent_rows(float *logits, const int32_t *targets, long rows,
                        int vocab, double scale, bool to_grad) {
  double total = 0.0;
  for (long t = 0; t < rows; t++) {
    float *row = logits + t * vocab;
    double lse = hxk_log_sum_exp(row, vocab);
    total += lse - row[targets[t]];
    if (!to_grad)
      continue;
    for (int j = 0; j < vocab; j++)
      row[j] = (float)(scale * exp((double)row[j] - lse));
    row[targets[t]] -= (float)scale;
  }
  return total * scale;
}

double hxk_head_forward_backward(const struct hxk_dims *d,
                                 const struct hxk_head_params *w,
                                 const struct hxk_head_params *g,
                                 const float *x, const int32_t *targets, long n,
                                 double scale, float *dx, float *scratch) {
  int D = d->dim, V = d->vocab;
  bool backward = g != NULL && dx != NULL;
  float *xn = scratch, *dxn = scratch + n * D, *rstd = dxn + n * D;
  float *logits = rstd + n;
  hxk_rmsnorm_forward(xn, rstd, x, w->final_norm, n, D, d->norm_eps);
  if (backward)
    memset(dxn, 0, (size_t)(n * D) * sizeof *dxn);
  double loss = 0.0;
  for (long t0 = 0; t0 < n; t0 += HXK_HEAD_CHUNK) {
    long rows = n - t0 < HXK_HEAD_CHUNK ? n - t0 : HXK_HEAD_CHUNK;
    const float *xc = xn + t0 * D;
    hxk_linear_forward(logits, xc, w->lm_head, rows, D, V, 0.0f);
    loss += xent_rows(logits, targets + t0, rows, V, scale, backward);
    if (backward)
      hxk_linear_backward(dxn + t0 * D, g->lm_head, logits, xc, w->lm_head,
                          rows, D, V);
  }
  if (backward)
    hxk_rmsnorm_backward(dx, g->final_norm, dxn, x, w->final_norm, rstd, n, D);
  return loss;
}
