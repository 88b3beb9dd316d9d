/* AdamW, global-norm clipping pieces and the warmup + cosine schedule. */
#include <math.h>
#include <stddef.h>

#include "llama.h"

void hxk_adamw_step(float *w, const float *g, float *m, float *v,
                    const uint8_t *decay_mask, long n,
                    const struct hxk_adamw *hp, long step, double lr) {
  double t = (double)step + 1.0;
  /* Bias corrections in double: beta2^t stays close to 1 for many steps. */
  float inv_bc1 = (float)(1.0 / (1.0 - pow(hp->beta1, t)));
  float inv_bc2 = (float)(1.0 / (1.0 - pow(hp->beta2, t)));
  float b1 = (float)hp->beta1, b2 = (float)hp->beta2;
  float eps = (float)hp->eps, lr_f = (float)lr;
  float decay = (float)hp->weight_decay;
  for (long i = 0; i < n; i++) {
    m[i] = b1 * m[i] + (1.0f - b1) * g[i];
    v[i] = b2 * v[i] + (1.0f - b2) * g[i] * g[i];
    float m_hat = m[i] * inv_bc1, v_hat = v[i] * inv_bc2;
    float lambda = (decay_mask == NULL || decay_mask[i]) ? decay : 0.0f;
    w[i] -= lr_f * (m_hat / (sqrtf(v_hat) + eps) + lambda * w[i]);
  }
}

double hxk_sum_squares(const float *buf, long n) {
  double sum = 0.0;
  for (long i = 0; i < n; i++)
    sum += (double)buf[i] * buf[i];
  return sum;
}

double hxk_clip_factor(double global_sumsq, double grad_clip) {
  double norm = sqrt(global_sumsq);
  if (grad_clip > 0 && norm > grad_clip)
    return grad_clip / norm;
  return 1.0;
}

void hxk_scale(float *buf, long n, float factor) {
  for (long i = 0; i < n; i++)
    buf[i] *= factor;
}

double hxk_lr_at(long step, double lr, long warmup_steps, long steps) {
  if (step < warmup_steps)
    return lr * (double)(step + 1) / (double)warmup_steps;
  const double pi = 3.14159265358979323846;
  double lr_min = lr / 10.0;
  long span = steps - warmup_steps > 1 ? steps - warmup_steps : 1;
  double progress = (double)(step - warmup_steps) / (double)span;
  return lr_min + 0.5 * (1.0 + cos(pi * progress)) * (lr - lr_min);
}
