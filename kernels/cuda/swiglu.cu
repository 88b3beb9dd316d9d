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

HXC_LAUNCHES(hxc_swiglu_launches) {
  struct hxc_launch_dims l = ew_launch(s->nseq * s->seq_len * s->ffn);
  fn(arg, "swiglu_forward_kernel", &l);
  fn(arg, "swiglu_backward_kernel", &l);
}
