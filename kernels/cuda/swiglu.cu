/* SwiGLU gate, forward and backward (kernels/cpu/ops.c: hxk_swiglu_*). */
#include "kernels/cuda/common.cuh"

__device__ __forceinline__ float sigmoid_f(float z) {
  return 1.0f / (1.0f + expf(-z));
}

/* h = silu(g) * u,  silu(z) = z / (1 + e^-z) = z s(z). */
template <typename T>
__global__ void swiglu_forward_kernel(T *h, const T *g, const T *u, long n) {
  for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n;
       i += (long)gridDim.x * blockDim.x) {
    float gi = load_f(g + i);
    store_f(h + i, gi * sigmoid_f(gi) * load_f(u + i));
  }
}

void hxc_swiglu_forward(void *h, const void *g, const void *u, long n,
                        enum hxc_dtype dt, cudaStream_t stream) {
  if (n <= 0)
    return;
  HXC_DISPATCH(dt, T,
               swiglu_forward_kernel<T><<<grid_for(n, EW_THREADS), EW_THREADS, 0, stream>>>(
                   (T *)h, (const T *)g, (const T *)u, n));
  HXC_LAUNCHED("swiglu_forward_kernel");
}

/* dg += dh u silu'(g),  silu'(z) = s(z) (1 + z (1 - s(z)));
 * du += dh silu(g). */
template <typename T>
__global__ void swiglu_backward_kernel(T *dg, T *du, const T *dh, const T *g,
                                       const T *u, long n) {
  for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n;
       i += (long)gridDim.x * blockDim.x) {
    float gi = load_f(g + i), ui = load_f(u + i), dhi = load_f(dh + i);
    float s = sigmoid_f(gi);
    store_f(dg + i, load_f(dg + i) + dhi * ui * s * (1.0f + gi * (1.0f - s)));
    store_f(du + i, load_f(du + i) + dhi * (gi * s));
  }
}

void hxc_swiglu_backward(void *dg, void *du, const void *dh, const void *g,
                         const void *u, long n, enum hxc_dtype dt,
                         cudaStream_t stream) {
  if (n <= 0)
    return;
  HXC_DISPATCH(dt, T,
               swiglu_backward_kernel<T><<<grid_for(n, EW_THREADS), EW_THREADS, 0, stream>>>(
                   (T *)dg, (T *)du, (const T *)dh, (const T *)g,
                   (const T *)u, n));
  HXC_LAUNCHED("swiglu_backward_kernel");
}

/* ---- on the fused gate/up product ----
 * gu [n, 2 nf] holds each token's gate columns then its up columns (one
 * GEMM of the layer's input with [w_gate; w_up]). Element e = t nf + c:
 * g = gu[t, c], u = gu[t, nf + c]. With nf a multiple of 8 and every
 * pointer 16-byte aligned a thread takes 8 consecutive columns (one 16-byte
 * access per operand in bf16), else one. */

/* h[t, c] = silu(g) u. */
template <typename T, bool V>
__global__ void swiglu_gu_forward_kernel(T *h, const T *gu, long n, int nf) {
  const int width = V ? VEC : 1;
  long total = n * nf / width;
  for (long j = blockIdx.x * (long)blockDim.x + threadIdx.x; j < total;
       j += (long)gridDim.x * blockDim.x) {
    long e = j * width, t = e / nf;
    int c = (int)(e - t * nf);
    const T *gt = gu + t * 2 * nf + c;
    float g[VEC], u[VEC];
    if (V) {
      load8(gt, g);
      load8(gt + nf, u);
    } else {
      g[0] = load_f(gt);
      u[0] = load_f(gt + nf);
    }
    for (int k = 0; k < width; k++)
      g[k] = g[k] * sigmoid_f(g[k]) * u[k];
    if (V)
      store8(h + e, g);
    else
      store_f(h + e, g[0]);
  }
}

/* dgu[t, c] = dh u silu'(g),  dgu[t, nf + c] = dh silu(g): WRITTEN (the
 * layer's first write of that gradient: no zeroing before). */
