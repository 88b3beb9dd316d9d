/* ref_llama: an independent, plain double-precision implementation of the
 * training computation of docs/model-spec.md (Llama forward and backward,
 * cross-entropy, AdamW with clipping and the warmup + cosine schedule, the
 * spec's initialisation RNG and batching).
 *
 * It is written from that page only and shares no code with kernels/ or
 * rtlib/: the point is that two implementations written apart agree, so a
 * misreading of the spec or a bug in either shows up as a loss mismatch.
 * Everything is double precision and straightforward loops (libc and libm
 * only), one sequence at a time, so it is slow but easy to check by eye.
 *
 * Modes:
 *   ref_llama [shape and train options]                 train, print losses
 *   ref_llama --grad-check=N [shape options]            finite-difference check
 * Run with --help for the options. */
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PI 3.14159265358979323846

/* ---------------------------------------------------------------- config */

struct shape {
  long layers, hidden, ffn, heads, kv_heads, vocab, seq_len;
  long head_dim; /* hidden / heads */
  double rope_theta, norm_eps;
  bool tie_embeddings;
};

struct train {
  long global_batch;
  double lr, beta1, beta2, eps, weight_decay, grad_clip;
  long warmup_steps;
  long steps;     /* the schedule's length (lr decays to lr/10 at `steps`) */
  long run_steps; /* how many of them to run (default: all) */
  uint64_t seed;
  const char *data; /* NULL: the spec's synthetic tokens */
  double init_scale; /* multiplies every init std; 1 except in --grad-check */
};

static void die(const char *msg, const char *detail) {
  fprintf(stderr, "ref_llama: error: %s%s%s\n", msg, detail ? ": " : "", detail ? detail : "");
  exit(2);
}

static void *xcalloc(size_t count, size_t size) {
  void *p = calloc(count ? count : 1, size);
  if (!p)
    die("out of memory", NULL);
  return p;
}

/* ------------------------------------------------------------ the RNG */

