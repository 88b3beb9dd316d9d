/* Shapes, TP shards, parameter ids, layout and the sharding-independent
 * initialisation of docs/model-spec.md. */
#include <math.h>
#include <string.h>

#include "llama.h"

bool hxk_dims_check(struct hxk_dims *d) {
  if (d->dim <= 0 || d->ffn <= 0 || d->heads <= 0 || d->kv_heads <= 0 ||
      d->vocab <= 0 || d->seq_len <= 0 || d->layers <= 0)
    return false;
  if (d->dim % d->heads != 0 || d->heads % d->kv_heads != 0)
    return false;
  int head_dim = d->dim / d->heads;
  if (head_dim % 2 != 0 || !(d->norm_eps > 0) || !(d->rope_theta > 0))
    return false;
  /* Llama 3's scaling divides by factor and by high - low */
  if (d->rope_factor != 0 &&
      (!(d->rope_factor > 0) || !(d->rope_low_freq_factor > 0) ||
       !(d->rope_high_freq_factor > d->rope_low_freq_factor) || d->rope_original_max_len <= 0))
    return false;
  d->head_dim = head_dim;
  return true;
}

bool hxk_shard_make(const struct hxk_dims *d, int q_begin, int q_end,
                    int ffn_begin, int ffn_end, struct hxk_shard *s) {
  if (q_begin < 0 || q_end > d->heads || q_begin >= q_end)
    return false;
  if (ffn_begin < 0 || ffn_end > d->ffn || ffn_begin >= ffn_end)
    return false;
  int group = d->heads / d->kv_heads;
  s->q_begin = q_begin;
  s->q_end = q_end;
  s->kv_begin = q_begin / group;
  s->kv_end = (q_end - 1) / group + 1;
  s->ffn_begin = ffn_begin;
  s->ffn_end = ffn_end;
  return true;
}

int hxk_kv_owner_count(const struct hxk_dims *d, const int *q_bounds,
                       int degree, int kv) {
  int group = d->heads / d->kv_heads;
  int owners = 0;
  for (int r = 0; r < degree; r++) {
    int first_kv = q_bounds[r] / group;
    int last_kv = (q_bounds[r + 1] - 1) / group;
    if (q_bounds[r + 1] > q_bounds[r] && first_kv <= kv && kv <= last_kv)
      owners++;
  }
  return owners;
}

void hxk_kv_map(int *kv_of, const struct hxk_dims *d,
                const struct hxk_shard *s) {
  int group = d->heads / d->kv_heads;
  for (int h = s->q_begin; h < s->q_end; h++)
    kv_of[h - s->q_begin] = h / group - s->kv_begin;
}

uint64_t hxk_param_id(enum hxk_param p, int layer) {
  switch (p) {
  case HXK_TOK_EMB:
    return 0;
  case HXK_FINAL_NORM:
    return 1;
  case HXK_LM_HEAD:
    return 2;
  default:
    return 16 + 16 * (uint64_t)layer + (uint64_t)p;
  }
}

static bool is_norm(enum hxk_param p) {
  return p == HXK_ATTN_NORM || p == HXK_MLP_NORM || p == HXK_FINAL_NORM;
}

double hxk_param_std(enum hxk_param p, int layers) {
  if (is_norm(p))
    return 0.0;
  if (p == HXK_WO || p == HXK_W_DOWN)
    return 0.02 / sqrt(2.0 * layers);
  return 0.02;
}

bool hxk_param_decays(enum hxk_param p) { return !is_norm(p); }

void hxk_param_shape(const struct hxk_dims *d, enum hxk_param p, long *rows,
                     long *cols) {
  long D = d->dim, hd = d->head_dim;
  switch (p) {
  case HXK_ATTN_NORM:
  case HXK_MLP_NORM:
  case HXK_FINAL_NORM:
    *rows = 1, *cols = D;
    return;
  case HXK_WQ:
    *rows = d->heads * hd, *cols = D;
    return;
  case HXK_WK:
  case HXK_WV:
    *rows = d->kv_heads * hd, *cols = D;
    return;
  case HXK_WO:
    *rows = D, *cols = d->heads * hd;
    return;
  case HXK_W_GATE:
  case HXK_W_UP:
    *rows = d->ffn, *cols = D;
    return;
  case HXK_W_DOWN:
    *rows = D, *cols = d->ffn;
    return;
  case HXK_TOK_EMB:
  case HXK_LM_HEAD:
  default:
    *rows = d->vocab, *cols = D;
    return;
  }
}

