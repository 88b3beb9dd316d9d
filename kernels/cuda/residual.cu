/* Residual adds, forward and backward (kernels/cpu/ops.c: hxk_residual_*). */
#include "kernels/cuda/common.cuh"

/* y = a + b (y may alias a or b: each element is read before it is written,
 * by the same thread). */
template <typename T>
__global__ void residual_forward_kernel(T *y, const T *a, const T *b, long n) {
  for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n;
       i += (long)gridDim.x * blockDim.x)
    store_f(y + i, load_f(a + i) + load_f(b + i));
}

void hxc_residual_forward(void *y, const void *a, const void *b, long n,
                          enum hxc_dtype dt, cudaStream_t stream) {
  if (n <= 0)
    return;
  HXC_DISPATCH(dt, T,
               residual_forward_kernel<T>
               <<<grid_for(n, EW_THREADS), EW_THREADS, 0, stream>>>(
                   (T *)y, (const T *)a, (const T *)b, n));
  HXC_LAUNCHED("residual_forward_kernel");
}

/* da += dy, db += dy. */
template <typename T>
__global__ void residual_backward_kernel(T *da, T *db, const T *dy, long n) {
  for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n;
       i += (long)gridDim.x * blockDim.x) {
    float d = load_f(dy + i);
    store_f(da + i, load_f(da + i) + d);
    store_f(db + i, load_f(db + i) + d);
  }
}

void hxc_residual_backward(void *da, void *db, const void *dy, long n,
                           enum hxc_dtype dt, cudaStream_t stream) {
  if (n <= 0)
    return;
  HXC_DISPATCH(dt, T,
               residual_backward_kernel<T>
               <<<grid_for(n, EW_THREADS), EW_THREADS, 0, stream>>>(
                   (T *)da, (T *)db, (const T *)dy, n));
  HXC_LAUNCHED("residual_backward_kernel");
}

HXC_LAUNCHES(hxc_residual_launches) {
  struct hxc_launch_dims l = ew_launch(s->nseq * s->seq_len * s->hidden);
  fn(arg, "residual_forward_kernel", &l);
  fn(arg, "residual_backward_kernel", &l);
}
