/* Rotary position embedding (kernels/cpu/ops.c: hxk_rope_*). */
#include "kernels/cuda/common.cuh"

/* Llama 3's RoPE scaling of hxk_dims (factor 0: none), by value. */
struct rope_scaling {
  double factor, low_freq_factor, high_freq_factor, original_max_len;
};

/* theta^(-2i/hd), scaled as kernels/cpu/ops.c's rope_inv_freq does. */
__device__ static double rope_inv_freq(double theta, int i, int hd,
                                       rope_scaling s) {
  double inv_freq = pow(theta, -2.0 * i / hd);
  if (!(s.factor > 0))
    return inv_freq;
  double wavelen = 2 * M_PI / inv_freq;
  if (wavelen < s.original_max_len / s.high_freq_factor)
    return inv_freq;
  if (wavelen > s.original_max_len / s.low_freq_factor)
    return inv_freq / s.factor;
  double smooth = (s.original_max_len / wavelen - s.low_freq_factor) /
                  (s.high_freq_factor - s.low_freq_factor);
  return (1 - smooth) * inv_freq / s.factor + smooth * inv_freq;
}

/* tab[(t*hd/2 + i)*2 + {0,1}] = {cos, sin}(phi), phi = t * inv_freq(i),
 * in double and rounded once, like hxk_rope_table. */
__global__ void rope_table_kernel(float *tab, int seq_len, int hd,
                                  double theta, rope_scaling s) {
  int half = hd / 2;
  long total = (long)seq_len * half;
  for (long e = blockIdx.x * (long)blockDim.x + threadIdx.x; e < total;
       e += (long)gridDim.x * blockDim.x) {
    long t = e / half;
    int i = (int)(e - t * half);
    double phi = (double)t * rope_inv_freq(theta, i, hd, s);
    tab[e * 2] = (float)cos(phi);
    tab[e * 2 + 1] = (float)sin(phi);
  }
}

void hxc_rope_table(float *tab, const struct hxk_dims *d,
                    cudaStream_t stream) {
  long pairs = (long)d->seq_len * (d->head_dim / 2);
  rope_scaling s = {d->rope_factor, d->rope_low_freq_factor,
                    d->rope_high_freq_factor,
                    (double)d->rope_original_max_len};
  rope_table_kernel<<<grid_for(pairs, EW_THREADS), EW_THREADS, 0, stream>>>(
      tab, d->seq_len, d->head_dim, d->rope_theta, s);
  HXC_LAUNCHED("rope_table_kernel");
}

/* Rotates pair i of every head of every token by +phi (sign 1) or -phi
 * (sign -1), in place: (y0, y1) = (x0 c - x1 s, x0 s + x1 c), s = sign
 * sin(phi); token tok = s*local_len + j sits at position pos[j] (pos NULL:
 * j, so local_len = seq_len is position = token mod seq_len). One thread per
 * pair. The rotation is orthogonal: the backward is the rotation by -phi. */
template <typename T>
__global__ void rope_rotate_kernel(T *x, const float *tab, long n, int nheads,
                                   int hd, const int *pos, long local_len,
                                   float sign) {
  int half = hd / 2;
  long per_token = (long)nheads * half, total = n * per_token;
  for (long e = blockIdx.x * (long)blockDim.x + threadIdx.x; e < total;
       e += (long)gridDim.x * blockDim.x) {
    long tok = e / per_token;
    long rest = e - tok * per_token; /* head * half + i */
    int i = (int)(rest % half);
    long j = tok % local_len;
    const float *cs = tab + (pos ? (long)pos[j] : j) * (long)hd + 2 * i;
    float c = cs[0], s = sign * cs[1];
    T *p = x + tok * (long)nheads * hd + 2 * rest; /* pair (2i, 2i+1) */
    float x0 = load_f(p), x1 = load_f(p + 1);
    store_f(p, x0 * c - x1 * s);
    store_f(p + 1, x0 * s + x1 * c);
  }
}

static void rope_rotate(void *x, const float *tab, long n, int nheads, int hd,
                        const int *pos, long local_len, float sign,
                        enum hxc_dtype dt, cudaStream_t stream) {
  long pairs = n * nheads * (long)(hd / 2);
  if (pairs <= 0)
    return;
  HXC_DISPATCH(dt, T,
               rope_rotate_kernel<T>
               <<<grid_for(pairs, EW_THREADS), EW_THREADS, 0, stream>>>(
                   (T *)x, tab, n, nheads, hd, pos, local_len, sign));
  HXC_LAUNCHED("rope_rotate_kernel");
}