void hxk_param_slice(const struct hxk_dims *d, const struct hxk_shard *s,
                     enum hxk_param p, long *r0, long *r1, long *c0,
                     long *c1) {
  long rows, cols, hd = d->head_dim;
  hxk_param_shape(d, p, &rows, &cols);
  *r0 = 0, *r1 = rows, *c0 = 0, *c1 = cols;
  switch (p) {
  case HXK_WQ:
    *r0 = s->q_begin * hd, *r1 = s->q_end * hd;
    break;
  case HXK_WK:
  case HXK_WV:
    *r0 = s->kv_begin * hd, *r1 = s->kv_end * hd;
    break;
  case HXK_WO:
    *c0 = s->q_begin * hd, *c1 = s->q_end * hd;
    break;
  case HXK_W_GATE:
  case HXK_W_UP:
    *r0 = s->ffn_begin, *r1 = s->ffn_end;
    break;
  case HXK_W_DOWN:
    *c0 = s->ffn_begin, *c1 = s->ffn_end;
    break;
  default:
    break;
  }
}

uint64_t hxk_splitmix64(uint64_t x) {
  uint64_t z = x + 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

/* The spec's uniform draw in (0, 1): 53 random bits, centred in their cell. */
static double uniform_draw(uint64_t key, uint64_t n) {
  return ((double)(hxk_splitmix64(key + n) >> 11) + 0.5) * 0x1p-53;
}

void hxk_init_tensor(float *dst, uint64_t seed, uint64_t tensor_id, long cols,
                     long r0, long r1, long c0, long c1, double std) {
  const double two_pi = 6.283185307179586476925286766559;
  uint64_t key = hxk_splitmix64(seed * 0x100000001B3ull + tensor_id);
  long width = c1 - c0;
  for (long r = r0; r < r1; r++) {
    for (long c = c0; c < c1; c++) {
      uint64_t i = (uint64_t)r * (uint64_t)cols + (uint64_t)c;
      double u0 = uniform_draw(key, 2 * i), u1 = uniform_draw(key, 2 * i + 1);
      double normal = sqrt(-2.0 * log(u0)) * cos(two_pi * u1);
      dst[(r - r0) * width + (c - c0)] = (float)(std * normal);
    }
  }
}

void hxk_init_param(float *dst, const struct hxk_dims *d,
                    const struct hxk_shard *s, uint64_t seed,
                    enum hxk_param p, int layer) {
  long rows, cols, r0, r1, c0, c1;
  hxk_param_shape(d, p, &rows, &cols);
  hxk_param_slice(d, s, p, &r0, &r1, &c0, &c1);
  if (is_norm(p)) {
    for (long i = 0; i < (r1 - r0) * (c1 - c0); i++)
      dst[i] = 1.0f;
    return;
  }
  hxk_init_tensor(dst, seed, hxk_param_id(p, layer), cols, r0, r1, c0, c1,
                  hxk_param_std(p, d->layers));
}

long hxk_layer_param_floats(const struct hxk_dims *d,
                            const struct hxk_shard *s, enum hxk_param p) {
  long r0, r1, c0, c1;
  hxk_param_slice(d, s, p, &r0, &r1, &c0, &c1);
  return (r1 - r0) * (c1 - c0);
}

long hxk_layer_floats(const struct hxk_dims *d, const struct hxk_shard *s) {
  long total = 0;
  for (int p = 0; p < HXK_LAYER_NPARAMS; p++)
    total += hxk_layer_param_floats(d, s, (enum hxk_param)p);
  return total;
}

void hxk_layer_bind(struct hxk_layer_params *p, float *base,
                    const struct hxk_dims *d, const struct hxk_shard *s) {
  float **slots[HXK_LAYER_NPARAMS] = {
      &p->attn_norm, &p->wq,     &p->wk,   &p->wv,    &p->wo,
      &p->mlp_norm,  &p->w_gate, &p->w_up, &p->w_down};
  for (int j = 0; j < HXK_LAYER_NPARAMS; j++) {
    *slots[j] = base;
    base += hxk_layer_param_floats(d, s, (enum hxk_param)j);
  }
}

void hxk_layer_decay_mask(uint8_t *mask, const struct hxk_dims *d,
                          const struct hxk_shard *s) {
  for (int j = 0; j < HXK_LAYER_NPARAMS; j++) {
    long n = hxk_layer_param_floats(d, s, (enum hxk_param)j);
    memset(mask, hxk_param_decays((enum hxk_param)j) ? 1 : 0, (size_t)n);
    mask += n;
  }
}