template <typename T, bool V>
__global__ void swiglu_gu_backward_kernel(T *dgu, const T *dh, const T *gu,
                                          long n, int nf) {
  const int width = V ? VEC : 1;
  long total = n * nf / width;
  for (long j = blockIdx.x * (long)blockDim.x + threadIdx.x; j < total;
       j += (long)gridDim.x * blockDim.x) {
    long e = j * width, t = e / nf;
    int c = (int)(e - t * nf);
    long at = t * 2 * nf + c;
    float g[VEC], u[VEC], d[VEC];
    if (V) {
      load8(gu + at, g);
      load8(gu + at + nf, u);
      load8(dh + e, d);
    } else {
      g[0] = load_f(gu + at);
      u[0] = load_f(gu + at + nf);
      d[0] = load_f(dh + e);
    }
    for (int k = 0; k < width; k++) {
      float sg = sigmoid_f(g[k]);
      float dg = d[k] * u[k] * sg * (1.0f + g[k] * (1.0f - sg));
      u[k] = d[k] * (g[k] * sg); /* du */
      g[k] = dg;
    }
    if (V) {
      store8(dgu + at, g);
      store8(dgu + at + nf, u);
    } else {
      store_f(dgu + at, g[0]);
      store_f(dgu + at + nf, u[0]);
    }
  }
}

static bool gu_vec(int nf, const void *a, const void *b, const void *c) {
  return nf % VEC == 0 && vec8_ok(a, b, c);
}

static struct hxc_launch_dims gu_launch(long n, int nf, bool v) {
  return ew_launch(n * nf / (v ? VEC : 1));
}

void hxc_swiglu_gu_forward(void *h, const void *gu, long n, int nf,
                           enum hxc_dtype dt, cudaStream_t stream) {
  if (n <= 0 || nf <= 0)
    return;
  bool v = gu_vec(nf, h, gu, NULL);
  struct hxc_launch_dims l = gu_launch(n, nf, v);
  HXC_DISPATCH(dt, T, {
    if (v)
      swiglu_gu_forward_kernel<T, true><<<grid_of(l), l.threads, 0, stream>>>(
          (T *)h, (const T *)gu, n, nf);
    else
      swiglu_gu_forward_kernel<T, false><<<grid_of(l), l.threads, 0, stream>>>(
          (T *)h, (const T *)gu, n, nf);
  });
  HXC_LAUNCHED("swiglu_gu_forward_kernel");
}

void hxc_swiglu_gu_backward(void *dgu, const void *dh, const void *gu, long n,
                            int nf, enum hxc_dtype dt, cudaStream_t stream) {
  if (n <= 0 || nf <= 0)
    return;
  bool v = gu_vec(nf, dgu, dh, gu);
  struct hxc_launch_dims l = gu_launch(n, nf, v);
  HXC_DISPATCH(dt, T, {
    if (v)
      swiglu_gu_backward_kernel<T, true><<<grid_of(l), l.threads, 0, stream>>>(
          (T *)dgu, (const T *)dh, (const T *)gu, n, nf);
    else
      swiglu_gu_backward_kernel<T, false><<<grid_of(l), l.threads, 0, stream>>>(
          (T *)dgu, (const T *)dh, (const T *)gu, n, nf);
  });
  HXC_LAUNCHED("swiglu_gu_backward_kernel");
}

HXC_LAUNCHES(hxc_swiglu_launches) {
  struct hxc_launch_dims l = ew_launch(s->nseq * s->seq_len * s->ffn);
  struct hxc_launch_dims gu = gu_launch(s->nseq * s->seq_len, s->ffn, false);
  fn(arg, "swiglu_forward_kernel", &l);
  fn(arg, "swiglu_backward_kernel", &l);
  fn(arg, "swiglu_gu_forward_kernel", &gu);
  fn(arg, "swiglu_gu_backward_kernel", &gu);
}
