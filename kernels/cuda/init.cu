/* Parameter initialisation on the device (kernels/cpu/params.c:
 * hxk_init_param), so that a rank does not draw its 1e9 weights on one
 * host core and upload them: the same stream of numbers, element by
 * element,
 *
 *   key = splitmix64(seed * 0x100000001B3 + id)           (host, once)
 *   u(n) = ((splitmix64(key + n) >> 11) + 0.5) * 2^-53
 *   full[i] = std * sqrt(-2 ln u(2i)) * cos(2 pi u(2i+1)),  i = r*cols + c,
 *
 * in double and rounded once to float. splitmix64, the draw, sqrt and the
 * products are exact or correctly rounded on both sides; log and cos are
 * the device's double functions (within 1 and 2 double ulps of the true
 * value, the CUDA guide's bounds) where the CPU has glibc's, so an element
 * can differ from the CPU's by one float ulp when the double lands within a
 * few double ulps of a float rounding boundary (about one element in 1e8).
 * tests/gpu/check_kernels.cu ("init") holds it to that. */
#include "kernels/cuda/common.cuh"

__device__ __forceinline__ uint64_t splitmix64_dev(uint64_t x) {
  uint64_t z = x + 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

/* The spec's uniform draw in (0, 1): 53 random bits, centred in their cell. */
__device__ __forceinline__ double uniform_draw_dev(uint64_t key, uint64_t n) {
  return ((double)(splitmix64_dev(key + n) >> 11) + 0.5) * 0x1p-53;
}

/* dst[e] for element e of the packed slice [r0, r0 + rows) x [c0, c0 +
 * width) of a tensor of `cols` columns: one thread per element, grid-stride
 * (a thread's two draws are independent of every other's). */
__global__ void init_normal_kernel(float *dst, uint64_t key, long cols,
                                   long r0, long c0, long width, long total,
                                   double std) {
  const double two_pi = 6.283185307179586476925286766559;
  for (long e = blockIdx.x * (long)blockDim.x + threadIdx.x; e < total;
       e += (long)gridDim.x * blockDim.x) {
    long r = r0 + e / width, c = c0 + e % width;
    uint64_t i = (uint64_t)r * (uint64_t)cols + (uint64_t)c;
    double u0 = uniform_draw_dev(key, 2 * i);
    double u1 = uniform_draw_dev(key, 2 * i + 1);
    double normal = sqrt(-2.0 * log(u0)) * cos(two_pi * u1);
    dst[e] = (float)(std * normal);
  }
}

/* The norm gains: ones. */
__global__ void init_fill_kernel(float *dst, long n, float value) {
  for (long e = blockIdx.x * (long)blockDim.x + threadIdx.x; e < n;
       e += (long)gridDim.x * blockDim.x)
    dst[e] = value;
}

void hxc_init_param(float *dst, const struct hxk_dims *d,
                    const struct hxk_shard *s, uint64_t seed,
                    enum hxk_param p, int layer, cudaStream_t stream) {
  long rows, cols, r0, r1, c0, c1;
  hxk_param_shape(d, p, &rows, &cols);
  hxk_param_slice(d, s, p, &r0, &r1, &c0, &c1);
  long width = c1 - c0, total = (r1 - r0) * width;
  if (total <= 0)
    return;
  double std = hxk_param_std(p, d->layers);
  if (std == 0.0) { /* a norm gain (hxk_param_std's convention) */
    init_fill_kernel<<<grid_for(total, EW_THREADS), EW_THREADS, 0, stream>>>(
        dst, total, 1.0f);
    HXC_LAUNCHED("init_fill_kernel");
    return;
  }
  uint64_t key = hxk_splitmix64(seed * 0x100000001B3ull + hxk_param_id(p, layer));
  init_normal_kernel<<<grid_for(total, EW_THREADS), EW_THREADS, 0, stream>>>(
      dst, key, cols, r0, c0, width, total, std);
  HXC_LAUNCHED("init_normal_kernel");
}

/* The largest tensors: the embedding (vocab x hidden). */
HXC_LAUNCHES(hxc_init_launches) {
  struct hxc_launch_dims l = ew_launch(s->vocab * s->hidden);
  fn(arg, "init_normal_kernel", &l);
  fn(arg, "init_fill_kernel", &l);
}