static uint64_t splitmix64(uint64_t x) {
  uint64_t z = x + 0x9E3779B97F4A7C15ULL;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

/* u(n) of the spec: in (0, 1), never 0, so log(u) is finite. */
static double uniform_draw(uint64_t key, uint64_t n) {
  return ((double)(splitmix64(key + n) >> 11) + 0.5) * 0x1p-53;
}

/* ---------------------------------------------------- parameter layout */

enum layer_tensor {
  ATTN_NORM, WQ, WK, WV, WO, MLP_NORM, W_GATE, W_UP, W_DOWN, LAYER_TENSORS
};

struct tensor {
  char name[32];
  size_t offset, size;
  uint64_t init_id;
  bool is_norm;   /* gains: init to ones, no weight decay */
  double std;     /* init std of matrices */
};

/* All parameters live in one flat array in the spec's order, so the global
 * gradient norm and AdamW are single loops. */
struct layout {
  struct tensor *tensors;
  int count;
  size_t total;
  int tok_emb, final_norm, lm_head; /* indices into tensors; lm_head -1 when tied */
  int first_layer;                  /* index of layer 0's attn_norm */
};

static int add_tensor(struct layout *lay, const char *name, size_t size, uint64_t id,
                      bool is_norm, double std) {
  struct tensor *t = &lay->tensors[lay->count];
  snprintf(t->name, sizeof t->name, "%s", name);
  t->offset = lay->total;
  t->size = size;
  t->init_id = id;
  t->is_norm = is_norm;
  t->std = std;
  lay->total += size;
  return lay->count++;
}

static struct layout make_layout(const struct shape *s) {
  struct layout lay = {0};
  lay.tensors = xcalloc((size_t)(3 + LAYER_TENSORS * s->layers), sizeof *lay.tensors);
  size_t D = (size_t)s->hidden, F = (size_t)s->ffn, V = (size_t)s->vocab;
  size_t qdim = (size_t)(s->heads * s->head_dim), kvdim = (size_t)(s->kv_heads * s->head_dim);
  double std = 0.02, std_out = 0.02 / sqrt(2.0 * (double)s->layers);
  lay.tok_emb = add_tensor(&lay, "tok_emb", V * D, 0, false, std);
  lay.first_layer = lay.count;
  static const char *names[LAYER_TENSORS] = {"attn_norm", "wq",     "wk",   "wv",    "wo",
                                             "mlp_norm",  "w_gate", "w_up", "w_down"};
  const size_t sizes[LAYER_TENSORS] = {D, qdim * D, kvdim * D, kvdim * D, D * qdim,
                                       D, F * D,    F * D,     D * F};
  for (long l = 0; l < s->layers; l++)
    for (int j = 0; j < LAYER_TENSORS; j++) {
      char name[32];
      snprintf(name, sizeof name, "l%ld.%s", l, names[j]);
      bool norm = j == ATTN_NORM || j == MLP_NORM;
      double tstd = (j == WO || j == W_DOWN) ? std_out : std;
      add_tensor(&lay, name, sizes[j], (uint64_t)(16 + 16 * l + j), norm, tstd);
    }
  lay.final_norm = add_tensor(&lay, "final_norm", D, 1, true, 0.0);
  lay.lm_head = s->tie_embeddings ? -1 : add_tensor(&lay, "lm_head", V * D, 2, false, std);
  return lay;
}

static double *tensor_ptr(const struct layout *lay, double *base, int index) {
  return base + lay->tensors[index].offset;
}

static double *layer_ptr(const struct layout *lay, double *base, long layer, enum layer_tensor j) {
  return tensor_ptr(lay, base, lay->first_layer + (int)layer * LAYER_TENSORS + (int)j);
}

/* The logits' weight: lm_head, or tok_emb when tied. */
static double *head_ptr(const struct layout *lay, double *base) {
  return tensor_ptr(lay, base, lay->lm_head >= 0 ? lay->lm_head : lay->tok_emb);
}

/* Element i of a tensor is std * normal(i) from the tensor's own key, so the
 * value does not depend on how a plan shards the tensor. */
static void init_params(const struct layout *lay, double *w, uint64_t seed, double scale) {
  for (int t = 0; t < lay->count; t++) {
    const struct tensor *ten = &lay->tensors[t];
    double *p = w + ten->offset;
    if (ten->is_norm) {
      for (size_t i = 0; i < ten->size; i++)
        p[i] = 1.0;
      continue;
    }
    uint64_t key = splitmix64(seed * 0x100000001B3ULL + ten->init_id);
    for (size_t i = 0; i < ten->size; i++) {
      double u1 = uniform_draw(key, 2 * (uint64_t)i), u2 = uniform_draw(key, 2 * (uint64_t)i + 1);
      p[i] = scale * ten->std * sqrt(-2.0 * log(u1)) * cos(2.0 * PI * u2);
    }
  }
}

/* ---------------------------------------------------------------- data */

struct tokens {
  uint32_t *tok;
  size_t count;
};

static bool read_whole_file(const char *path, unsigned char **bytes, size_t *size) {
  FILE *f = fopen(path, "rb");
  if (!f)
    return false;
  size_t cap = 1 << 16, len = 0;
  unsigned char *buf = xcalloc(cap, 1);
  size_t got;
  while ((got = fread(buf + len, 1, cap - len, f)) > 0) {
    len += got;
    if (len == cap) {
      cap *= 2;
      buf = realloc(buf, cap);
      if (!buf)
        die("out of memory", NULL);
    }
  }
  bool ok = !ferror(f);
  fclose(f);
  *bytes = buf;
  *size = len;
  return ok;
}

static uint32_t read_le32(const unsigned char *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* llm.c shard (256 x int32 header: magic, version, token count; then uint16
 * tokens for 20240520/1 or uint32 tokens for 20240801/7), else raw uint16. */
static struct tokens load_tokens(const char *path, long vocab) {
  unsigned char *bytes;
  size_t size;
  if (!read_whole_file(path, &bytes, &size))
    die("cannot read the data file", path);
  size_t header = 0, width = 2, count;
  uint32_t magic = size >= 1024 ? read_le32(bytes) : 0;
  uint32_t version = size >= 1024 ? read_le32(bytes + 4) : 0;
  if ((magic == 20240520 && version == 1) || (magic == 20240801 && version == 7)) {
    header = 1024;
    width = magic == 20240520 ? 2 : 4;
    count = read_le32(bytes + 8);
    if ((size - header) / width < count)
      die("the shard is shorter than its header's token count", path);
  } else {
    if (size % 2)
      die("not an llm.c shard and an odd size for raw uint16 tokens", path);
    count = size / 2;
  }
  struct tokens t = {xcalloc(count, sizeof(uint32_t)), count};
  for (size_t k = 0; k < count; k++) {
    const unsigned char *p = bytes + header + k * width;
    t.tok[k] = width == 2 ? (uint32_t)(p[0] | p[1] << 8) : read_le32(p);
    if (t.tok[k] >= (uint64_t)vocab) {
      fprintf(stderr, "ref_llama: error: token %" PRIu32 " at index %zu is >= vocab %ld\n",
              t.tok[k], k, vocab);
      exit(2);
    }
  }
  free(bytes);
  return t;
}

/* The spec writes `splitmix64(seed ^ 0x5EED + k)`; read as C, + binds
 * tighter than ^, so that is seed ^ (0x5EED + k). */
static struct tokens synthetic_tokens(uint64_t seed, long vocab) {
  struct tokens t = {xcalloc((size_t)1 << 20, sizeof(uint32_t)), (size_t)1 << 20};
  for (size_t k = 0; k < t.count; k++)
    t.tok[k] = (uint32_t)(splitmix64(seed ^ (0x5EEDULL + k)) % (uint64_t)vocab);
  return t;
}

/* Start of sequence j of optimizer step s: every plan reads the same ones. */
static size_t sequence_offset(const struct tokens *data, long step, long j, long batch, long T) {
  uint64_t g = (uint64_t)step * (uint64_t)batch + (uint64_t)j;
  return (size_t)((g * (uint64_t)T) % (uint64_t)(data->count - (size_t)T - 1));
}

/* ------------------------------------------------------- dense kernels */

/* Dot product with four partial sums: fixed order, so results are
 * reproducible, and fast enough that 10 steps of a tiny model take seconds. */
static double dot(const double *a, const double *b, size_t n) {
  double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
  size_t i = 0;
  for (; i + 4 <= n; i += 4) {
    s0 += a[i] * b[i];
    s1 += a[i + 1] * b[i + 1];
    s2 += a[i + 2] * b[i + 2];
    s3 += a[i + 3] * b[i + 3];
  }
  for (; i < n; i++)
    s0 += a[i] * b[i];
  return (s0 + s1) + (s2 + s3);
}

static void axpy(double *y, double alpha, const double *x, size_t n) {
  for (size_t i = 0; i < n; i++)
    y[i] += alpha * x[i];
}

/* y[T, out] = x[T, in] W^T, W [out, in] */
static void linear_fwd(double *y, const double *x, const double *W, size_t T, size_t in,
                       size_t out) {
  for (size_t t = 0; t < T; t++)
    for (size_t o = 0; o < out; o++)
      y[t * out + o] = dot(x + t * in, W + o * in, in);
}

/* dx = dy W (added to dx when accumulate, else overwritten); dW += dy^T x */
static void linear_bwd(double *dx, bool accumulate, double *dW, const double *dy, const double *x,
                       const double *W, size_t T, size_t in, size_t out) {
  if (!accumulate)
    memset(dx, 0, T * in * sizeof *dx);
  for (size_t t = 0; t < T; t++)
    for (size_t o = 0; o < out; o++) {
      double g = dy[t * out + o];
      axpy(dx + t * in, g, W + o * in, in);
      axpy(dW + o * in, g, x + t * in, in);
    }
}

/* y_i = g_i x_i r, r = 1 / sqrt(mean(x^2) + eps); keeps r per row. */
static void rmsnorm_fwd(double *y, double *rinv, const double *x, const double *g, size_t T,
                        size_t D, double eps) {
  for (size_t t = 0; t < T; t++) {
    const double *xr = x + t * D;
    double r = 1.0 / sqrt(dot(xr, xr, D) / (double)D + eps);
    rinv[t] = r;
    for (size_t i = 0; i < D; i++)
      y[t * D + i] = g[i] * xr[i] * r;
  }
}

/* dg_i += dy_i x_i r; dx_i = r g_i dy_i - r^3 x_i (sum_j g_j dy_j x_j) / D,
 * since dr/dx_j = -r^3 x_j / D. dx is added to: every norm's input is also
 * the residual stream, whose gradient is already there. */
static void rmsnorm_bwd(double *dx, double *dg, const double *dy, const double *x,
                        const double *rinv, const double *g, size_t T, size_t D) {
  for (size_t t = 0; t < T; t++) {
    const double *xr = x + t * D, *dyr = dy + t * D;
    double r = rinv[t], weighted = 0;
    for (size_t i = 0; i < D; i++) {
      weighted += g[i] * dyr[i] * xr[i];
      dg[i] += dyr[i] * xr[i] * r;
    }
    double coef = r * r * r * weighted / (double)D;
    for (size_t i = 0; i < D; i++)
      dx[t * D + i] += r * g[i] * dyr[i] - coef * xr[i];
  }
}

/* Rotate interleaved pairs (2i, 2i+1) of every head by sign * phi,
 * phi = t theta^(-2i/hd). The backward pass is the rotation by -phi (the
 * transpose of a rotation), so sign = -1 maps output gradients to inputs. */
static void rope(double *x, size_t T, size_t nheads, size_t hd, double theta, double sign) {
  for (size_t t = 0; t < T; t++)
    for (size_t i = 0; i < hd / 2; i++) {
      double phi = (double)t * pow(theta, -2.0 * (double)i / (double)hd);
      double c = cos(phi), s = sign * sin(phi);
      for (size_t h = 0; h < nheads; h++) {
        double *p = x + t * nheads * hd + h * hd + 2 * i;
        double x0 = p[0], x1 = p[1];
        p[0] = x0 * c - x1 * s;
        p[1] = x0 * s + x1 * c;
      }
    }
}

static double silu(double z) { return z / (1.0 + exp(-z)); }

/* d silu / dz = sig(z) (1 + z (1 - sig(z))) */
static double silu_grad(double z) {
  double sig = 1.0 / (1.0 + exp(-z));
  return sig * (1.0 + z * (1.0 - sig));
}

/* ------------------------------------------------------------- attention */

struct attn_dims {
  size_t T, H, K, hd;
};

/* o_t = sum_{u<=t} softmax_u(q_t.k_u / sqrt(hd)) v_u per query head h, which
 * reads kv head h / (H/K). probs [H, T, T] keeps the softmax for backward. */
static void attention_fwd(double *o, double *probs, const double *q, const double *k,
                          const double *v, struct attn_dims d) {
  size_t qs = d.H * d.hd, ks = d.K * d.hd, group = d.H / d.K;
  double scale = 1.0 / sqrt((double)d.hd);
  memset(o, 0, d.T * qs * sizeof *o);
  for (size_t h = 0; h < d.H; h++) {
    size_t kvh = h / group;
    for (size_t t = 0; t < d.T; t++) {
      double *p = probs + (h * d.T + t) * d.T;
      const double *qt = q + t * qs + h * d.hd;
      double maxs = -INFINITY, sum = 0;
      for (size_t u = 0; u <= t; u++) {
        p[u] = dot(qt, k + u * ks + kvh * d.hd, d.hd) * scale;
        maxs = p[u] > maxs ? p[u] : maxs;
      }
      for (size_t u = 0; u <= t; u++) {
        p[u] = exp(p[u] - maxs);
        sum += p[u];
      }
      for (size_t u = 0; u < d.T; u++)
        p[u] = u <= t ? p[u] / sum : 0.0;
      for (size_t u = 0; u <= t; u++)
        axpy(o + t * qs + h * d.hd, p[u], v + u * ks + kvh * d.hd, d.hd);
    }
  }
}

/* dP_tu = do_t.v_u; dv_u += P_tu do_t; ds_tu = P_tu (dP_tu - sum_u' P_tu' dP_tu');
 * dq_t += ds_tu k_u / sqrt(hd); dk_u += ds_tu q_t / sqrt(hd). Outputs overwritten. */
static void attention_bwd(double *dq, double *dk, double *dv, const double *dout,
                          const double *probs, const double *q, const double *k, const double *v,
                          struct attn_dims d, double *dp_row) {
  size_t qs = d.H * d.hd, ks = d.K * d.hd, group = d.H / d.K;
  double scale = 1.0 / sqrt((double)d.hd);
  memset(dq, 0, d.T * qs * sizeof *dq);
  memset(dk, 0, d.T * ks * sizeof *dk);
  memset(dv, 0, d.T * ks * sizeof *dv);
  for (size_t h = 0; h < d.H; h++) {
    size_t kvh = h / group;
    for (size_t t = 0; t < d.T; t++) {
      const double *p = probs + (h * d.T + t) * d.T;
      const double *do_t = dout + t * qs + h * d.hd;
      double weighted = 0;
      for (size_t u = 0; u <= t; u++) {
        dp_row[u] = dot(do_t, v + u * ks + kvh * d.hd, d.hd);
        weighted += p[u] * dp_row[u];
        axpy(dv + u * ks + kvh * d.hd, p[u], do_t, d.hd);
      }
      for (size_t u = 0; u <= t; u++) {
        double ds = p[u] * (dp_row[u] - weighted) * scale;
        axpy(dq + t * qs + h * d.hd, ds, k + u * ks + kvh * d.hd, d.hd);
        axpy(dk + u * ks + kvh * d.hd, ds, q + t * qs + h * d.hd, d.hd);
      }
    }
  }
}

/* -------------------------------------------------- forward and backward */

struct model {
  struct shape s;
  struct layout lay;
};

/* What one decoder layer keeps from forward for backward, for one sequence. */
struct layer_cache {
  double *x_in;      /* [T, D] residual stream entering the layer */
  double *attn_rinv; /* [T] */
  double *a;         /* [T, D] attn_norm output */
  double *q, *k, *v; /* [T, H hd], [T, K hd], [T, K hd]; q and k after RoPE */
  double *probs;     /* [H, T, T] attention weights */
  double *o;         /* [T, H hd] attention output, heads concatenated */
  double *x_mid;     /* [T, D] residual after attention */
  double *mlp_rinv;  /* [T] */
  double *m;         /* [T, D] mlp_norm output */
  double *gate, *up; /* [T, F] before the gating */
  double *h;         /* [T, F] silu(gate) * up */
};

#define LAYER_CACHE_BUFFERS 14

static double **layer_cache_buffers(struct layer_cache *c, double **out) {
  double *all[LAYER_CACHE_BUFFERS] = {c->x_in, c->attn_rinv, c->a,     c->q,        c->k,
                                      c->v,    c->probs,     c->o,     c->x_mid,    c->mlp_rinv,
                                      c->m,    c->gate,      c->up,    c->h};
  memcpy(out, all, sizeof all);
  return out;
}

struct workspace {
  struct layer_cache *layers;
  double *x_final;    /* [T, D] residual stream leaving the last layer */
  double *final_rinv; /* [T] */
  double *n;          /* [T, D] final_norm output */
  double *probs;      /* [T, V] softmax of the logits */
  /* backward scratch, named by the gradient each holds */
  double *dx;     /* [T, D] gradient of the residual stream */
  double *dnorm;  /* [T, D] gradient of a norm's output (a, m or n) */
  double *dout;   /* [T, H hd] of the attention output */
  double *dq, *dk, *dv;
  double *dh, *dgate, *dup; /* [T, F] */
  double *dp_row;           /* [T] one row of d(attention weights) */
  double *dlogits;          /* [T, V] */
};

static void alloc_layer_cache(struct layer_cache *c, const struct shape *s) {
  size_t T = (size_t)s->seq_len, D = (size_t)s->hidden, F = (size_t)s->ffn;
  size_t H = (size_t)s->heads, qd = H * (size_t)s->head_dim;
  size_t kd = (size_t)(s->kv_heads * s->head_dim);
  c->x_in = xcalloc(T * D, sizeof(double));
  c->attn_rinv = xcalloc(T, sizeof(double));
  c->a = xcalloc(T * D, sizeof(double));
  c->q = xcalloc(T * qd, sizeof(double));
  c->k = xcalloc(T * kd, sizeof(double));
  c->v = xcalloc(T * kd, sizeof(double));
  c->probs = xcalloc(H * T * T, sizeof(double));
  c->o = xcalloc(T * qd, sizeof(double));
  c->x_mid = xcalloc(T * D, sizeof(double));
  c->mlp_rinv = xcalloc(T, sizeof(double));
  c->m = xcalloc(T * D, sizeof(double));
  c->gate = xcalloc(T * F, sizeof(double));
  c->up = xcalloc(T * F, sizeof(double));
  c->h = xcalloc(T * F, sizeof(double));
}

static struct workspace make_workspace(const struct shape *s) {
  size_t T = (size_t)s->seq_len, D = (size_t)s->hidden, F = (size_t)s->ffn;
  size_t V = (size_t)s->vocab, qd = (size_t)(s->heads * s->head_dim);
  size_t kd = (size_t)(s->kv_heads * s->head_dim);
  struct workspace w = {0};
  w.layers = xcalloc((size_t)s->layers, sizeof *w.layers);
  for (long l = 0; l < s->layers; l++)
    alloc_layer_cache(&w.layers[l], s);
  w.x_final = xcalloc(T * D, sizeof(double));
  w.final_rinv = xcalloc(T, sizeof(double));
  w.n = xcalloc(T * D, sizeof(double));
  w.probs = xcalloc(T * V, sizeof(double));
  w.dx = xcalloc(T * D, sizeof(double));
  w.dnorm = xcalloc(T * D, sizeof(double));
  w.dout = xcalloc(T * qd, sizeof(double));
  w.dq = xcalloc(T * qd, sizeof(double));
  w.dk = xcalloc(T * kd, sizeof(double));
  w.dv = xcalloc(T * kd, sizeof(double));
  w.dh = xcalloc(T * F, sizeof(double));
  w.dgate = xcalloc(T * F, sizeof(double));
  w.dup = xcalloc(T * F, sizeof(double));
  w.dp_row = xcalloc(T, sizeof(double));
  w.dlogits = xcalloc(T * V, sizeof(double));
  return w;
}

static void free_workspace(struct workspace *w, long layers) {
  for (long l = 0; l < layers; l++) {
    double *bufs[LAYER_CACHE_BUFFERS];
    layer_cache_buffers(&w->layers[l], bufs);
    for (int i = 0; i < LAYER_CACHE_BUFFERS; i++)
      free(bufs[i]);
  }
  free(w->layers);
  double *bufs[] = {w->x_final, w->final_rinv, w->n,     w->probs, w->dx,    w->dnorm,
                    w->dout,    w->dq,         w->dk,    w->dv,    w->dh,    w->dgate,
                    w->dup,     w->dp_row,     w->dlogits};
  for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
    free(bufs[i]);
}

static struct attn_dims attn_dims_of(const struct shape *s) {
  return (struct attn_dims){(size_t)s->seq_len, (size_t)s->heads, (size_t)s->kv_heads,
                            (size_t)s->head_dim};
}

/* One decoder layer, from c->x_in to x_out. */
static void layer_fwd(const struct model *M, double *w, long l, struct layer_cache *c,
                      double *x_out) {
  const struct shape *s = &M->s;
  const struct layout *lay = &M->lay;
  size_t T = (size_t)s->seq_len, D = (size_t)s->hidden, F = (size_t)s->ffn;
  size_t qd = (size_t)(s->heads * s->head_dim), kd = (size_t)(s->kv_heads * s->head_dim);
  rmsnorm_fwd(c->a, c->attn_rinv, c->x_in, layer_ptr(lay, w, l, ATTN_NORM), T, D, s->norm_eps);
  linear_fwd(c->q, c->a, layer_ptr(lay, w, l, WQ), T, D, qd);
  linear_fwd(c->k, c->a, layer_ptr(lay, w, l, WK), T, D, kd);
  linear_fwd(c->v, c->a, layer_ptr(lay, w, l, WV), T, D, kd);
  rope(c->q, T, (size_t)s->heads, (size_t)s->head_dim, s->rope_theta, 1.0);
  rope(c->k, T, (size_t)s->kv_heads, (size_t)s->head_dim, s->rope_theta, 1.0);
  attention_fwd(c->o, c->probs, c->q, c->k, c->v, attn_dims_of(s));
  linear_fwd(c->x_mid, c->o, layer_ptr(lay, w, l, WO), T, qd, D);
  for (size_t i = 0; i < T * D; i++)
    c->x_mid[i] += c->x_in[i];
  rmsnorm_fwd(c->m, c->mlp_rinv, c->x_mid, layer_ptr(lay, w, l, MLP_NORM), T, D, s->norm_eps);
  linear_fwd(c->gate, c->m, layer_ptr(lay, w, l, W_GATE), T, D, F);
  linear_fwd(c->up, c->m, layer_ptr(lay, w, l, W_UP), T, D, F);
  for (size_t i = 0; i < T * F; i++)
    c->h[i] = silu(c->gate[i]) * c->up[i];
  linear_fwd(x_out, c->h, layer_ptr(lay, w, l, W_DOWN), T, F, D);
  for (size_t i = 0; i < T * D; i++)
    x_out[i] += c->x_mid[i];
}

/* MLP half backward: ws->dx is dL/d(layer output) on entry and dL/d(x_mid)
 * on exit (the residual passes it through; the norm adds its part). */
static void mlp_bwd(const struct model *M, double *w, double *g, long l, struct layer_cache *c,
                    struct workspace *ws) {
  const struct shape *s = &M->s;
  const struct layout *lay = &M->lay;
  size_t T = (size_t)s->seq_len, D = (size_t)s->hidden, F = (size_t)s->ffn;
  linear_bwd(ws->dh, false, layer_ptr(lay, g, l, W_DOWN), ws->dx, c->h,
             layer_ptr(lay, w, l, W_DOWN), T, F, D);
  for (size_t i = 0; i < T * F; i++) {
    ws->dgate[i] = ws->dh[i] * c->up[i] * silu_grad(c->gate[i]);
    ws->dup[i] = ws->dh[i] * silu(c->gate[i]);
  }
  linear_bwd(ws->dnorm, false, layer_ptr(lay, g, l, W_GATE), ws->dgate, c->m,
             layer_ptr(lay, w, l, W_GATE), T, D, F);
  linear_bwd(ws->dnorm, true, layer_ptr(lay, g, l, W_UP), ws->dup, c->m,
             layer_ptr(lay, w, l, W_UP), T, D, F);
  rmsnorm_bwd(ws->dx, layer_ptr(lay, g, l, MLP_NORM), ws->dnorm, c->x_mid, c->mlp_rinv,
              layer_ptr(lay, w, l, MLP_NORM), T, D);
}

/* Attention half backward: ws->dx is dL/d(x_mid) on entry, dL/d(x_in) on exit. */
static void attn_bwd(const struct model *M, double *w, double *g, long l, struct layer_cache *c,
                     struct workspace *ws) {
  const struct shape *s = &M->s;
  const struct layout *lay = &M->lay;
  size_t T = (size_t)s->seq_len, D = (size_t)s->hidden;
  size_t qd = (size_t)(s->heads * s->head_dim), kd = (size_t)(s->kv_heads * s->head_dim);
  linear_bwd(ws->dout, false, layer_ptr(lay, g, l, WO), ws->dx, c->o, layer_ptr(lay, w, l, WO), T,
             qd, D);
  attention_bwd(ws->dq, ws->dk, ws->dv, ws->dout, c->probs, c->q, c->k, c->v, attn_dims_of(s),
                ws->dp_row);
  rope(ws->dq, T, (size_t)s->heads, (size_t)s->head_dim, s->rope_theta, -1.0);
  rope(ws->dk, T, (size_t)s->kv_heads, (size_t)s->head_dim, s->rope_theta, -1.0);
  linear_bwd(ws->dnorm, false, layer_ptr(lay, g, l, WQ), ws->dq, c->a, layer_ptr(lay, w, l, WQ), T,
             D, qd);
  linear_bwd(ws->dnorm, true, layer_ptr(lay, g, l, WK), ws->dk, c->a, layer_ptr(lay, w, l, WK), T,
             D, kd);
  linear_bwd(ws->dnorm, true, layer_ptr(lay, g, l, WV), ws->dv, c->a, layer_ptr(lay, w, l, WV), T,
             D, kd);
  rmsnorm_bwd(ws->dx, layer_ptr(lay, g, l, ATTN_NORM), ws->dnorm, c->x_in, c->attn_rinv,
              layer_ptr(lay, w, l, ATTN_NORM), T, D);
}

/* Logits into ws->probs, turned into softmax rows; returns the summed
 * -log p(target) over the T positions. */
static double head_fwd(const struct model *M, double *w, const uint32_t *targets,
                       struct workspace *ws) {
  size_t T = (size_t)M->s.seq_len, D = (size_t)M->s.hidden, V = (size_t)M->s.vocab;
  rmsnorm_fwd(ws->n, ws->final_rinv, ws->x_final, tensor_ptr(&M->lay, w, M->lay.final_norm), T, D,
              M->s.norm_eps);
  linear_fwd(ws->probs, ws->n, head_ptr(&M->lay, w), T, D, V);
  double loss = 0;
  for (size_t t = 0; t < T; t++) {
    double *row = ws->probs + t * V, maxz = row[0], sum = 0;
    for (size_t i = 1; i < V; i++)
      maxz = row[i] > maxz ? row[i] : maxz;
    for (size_t i = 0; i < V; i++)
      sum += exp(row[i] - maxz);
    loss -= row[targets[t]] - maxz - log(sum);
    for (size_t i = 0; i < V; i++)
      row[i] = exp(row[i] - maxz) / sum;
  }
  return loss;
}

/* d(scale * loss)/dlogits = scale (p - onehot(target)); leaves dL/d(x_final) in ws->dx. */
static void head_bwd(const struct model *M, double *w, double *g, const uint32_t *targets,
                     double scale, struct workspace *ws) {
  size_t T = (size_t)M->s.seq_len, D = (size_t)M->s.hidden, V = (size_t)M->s.vocab;
  for (size_t t = 0; t < T; t++)
    for (size_t i = 0; i < V; i++)
      ws->dlogits[t * V + i] = scale * (ws->probs[t * V + i] - (i == targets[t] ? 1.0 : 0.0));
  linear_bwd(ws->dnorm, false, head_ptr(&M->lay, g), ws->dlogits, ws->n, head_ptr(&M->lay, w), T,
             D, V);
  memset(ws->dx, 0, T * D * sizeof *ws->dx);
  rmsnorm_bwd(ws->dx, tensor_ptr(&M->lay, g, M->lay.final_norm), ws->dnorm, ws->x_final,
              ws->final_rinv, tensor_ptr(&M->lay, w, M->lay.final_norm), T, D);
}

/* Loss summed over the T positions of the sequence tok[0..T] (inputs
 * tok[0..T), targets tok[1..T]); when g is not NULL, also adds
 * scale * d(that sum)/dw into g. */
static double sequence_loss(const struct model *M, double *w, double *g, const uint32_t *tok,
                            double scale, struct workspace *ws) {
  size_t T = (size_t)M->s.seq_len, D = (size_t)M->s.hidden;
  long L = M->s.layers;
  double *x0 = L > 0 ? ws->layers[0].x_in : ws->x_final;
  const double *emb = tensor_ptr(&M->lay, w, M->lay.tok_emb);
  for (size_t t = 0; t < T; t++)
    memcpy(x0 + t * D, emb + (size_t)tok[t] * D, D * sizeof *x0);
  for (long l = 0; l < L; l++)
    layer_fwd(M, w, l, &ws->layers[l], l + 1 < L ? ws->layers[l + 1].x_in : ws->x_final);
  double loss = head_fwd(M, w, tok + 1, ws);
  if (!g)
    return loss;
  head_bwd(M, w, g, tok + 1, scale, ws);
  for (long l = L - 1; l >= 0; l--) {
    mlp_bwd(M, w, g, l, &ws->layers[l], ws);
    attn_bwd(M, w, g, l, &ws->layers[l], ws);
  }
  double *demb = tensor_ptr(&M->lay, g, M->lay.tok_emb);
  for (size_t t = 0; t < T; t++)
    axpy(demb + (size_t)tok[t] * D, 1.0, ws->dx + t * D, D);
  return loss;
}

/* The loss of optimizer step `step` (mean over its B*T positions); with g,
 * its gradient (g is overwritten). */
static double step_loss(const struct model *M, const struct train *tr, const struct tokens *data,
                        long step, double *w, double *g, struct workspace *ws) {
  double scale = 1.0 / ((double)tr->global_batch * (double)M->s.seq_len), total = 0;
  if (g)
    memset(g, 0, M->lay.total * sizeof *g);
  for (long j = 0; j < tr->global_batch; j++) {
    size_t off = sequence_offset(data, step, j, tr->global_batch, M->s.seq_len);
    total += sequence_loss(M, w, g, data->tok + off, scale, ws);
  }
  return total * scale;
}

/* ------------------------------------------------------------ optimizer */

static double lr_at(const struct train *tr, long s) {
  if (s < tr->warmup_steps)
    return tr->lr * (double)(s + 1) / (double)tr->warmup_steps;
  double lr_min = tr->lr / 10.0;
  long span = tr->steps - tr->warmup_steps;
  double p = (double)(s - tr->warmup_steps) / (double)(span > 1 ? span : 1);
  return lr_min + 0.5 * (1.0 + cos(PI * p)) * (tr->lr - lr_min);
}

struct step_figures {
  double lr, grad_norm; /* the step's learning rate; gradient norm before clipping */
};

/* AdamW step s (0-based) with global-norm clipping; m and v persist. */
static struct step_figures adamw_step(const struct model *M, const struct train *tr, long s, double *w, double *g,
                       double *m, double *v) {
  size_t n = M->lay.total;
  double norm = sqrt(dot(g, g, n));
  double clip = tr->grad_clip > 0 && norm > tr->grad_clip ? tr->grad_clip / norm : 1.0;
  double lr = lr_at(tr, s), t = (double)(s + 1);
  double bc1 = 1.0 - pow(tr->beta1, t), bc2 = 1.0 - pow(tr->beta2, t);
  for (int k = 0; k < M->lay.count; k++) {
    const struct tensor *ten = &M->lay.tensors[k];
    double decay = ten->is_norm ? 0.0 : tr->weight_decay;
    for (size_t i = ten->offset; i < ten->offset + ten->size; i++) {
      double gi = g[i] * clip;
      m[i] = tr->beta1 * m[i] + (1.0 - tr->beta1) * gi;
      v[i] = tr->beta2 * v[i] + (1.0 - tr->beta2) * gi * gi;
      double mhat = m[i] / bc1, vhat = v[i] / bc2;
      w[i] -= lr * (mhat / (sqrt(vhat) + tr->eps) + decay * w[i]);
    }
  }
  return (struct step_figures){lr, norm};
}

/* ----------------------------------------------------------------- modes */

static struct tokens load_data(const struct model *M, const struct train *tr) {
  struct tokens data = tr->data ? load_tokens(tr->data, M->s.vocab)
                                : synthetic_tokens(tr->seed, M->s.vocab);
  if (data.count < (size_t)M->s.seq_len + 2)
    die("the data has fewer than seq_len + 2 tokens", tr->data);
  return data;
}

static int run_training(const struct model *M, const struct train *tr, bool verbose) {
  struct tokens data = load_data(M, tr);
  size_t n = M->lay.total;
  double *w = xcalloc(n, sizeof *w), *g = xcalloc(n, sizeof *g);
  double *m = xcalloc(n, sizeof *m), *v = xcalloc(n, sizeof *v);
  init_params(&M->lay, w, tr->seed, tr->init_scale);
  struct workspace ws = make_workspace(&M->s);
  for (long s = 0; s < tr->run_steps; s++) {
    double loss = step_loss(M, tr, &data, s, w, g, &ws);
    struct step_figures fig = adamw_step(M, tr, s, w, g, m, v);
    if (verbose)
      printf("step %ld loss %.9f lr %.9e grad_norm %.9e\n", s, loss, fig.lr, fig.grad_norm);
    else
      printf("step %ld loss %.9f\n", s, loss);
    fflush(stdout);
  }
  free_workspace(&ws, M->s.layers);
  free(w), free(g), free(m), free(v), free(data.tok);
  return 0;
}

/* Fourth-order central difference of the step-0 loss along coordinate i:
 * truncation error O(h^4), so h can be large enough that rounding of the
 * loss (~1e-16 relative) stays far below the 1e-6 tolerance. */
static double fd_gradient(const struct model *M, const struct train *tr, const struct tokens *data,
                          double *w, size_t i, double h, struct workspace *ws) {
  double saved = w[i], f[4];
  const double steps[4] = {-2 * h, -h, h, 2 * h};
  for (int k = 0; k < 4; k++) {
    w[i] = saved + steps[k];
    f[k] = step_loss(M, tr, data, 0, w, NULL, ws);
  }
  w[i] = saved;
  return (f[0] - 8 * f[1] + 8 * f[2] - f[3]) / (12 * h);
}

/* Checks the analytic gradient of every tensor at `per_tensor` coordinates
 * chosen by a fixed hash; fails when any relative error reaches tol. */
static int run_grad_check(const struct model *M, const struct train *tr, int per_tensor) {
  /* The stencil's rounding error is ~18 ulp(loss) / (12 h) ~ 1e-12 for a loss
   * of ~5: differences below abs_floor are rounding, whatever the ratio (an
   * embedding row no input uses has gradient exactly 0 and fd ~1e-13). */
  const double tol = 1e-6, h = 1e-3, abs_floor = 1e-11;
  struct tokens data = load_data(M, tr);
  size_t n = M->lay.total;
  double *w = xcalloc(n, sizeof *w), *g = xcalloc(n, sizeof *g);
  init_params(&M->lay, w, tr->seed, tr->init_scale);
  struct workspace ws = make_workspace(&M->s);
  double loss = step_loss(M, tr, &data, 0, w, g, &ws), worst = 0;
  printf("gradcheck params %zu loss %.12f\n", n, loss);
  int nonzero = 0;
  for (int k = 0; k < M->lay.count; k++) {
    const struct tensor *ten = &M->lay.tensors[k];
    double worst_here = 0;
    for (int c = 0; c < per_tensor; c++) {
      size_t i = ten->offset + (size_t)(splitmix64((uint64_t)k * 7919 + (uint64_t)c) % ten->size);
      double fd = fd_gradient(M, tr, &data, w, i, h, &ws), an = g[i];
      double mag = fabs(fd) > fabs(an) ? fabs(fd) : fabs(an);
      double rel = fabs(fd - an) <= abs_floor ? 0.0 : fabs(fd - an) / mag;
      nonzero += mag > 1e3 * abs_floor;
      worst_here = rel > worst_here ? rel : worst_here;
    }
    printf("gradcheck %-14s max_rel_err %.3e\n", ten->name, worst_here);
    worst = worst_here > worst ? worst_here : worst;
  }
  bool pass = worst < tol && nonzero > 0;
  printf("gradcheck %s: max_rel_err %.3e (tolerance %.0e), %d nonzero of %d coordinates\n",
         pass ? "PASS" : "FAIL", worst, tol, nonzero, per_tensor * M->lay.count);
  free_workspace(&ws, M->s.layers);
  free(w), free(g), free(data.tok);
  return pass ? 0 : 1;
}

/* ------------------------------------------------------------ command line */

static const char usage_text[] =
    "usage: ref_llama --layers L --hidden D --ffn F --heads H [--kv-heads K] --vocab V\n"
    "                 --seq-len T --global-batch B [options]\n"
    "Trains the model of docs/model-spec.md in double precision and prints\n"
    "`step N loss X` for each optimizer step (N from 0).\n"
    "model:    --rope-theta X (10000)  --norm-eps X (1e-5)  --tie-embeddings 0|1 (0)\n"
    "train:    --lr X (3e-4) --beta1 X (0.9) --beta2 X (0.95) --eps X (1e-8)\n"
    "          --weight-decay X (0.1) --grad-clip X (1.0) --warmup-steps N (0)\n"
    "          --steps N (schedule length, 10) --run-steps N (steps to run; all)\n"
    "          --seed N (1337) --data FILE (llm.c shard or raw uint16; none: synthetic)\n"
    "check:    --grad-check N  finite-difference check of the step-0 gradient at N\n"
    "                          coordinates of every tensor (exit 1 on failure)\n"
    "          --init-scale X  multiply every init std by X (1)\n"
    "output:   --verbose       add each step's lr and gradient norm (before clipping)\n";

static long parse_long(const char *opt, const char *text, long min) {
  char *end;
  long v = strtol(text, &end, 0);
  if (!*text || *end || v < min) {
    fprintf(stderr, "ref_llama: error: --%s wants an integer >= %ld, not '%s'\n", opt, min, text);
    exit(2);
  }
  return v;
}

static double parse_double(const char *opt, const char *text) {
  char *end;
  double v = strtod(text, &end);
  if (!*text || *end || !isfinite(v)) {
    fprintf(stderr, "ref_llama: error: --%s wants a number, not '%s'\n", opt, text);
    exit(2);
  }
  return v;
}

static const struct option long_options[] = {
    {"layers", required_argument, NULL, 0},       {"hidden", required_argument, NULL, 0},
    {"ffn", required_argument, NULL, 0},          {"heads", required_argument, NULL, 0},
    {"kv-heads", required_argument, NULL, 0},     {"vocab", required_argument, NULL, 0},
    {"seq-len", required_argument, NULL, 0},      {"rope-theta", required_argument, NULL, 0},
    {"norm-eps", required_argument, NULL, 0},     {"tie-embeddings", required_argument, NULL, 0},
    {"global-batch", required_argument, NULL, 0}, {"lr", required_argument, NULL, 0},
    {"beta1", required_argument, NULL, 0},        {"beta2", required_argument, NULL, 0},
    {"eps", required_argument, NULL, 0},          {"weight-decay", required_argument, NULL, 0},
    {"grad-clip", required_argument, NULL, 0},    {"warmup-steps", required_argument, NULL, 0},
    {"steps", required_argument, NULL, 0},        {"run-steps", required_argument, NULL, 0},
    {"seed", required_argument, NULL, 0},         {"data", required_argument, NULL, 0},
    {"grad-check", required_argument, NULL, 0},   {"init-scale", required_argument, NULL, 0},
    {"verbose", no_argument, NULL, 'v'},          {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

struct command {
  struct shape s;
  struct train tr;
  int grad_check; /* coordinates per tensor; 0: train */
  bool verbose;
};

static void apply_option(struct command *cmd, const char *name, const char *arg) {
  struct shape *s = &cmd->s;
  struct train *tr = &cmd->tr;
  long *longs[] = {&s->layers, &s->hidden, &s->ffn, &s->heads, &s->kv_heads, &s->vocab,
                   &s->seq_len, &tr->global_batch, &tr->warmup_steps, &tr->steps,
                   &tr->run_steps};
  static const char *long_names[] = {"layers", "hidden",       "ffn",         "heads",
                                     "kv-heads", "vocab",      "seq-len",     "global-batch",
                                     "warmup-steps", "steps",  "run-steps"};
  /* zero layers or steps make sense (an embedding-only model, no training) */
  static const long long_minimum[] = {0, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0};
  for (size_t i = 0; i < sizeof longs / sizeof longs[0]; i++)
    if (!strcmp(name, long_names[i])) {
      *longs[i] = parse_long(name, arg, long_minimum[i]);
      return;
    }
  double *doubles[] = {&s->rope_theta, &s->norm_eps, &tr->lr, &tr->beta1, &tr->beta2,
                       &tr->eps, &tr->weight_decay, &tr->grad_clip, &tr->init_scale};
  static const char *double_names[] = {"rope-theta", "norm-eps", "lr",
                                       "beta1",      "beta2",    "eps",
                                       "weight-decay", "grad-clip", "init-scale"};
  for (size_t i = 0; i < sizeof doubles / sizeof doubles[0]; i++)
    if (!strcmp(name, double_names[i])) {
      *doubles[i] = parse_double(name, arg);
      return;
    }
  if (!strcmp(name, "tie-embeddings"))
    s->tie_embeddings = parse_long(name, arg, 0) != 0;
  else if (!strcmp(name, "seed"))
    tr->seed = (uint64_t)parse_long(name, arg, 0);
  else if (!strcmp(name, "data"))
    tr->data = arg;
  else if (!strcmp(name, "grad-check"))
    cmd->grad_check = (int)parse_long(name, arg, 1);
}

static void check_command(struct command *cmd) {
  struct shape *s = &cmd->s;
  if (!s->hidden || !s->ffn || !s->heads || !s->vocab || !s->seq_len || !cmd->tr.global_batch)
    die("--hidden, --ffn, --heads, --vocab, --seq-len and --global-batch are required", NULL);
  if (!s->kv_heads)
    s->kv_heads = s->heads;
  if (s->hidden % s->heads || (s->hidden / s->heads) % 2 || s->heads % s->kv_heads)
    die("need hidden divisible by heads, an even head_dim and heads divisible by kv_heads",
        NULL);
  s->head_dim = s->hidden / s->heads;
  if (!(s->rope_theta > 0) || !(s->norm_eps > 0))
    die("--rope-theta and --norm-eps must be positive", NULL);
  if (cmd->tr.warmup_steps > cmd->tr.steps)
    die("--warmup-steps must not exceed --steps", NULL);
  if (cmd->tr.run_steps < 0)
    cmd->tr.run_steps = cmd->tr.steps;
}

static struct command parse_command(int argc, char **argv) {
  struct command cmd = {
      .s = {.layers = 0, .rope_theta = 10000.0, .norm_eps = 1e-5},
      .tr = {.lr = 3e-4, .beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8, .weight_decay = 0.1,
             .grad_clip = 1.0, .warmup_steps = 0, .steps = 10, .run_steps = -1, .seed = 1337,
             .init_scale = 1.0},
  };
  bool have_layers = false;
  int c, index;
  while ((c = getopt_long(argc, argv, "hv", long_options, &index)) != -1) {
    if (c == 'v') {
      cmd.verbose = true;
      continue;
    }
    if (c == 'h') {
      fputs(usage_text, stdout);
      exit(0);
    }
    if (c != 0) {
      fputs(usage_text, stderr);
      exit(2);
    }
    have_layers |= !strcmp(long_options[index].name, "layers");
    apply_option(&cmd, long_options[index].name, optarg);
  }
  if (optind < argc || !have_layers) {
    fputs(usage_text, stderr);
    exit(2);
  }
  check_command(&cmd);
  return cmd;
}

int main(int argc, char **argv) {
  struct command cmd = parse_command(argc, argv);
  struct model M = {cmd.s, make_layout(&cmd.s)};
  int rc = cmd.grad_check ? run_grad_check(&M, &cmd.tr, cmd.grad_check) : run_training(&M, &cmd.tr, cmd.verbose);
  free(M.lay.tensors);
  return rc;
}