void hxc_rope_forward(void *x, const float *tab, long n, int nheads, int hd,
                      int seq_len, enum hxc_dtype dt, cudaStream_t stream) {
  rope_rotate(x, tab, n, nheads, hd, NULL, seq_len, 1.0f, dt, stream);
}

void hxc_rope_backward_inplace(void *dy, const float *tab, long n, int nheads,
                               int hd, int seq_len, enum hxc_dtype dt,
                               cudaStream_t stream) {
  rope_rotate(dy, tab, n, nheads, hd, NULL, seq_len, -1.0f, dt, stream);
}

void hxc_rope_forward_pos(void *x, const float *tab, long n, int nheads,
                          int hd, const int *pos, long local_len,
                          enum hxc_dtype dt, cudaStream_t stream) {
  rope_rotate(x, tab, n, nheads, hd, pos, local_len, 1.0f, dt, stream);
}

void hxc_rope_backward_pos_inplace(void *dy, const float *tab, long n,
                                   int nheads, int hd, const int *pos,
                                   long local_len, enum hxc_dtype dt,
                                   cudaStream_t stream) {
  rope_rotate(dy, tab, n, nheads, hd, pos, local_len, -1.0f, dt, stream);
}

/* dx0 += dy0 c + dy1 s,  dx1 += -dy0 s + dy1 c (the transpose rotation,
 * added into a separate gradient). */
template <typename T>
__global__ void rope_backward_kernel(T *dx, const T *dy, const float *tab,
                                     long n, int nheads, int hd, int seq_len) {
  int half = hd / 2;
  long per_token = (long)nheads * half, total = n * per_token;
  for (long e = blockIdx.x * (long)blockDim.x + threadIdx.x; e < total;
       e += (long)gridDim.x * blockDim.x) {
    long tok = e / per_token;
    long rest = e - tok * per_token;
    int i = (int)(rest % half);
    const float *cs = tab + (tok % seq_len) * (long)hd + 2 * i;
    float c = cs[0], s = cs[1];
    long at = tok * (long)nheads * hd + 2 * rest;
    float dy0 = load_f(dy + at), dy1 = load_f(dy + at + 1);
    store_f(dx + at, load_f(dx + at) + (dy0 * c + dy1 * s));
    store_f(dx + at + 1, load_f(dx + at + 1) + (-dy0 * s + dy1 * c));
  }
}

void hxc_rope_backward(void *dx, const void *dy, const float *tab, long n,
                       int nheads, int hd, int seq_len, enum hxc_dtype dt,
                       cudaStream_t stream) {
  long pairs = n * nheads * (long)(hd / 2);
  if (pairs <= 0)
    return;
  HXC_DISPATCH(dt, T,
               rope_backward_kernel<T>
               <<<grid_for(pairs, EW_THREADS), EW_THREADS, 0, stream>>>(
                   (T *)dx, (const T *)dy, tab, n, nheads, hd, seq_len));
  HXC_LAUNCHED("rope_backward_kernel");
}

/* ---- on the fused q/k/v product ----
 * qkv [n, W], W = (nq + 2 nkv) hd, holds each token's q heads, then its k
 * heads, then its v heads (one GEMM of the normed input with the layer's
 * contiguous [wq; wk; wv]). One launch for q and k: thread e takes pair
 * column p = e mod W/2 of token e div W/2; the pair's head and index i
 * follow from p (hd is even, so no pair straddles q, k and v).
 *   split (forward):  q, k = RoPE(+phi) of their columns, v = its columns;
 *   merge (backward): dqkv's q and k columns = RoPE(-phi) of dq, dk (the
 *                     transpose of the rotation), its v columns = dv;
 * both WRITE their outputs. Positions as rope_rotate_kernel. */
