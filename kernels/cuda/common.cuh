/* Helpers shared by the .cu files of kernels/cuda/; not part of the API
 * (llama_cuda.h): element loads and stores in fp32 arithmetic, warp and
 * block reductions, launch sizes, the dtype dispatch and the context. */
#ifndef HXC_COMMON_CUH
#define HXC_COMMON_CUH

#include <cmath>
#include <cstdint>

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cublasLt.h>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/llama_cuda.h"

typedef __nv_bfloat16 bf16;

/* Every kernel computes in fp32 whatever it stores: load converts up,
 * store rounds to nearest even once. */
__device__ __forceinline__ float load_f(const float *p) { return *p; }
__device__ __forceinline__ float load_f(const bf16 *p) {
  return __bfloat162float(*p);
}
__device__ __forceinline__ void store_f(float *p, float x) { *p = x; }
__device__ __forceinline__ void store_f(bf16 *p, float x) {
  *p = __float2bfloat16_rn(x);
}

/* Eight consecutive elements in fp32 through 16-byte accesses (one for
 * bf16, two for fp32): the element-wise kernels' vector path. `p` must be
 * 16-byte aligned (vec8_ok). A bf16 is the high half of its float, so the
 * words of a uint4 unpack by shifts (and pack through the rounding
 * conversion's bits), with no cast between unrelated types. */
