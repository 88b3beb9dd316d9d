/* Token embedding, forward and backward (kernels/cpu/ops.c: hxk_embedding_*). */
#include "kernels/cuda/common.cuh"

/* out[t, i] = emb[tok[t], i]: one thread per element, grid-stride. */
template <typename T>
__global__ void embedding_forward_kernel(T *out, const int32_t *tok,
                                         const T *emb, long n, int dim) {
  long total = n * dim;
  for (long e = blockIdx.x * (long)blockDim.x + threadIdx.x; e < total;
       e += (long)gridDim.x * blockDim.x) {
    long t = e / dim;
    int i = (int)(e - t * dim);
    out[e] = emb[(long)tok[t] * dim + i];
  }
}

void hxc_embedding_forward(void *out, const int32_t *tok, const void *emb,
                           long n, int dim, enum hxc_dtype dt,
                           cudaStream_t stream) {
  if (n <= 0)
    return;
  const int threads = EW_THREADS;
  HXC_DISPATCH(dt, T,
               embedding_forward_kernel<T>
               <<<grid_for(n * dim, threads), threads, 0, stream>>>(
                   (T *)out, tok, (const T *)emb, n, dim));
  HXC_LAUNCHED("embedding_forward_kernel");
}

/* demb[tok[t], i] += dout[t, i]. Tokens repeat, so rows collide: fp32
 * atomics, the one reduction of kernels/cuda/ whose order (and hence last
 * bits) varies from run to run. */
template <typename T>
__global__ void embedding_backward_kernel(float *demb, const int32_t *tok,
                                          const T *dout, long n, int dim) {
  long total = n * dim;
  for (long e = blockIdx.x * (long)blockDim.x + threadIdx.x; e < total;
       e += (long)gridDim.x * blockDim.x) {
    long t = e / dim;
    int i = (int)(e - t * dim);
    atomicAdd(demb + (long)tok[t] * dim + i, load_f(dout + e));
  }
}

void hxc_embedding_backward(float *demb, const int32_t *tok, const void *dout,
                            long n, int dim, enum hxc_dtype dt,
                            cudaStream_t stream) {
  if (n <= 0)
    return;
  const int threads = EW_THREADS;
  HXC_DISPATCH(dt, T,
               embedding_backward_kernel<T>
               <<<grid_for(n * dim, threads), threads, 0, stream>>>(
                   demb, tok, (const T *)dout, n, dim));
  HXC_LAUNCHED("embedding_backward_kernel");
}

HXC_LAUNCHES(hxc_embedding_launches) {
  struct hxc_launch_dims l = ew_launch(s->nseq * s->seq_len * s->hidden);
  fn(arg, "embedding_forward_kernel", &l);
  fn(arg, "embedding_backward_kernel", &l);
}