template <typename T, bool MERGE, bool V>
__global__ void rope_qkv_kernel(T *qkv, T *q, T *k, T *v, const float *tab,
                                long n, int nq, int nkv, int hd,
                                const int *pos, long local_len) {
  const int width = V ? VEC / 2 : 1; /* pairs a thread takes */
  int half = hd / 2;
  long qp = (long)nq * half, kp = (long)nkv * half; /* pairs of q, of k */
  long per_token = qp + 2 * kp, total = n * per_token / width;
  float sign = MERGE ? -1.0f : 1.0f;
  for (long e = blockIdx.x * (long)blockDim.x + threadIdx.x; e < total;
       e += (long)gridDim.x * blockDim.x) {
    long tok = e * width / per_token;
    long p = e * width - tok * per_token; /* the first of the thread's pairs */
    T *wide = qkv + tok * 2 * per_token + 2 * p; /* the pairs in qkv */
    T *own;                                       /* in q, k or v */
    bool rotate = p < qp + kp;
    if (p < qp)
      own = q + tok * 2 * qp + 2 * p;
    else if (rotate)
      own = k + tok * 2 * kp + 2 * (p - qp);
    else
      own = v + tok * 2 * kp + 2 * (p - qp - kp);
    const T *from = MERGE ? own : wide;
    T *to = MERGE ? wide : own;
    float x[VEC];
    if (V)
      load8(from, x);
    else
      x[0] = load_f(from), x[1] = load_f(from + 1);
    if (rotate) {
      /* width pairs of one head (hd / 2 is a multiple of width) */
      int i = (int)((p < qp ? p : p - qp) % half);
      long j = tok % local_len;
      const float *cs = tab + (pos ? (long)pos[j] : j) * (long)hd + 2 * i;
      for (int w = 0; w < width; w++) {
        float c = cs[2 * w], s = sign * cs[2 * w + 1];
        float x0 = x[2 * w], x1 = x[2 * w + 1];
        x[2 * w] = x0 * c - x1 * s;
        x[2 * w + 1] = x0 * s + x1 * c;
      }
    }
    if (V)
      store8(to, x);
    else
      store_f(to, x[0]), store_f(to + 1, x[1]);
  }
}

/* Four pairs a thread where every head's pairs come in fours (hd a
 * multiple of 8) and the buffers are 16-byte aligned (then so is every
 * group's start), else one. */
static bool rope_qkv_vec(int hd, const void *a, const void *b, const void *c,
                         const void *d) {
  return hd % VEC == 0 && vec8_ok(a, b, c, d);
}

static struct hxc_launch_dims rope_qkv_launch(long n, int nq, int nkv, int hd,
                                              bool v) {
  return ew_launch(n * (long)(nq + 2 * nkv) * (hd / 2) / (v ? VEC / 2 : 1));
}

template <bool MERGE>
static void rope_qkv(void *qkv, void *q, void *k, void *v, const float *tab,
                     long n, int nq, int nkv, int hd, const int *pos,
                     long local_len, enum hxc_dtype dt, cudaStream_t stream) {
  if (n <= 0)
    return;
  bool vec = rope_qkv_vec(hd, qkv, q, k, v);
  struct hxc_launch_dims l = rope_qkv_launch(n, nq, nkv, hd, vec);
  HXC_DISPATCH(dt, T, {
    if (vec)
      rope_qkv_kernel<T, MERGE, true><<<grid_of(l), l.threads, 0, stream>>>(
          (T *)qkv, (T *)q, (T *)k, (T *)v, tab, n, nq, nkv, hd, pos,
          local_len);
    else
      rope_qkv_kernel<T, MERGE, false><<<grid_of(l), l.threads, 0, stream>>>(
          (T *)qkv, (T *)q, (T *)k, (T *)v, tab, n, nq, nkv, hd, pos,
          local_len);
  });
  HXC_LAUNCHED("rope_qkv_kernel");
}

void hxc_rope_qkv_split(void *q, void *k, void *v, const void *qkv,
                        const float *tab, long n, int nq, int nkv, int hd,
                        const int *pos, long local_len, enum hxc_dtype dt,
                        cudaStream_t stream) {
  /* the split only reads qkv: the cast serves the one kernel */
  rope_qkv<false>((void *)qkv, q, k, v, tab, n, nq, nkv, hd, pos, local_len,
                  dt, stream);
}

void hxc_rope_qkv_merge(void *dqkv, const void *dq, const void *dk,
                        const void *dv, const float *tab, long n, int nq,
                        int nkv, int hd, const int *pos, long local_len,
                        enum hxc_dtype dt, cudaStream_t stream) {
  /* the merge only reads dq, dk and dv */
  rope_qkv<true>(dqkv, (void *)dq, (void *)dk, (void *)dv, tab, n, nq, nkv,
                 hd, pos, local_len, dt, stream);
}

HXC_LAUNCHES(hxc_rope_launches) {
  struct hxc_launch_dims t = ew_launch((long)s->seq_len * (s->hd / 2));
  struct hxc_launch_dims r =
      ew_launch(s->nseq * s->seq_len * s->nq * (long)(s->hd / 2));
  fn(arg, "rope_table_kernel", &t);
  fn(arg, "rope_rotate_kernel", &r);
  fn(arg, "rope_backward_kernel", &r);
  struct hxc_launch_dims qkv =
      rope_qkv_launch(s->nseq * s->seq_len, s->nq, s->nkv, s->hd, false);
  fn(arg, "rope_qkv_kernel", &qkv);
}