#define VEC 8
__device__ __forceinline__ float bf16_bits_to_float(unsigned short b) {
  return __bfloat162float(__ushort_as_bfloat16(b));
}
__device__ __forceinline__ void load8(const bf16 *p, float v[VEC]) {
  uint4 raw = *reinterpret_cast<const uint4 *>(p);
  unsigned words[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
  for (int i = 0; i < 4; i++) {
    v[2 * i] = bf16_bits_to_float((unsigned short)(words[i] & 0xffffu));
    v[2 * i + 1] = bf16_bits_to_float((unsigned short)(words[i] >> 16));
  }
}
__device__ __forceinline__ void load8(const float *p, float v[VEC]) {
  float4 lo = reinterpret_cast<const float4 *>(p)[0];
  float4 hi = reinterpret_cast<const float4 *>(p)[1];
  v[0] = lo.x, v[1] = lo.y, v[2] = lo.z, v[3] = lo.w;
  v[4] = hi.x, v[5] = hi.y, v[6] = hi.z, v[7] = hi.w;
}
__device__ __forceinline__ void store8(bf16 *p, const float v[VEC]) {
  unsigned words[4];
#pragma unroll
  for (int i = 0; i < 4; i++)
    words[i] = (unsigned)__bfloat16_as_ushort(__float2bfloat16_rn(v[2 * i])) |
               (unsigned)__bfloat16_as_ushort(__float2bfloat16_rn(v[2 * i + 1]))
                   << 16;
  *reinterpret_cast<uint4 *>(p) = make_uint4(words[0], words[1], words[2],
                                             words[3]);
}
__device__ __forceinline__ void store8(float *p, const float v[VEC]) {
  reinterpret_cast<float4 *>(p)[0] = make_float4(v[0], v[1], v[2], v[3]);
  reinterpret_cast<float4 *>(p)[1] = make_float4(v[4], v[5], v[6], v[7]);
}

/* Whether every pointer is 16-byte aligned (NULL counts as aligned), so
 * that rows of a multiple of 8 elements can take the vector path. */
static inline bool vec8_ok(const void *a, const void *b = NULL,
                           const void *c = NULL, const void *d = NULL) {
  return ((uintptr_t)a % 16 | (uintptr_t)b % 16 | (uintptr_t)c % 16 |
          (uintptr_t)d % 16) == 0;
}

/* Sum over the 32 lanes of a warp; every lane gets the result. */
__device__ __forceinline__ float warp_sum(float x) {
  for (int off = 16; off > 0; off >>= 1)
    x += __shfl_xor_sync(0xffffffffu, x, off);
  return x;
}
/* The larger of a and b, NaN when either is: fmaxf(NaN, x) is x, which
 * hides a NaN from a max (the CPU's kernels give NaN). A compare and a
 * select, as fmaxf. */
__device__ __forceinline__ float max_nan(float a, float b) {
  return a > b || isnan(a) ? a : b;
}
__device__ __forceinline__ float warp_max(float x) {
  for (int off = 16; off > 0; off >>= 1)
    x = max_nan(x, __shfl_xor_sync(0xffffffffu, x, off));
  return x;
}
__device__ __forceinline__ double warp_sum_f64(double x) {
  for (int off = 16; off > 0; off >>= 1)
    x += __shfl_xor_sync(0xffffffffu, x, off);
  return x;
}

/* Sum over a block (blockDim.x a multiple of 32, at most 1024); every
 * thread gets the result. `shared` holds 32 floats; the function starts and
 * ends with a barrier, so it can be called repeatedly with the same buffer. */
__device__ __forceinline__ float block_sum(float x, float *shared) {
  int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  int nwarps = blockDim.x >> 5;
  x = warp_sum(x);
  __syncthreads();
  if (lane == 0)
    shared[warp] = x;
  __syncthreads();
  x = lane < nwarps ? shared[lane] : 0.0f;
  return warp_sum(x);
}
/* block_sum in double (`shared`: 32 doubles), for the rare recount of a
 * float sum that overflowed (norm.cu). */
__device__ __forceinline__ double block_sum_f64(double x, double *shared) {
  int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  int nwarps = blockDim.x >> 5;
  x = warp_sum_f64(x);
  __syncthreads();
  if (lane == 0)
    shared[warp] = x;
  __syncthreads();
  x = lane < nwarps ? shared[lane] : 0.0;
  return warp_sum_f64(x);
}
__device__ __forceinline__ float block_max(float x, float *shared) {
  int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  int nwarps = blockDim.x >> 5;
  x = warp_max(x);
  __syncthreads();
  if (lane == 0)
    shared[warp] = x;
  __syncthreads();
  x = lane < nwarps ? shared[lane] : -INFINITY;
  return warp_max(x);
}

/* Blocks for a grid-stride loop over n elements: enough to fill any GPU,
 * capped so the grid size fits. */
static inline unsigned grid_for(long n, int threads) {
  long blocks = (n + threads - 1) / threads;
  if (blocks > 65536)
    blocks = 65536;
  return (unsigned)(blocks > 0 ? blocks : 1);
}

/* The block of every grid-stride (element-wise) kernel, and its launch
 * over n elements: grid_for(n, EW_THREADS) blocks. */
#define EW_THREADS 256
static inline struct hxc_launch_dims ew_launch(long n) {
  struct hxc_launch_dims l = {grid_for(n, EW_THREADS), 1, 1, EW_THREADS, 0,
                              false};
  return l;
}
/* The launch of an element-wise kernel over n elements of which the
 * first nvec * 8 go eight to a thread (the rest one to a thread). */
static inline struct hxc_launch_dims vec_launch(long n, long nvec) {
  return ew_launch(nvec + (n - nvec * VEC));
}
static inline struct hxc_launch_dims launch_dims(unsigned long gx,
                                                 unsigned long gy,
                                                 unsigned long gz, int threads,
                                                 size_t smem, bool opt_in) {
  struct hxc_launch_dims l = {gx, gy, gz, threads, smem, opt_in};
  return l;
}
static inline dim3 grid_of(const struct hxc_launch_dims &l) {
  return dim3((unsigned)l.gx, (unsigned)l.gy, (unsigned)l.gz);
}

/* Each .cu file's part of hxc_launch_table (context.cu calls them all). */
#define HXC_LAUNCHES(name)                                                    \
  void name(const struct hxc_launch_shapes *s, hxc_launch_fn fn, void *arg)
HXC_LAUNCHES(hxc_context_launches);
HXC_LAUNCHES(hxc_embedding_launches);
HXC_LAUNCHES(hxc_init_launches);
HXC_LAUNCHES(hxc_rmsnorm_launches);
HXC_LAUNCHES(hxc_rope_launches);
HXC_LAUNCHES(hxc_swiglu_launches);
HXC_LAUNCHES(hxc_residual_launches);
HXC_LAUNCHES(hxc_layer_launches);
HXC_LAUNCHES(hxc_head_launches);
HXC_LAUNCHES(hxc_optim_launches);
HXC_LAUNCHES(hxc_attention_launches);
HXC_LAUNCHES(hxc_attention_tc_launches);
HXC_LAUNCHES(hxc_attention_block_launches);

/* Runs `body` with T bound to the storage type of dt:
 *   HXC_DISPATCH(dt, T, my_kernel<T><<<...>>>(...));                       */
#define HXC_DISPATCH(dt, T, ...)                                              \
  do {                                                                        \
    if ((dt) == HXC_BF16) {                                                   \
      typedef bf16 T;                                                         \
      __VA_ARGS__;                                                            \
    } else {                                                                  \
      typedef float T;                                                        \
      __VA_ARGS__;                                                            \
    }                                                                         \
  } while (0)

/* Misuse the API catches itself goes to the fatal handler like a failed
 * call: HXC_REQUIRE(hd <= 128, "head dimension at most 128"). */
#define HXC_REQUIRE(cond, what)                                               \
  do {                                                                        \
    if (!(cond))                                                              \
      hxc_fail(#cond, what, __FILE__, __LINE__);                              \
  } while (0)

/* ---------------------------------------------------------------------------
 * The context (context.cu creates it; linear.cu owns the algorithm cache).
 * ------------------------------------------------------------------------- */
struct hxc_algo_entry; /* linear.cu */

struct hxc_ctx {
  cublasLtHandle_t lt;
  void *workspace;
  size_t workspace_bytes;
  void *scratch; /* reductions' partial sums; grows until reserved */
  size_t scratch_bytes;
  bool sealed; /* hxc_ctx_reserve ran: never grows again */
  struct hxc_algo_entry *algos;
  int nalgos, cap_algos;
};

/* The context's scratch, at least `bytes` long (until hxc_ctx_reserve:
 * grows, synchronising the device first so that no queued kernel still
 * reads the old buffer; after it: more than reserved is fatal). */
void *hxc_ctx_scratch(struct hxc_ctx *ctx, size_t bytes);

/* Frees the algorithm cache (linear.cu). */
void hxc_algos_free(struct hxc_ctx *ctx);

/* D = alpha op(A) op(B) + beta C on cuBLASLt, column-major as cuBLAS sees
 * it (row-major callers swap operands): m x n result, k inner; A/B of
 * type ab, C/D of type cd; fp32 accumulation and scale. */
struct hxc_gemm {
  bool trans_a, trans_b;
  long m, n, k;
  long lda, ldb, ldc;
  enum hxc_dtype ab, cd;
};
void hxc_gemm_run(struct hxc_ctx *ctx, const struct hxc_gemm *g, float alpha,
                  const void *a, const void *b, float beta, void *c,
                  cudaStream_t stream);

/* Shapes of one attention call, shared by the tiled (attention.cu) and the
 * tensor-core (attention_tc.cu) kernels: the strides of the token-major
 * q/k/v and the map. */
struct attn_shape {
  int seq_len, nq, nkv;
  long ldq, ldkv; /* nq*hd, nkv*hd */
  struct hxc_kv_map map;
  float scale; /* 1/sqrt(hd) */
};
static inline struct attn_shape attn_shape_of(struct hxc_kv_map map,
                                              int seq_len, int nq, int nkv,
                                              int hd) {
  struct attn_shape sh;
  sh.seq_len = seq_len;
  sh.nq = nq;
  sh.nkv = nkv;
  sh.ldq = (long)nq * hd;
  sh.ldkv = (long)nkv * hd;
  sh.map = map;
  sh.scale = (float)(1.0 / sqrt((double)hd));
  return sh;
}

/* ---------------------------------------------------------------------------
 * The tensor-core attention (attention_tc.cu), behind the entry points of
 * attention.cu. bf16 only, head dims 64 and 128; every pointer 16-byte
 * aligned (the caller checks). The backward's scratch (D_t, the fp32 dQ
 * accumulator and its flags) is hxc_attention_tc_scratch bytes for the
 * nseq it is given, 256-byte aligned.
 * ------------------------------------------------------------------------- */
bool hxc_attention_tc_supports(int hd, enum hxc_dtype dt);
size_t hxc_attention_tc_scratch(long nseq, int seq_len, int nq, int hd);
void hxc_attention_tc_forward(void *o, float *lse, const void *q,
                              const void *k, const void *v,
                              struct hxc_kv_map map, long nseq, int seq_len,
                              int nq, int nkv, int hd, cudaStream_t stream);
void hxc_attention_tc_backward(void *dq, void *dk, void *dv, void *scratch,
                               const void *dout, const void *q, const void *k,
                               const void *v, const void *o, const float *lse,
                               struct hxc_kv_map map, long nseq, int seq_len,
                               int nq, int nkv, int hd, cudaStream_t stream);

#endif
