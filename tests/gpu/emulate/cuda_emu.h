/* A host emulation of the little of CUDA that kernels/cuda/ uses, so that the
 * kernels' own source runs on a machine without a GPU against the CPU
 * kernels (tests/gpu/emulate/run.sh). Force-included (g++ -include) before
 * every translation unit; run.sh first rewrites `k<<<grid, block, smem,
 * stream>>>(args)` into `emu::launch(k, grid, block, smem, stream)(args)`
 * and `extern __shared__ T name[];` into a pointer to the launch's dynamic
 * shared memory.
 *
 * Model: the blocks of a launch run one after another; the threads of a
 * block are coroutines (own stacks, one OS thread), switched only at
 * barriers, so __shared__ arrays can be function statics. Warp-collective
 * operations (shuffles, mma.sync, ldmatrix) are a warp barrier, an exchange
 * through per-warp slots, and a second barrier; a collective that not every
 * lane of a warp reaches is reported as a deadlock, as is a __syncthreads
 * some live thread never reaches. mma.sync.m16n8k16 and ldmatrix.trans
 * follow the fragment layouts of the PTX ISA (written out in
 * emu_runtime.cpp); what this checks is that the kernels use those layouts
 * consistently and that their indexing, masking and softmax algebra are
 * right. It cannot check timing, memory coalescing or the real hardware's
 * rounding inside a tensor-core accumulation. */
#ifndef HXC_CUDA_EMU_H
#define HXC_CUDA_EMU_H

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include <functional>

namespace emu {

struct thread_state {
  uint3 thread_idx, block_idx;
  dim3 block_dim, grid_dim;
  int linear; /* index in the block, x fastest */
};

/* The emulated thread now running. */
extern thread_state *current;

void block_barrier();
float shfl_xor(float x, int lane_mask);
double shfl_xor(double x, int lane_mask);
void mma_16816(float (&d)[4], const uint32_t (&a)[4], uint32_t b0,
               uint32_t b1);
void ldmatrix_x4_trans(uint32_t (&r)[4], const void *row_addr);
void ldmatrix_x4(uint32_t (&r)[4], const void *row_addr);
void *dynamic_smem();
float atomic_add(float *p, float v);
int atomic_add(int *p, int v);
unsigned long long atomic_add(unsigned long long *p, unsigned long long v);

/* cp.async (.ca and .cg, 4/8/16 bytes, src_bytes < bytes zero-fills the
 * rest), cp.async.commit_group and cp.async.wait_group N, per thread as the
 * PTX ISA defines them. A copy is not visible when it is issued: its
 * destination turns to NaN bytes then (the hardware may have written any
 * part of it by any time), and takes the source's bytes, read at issue,
 * only when a wait_group retires its group. So a kernel that reads a tile
 * before waiting for it, or that another thread reads before a barrier
 * after the wait, sees NaN. */
void cp_async(void *dst, const void *src, int bytes, int src_bytes);
void cp_async_commit();
void cp_async_wait(int newest_pending);

/* A flag one block sets and a later block waits for (an ordered
 * accumulation across blocks). Blocks run one after another here, in the
 * order of their tickets: a wait whose flag does not hold the value yet
 * would spin forever, which is reported (exit 4) as the deadlock it is. */
void wait_flag(const int *flag, int value);

/* A launch of the kernel of that name was just made (HXC_LAUNCHED):
 * HEXIC_EMU_FREEZE_AFTER=NAME makes every cudaMalloc, cudaFree and
 * cudaDeviceSynchronize after the first one fatal (a test that device
 * memory is all allocated at start: NAME the first kernel of step 1). */
void launched(const char *name);

/* Runs body once per thread of every block of the grid (fatal when the
 * grid or block is past what the hardware launches: x < 2^31, y and z at
 * most 65535, 1024 threads). */
void run_grid(dim3 grid, dim3 block, size_t smem,
              const std::function<void()> &body);

template <class F> struct launcher {
  F kernel;
  dim3 grid, block;
  size_t smem;
  template <class... A> void operator()(A... args) const {
    F k = kernel;
    run_grid(grid, block, smem, [=]() { k(args...); });
  }
};

template <class F>
launcher<F> launch(F kernel, dim3 grid, dim3 block, size_t smem = 0,
                   cudaStream_t stream = 0) {
  (void)stream; /* one stream: every launch completes before the next */
  return launcher<F>{kernel, grid, block, smem};
}

} /* namespace emu */

/* Device-side integer min/max, and the C++ form of cudaFuncSetAttribute,
 * which the CUDA headers declare for nvcc only. */
static inline int min(int a, int b) { return a < b ? a : b; }
static inline int max(int a, int b) { return a > b ? a : b; }
template <class T>
cudaError_t cudaFuncSetAttribute(T *func, enum cudaFuncAttribute attr,
                                 int value) {
  return cudaFuncSetAttribute((const void *)func, attr, value);
}

#define HXC_LAUNCHED(kernel_name)                                              \
  (emu::launched(kernel_name),                                                 \
   hxc_check_cuda(cudaGetLastError(), "launch of " kernel_name, __FILE__,      \
                  __LINE__))

#define threadIdx (emu::current->thread_idx)
#define blockIdx (emu::current->block_idx)
#define blockDim (emu::current->block_dim)
#define gridDim (emu::current->grid_dim)
#define __syncthreads() emu::block_barrier()
#define __shfl_xor_sync(mask, x, lane_mask) emu::shfl_xor((x), (lane_mask))
#define atomicAdd(p, v) emu::atomic_add((p), (v))
#define __threadfence() ((void)0) /* one OS thread: every write is seen */
#undef __shared__
#define __shared__ static
#ifndef __launch_bounds__
#define __launch_bounds__(...)
#endif

/* attention_tc.cu's inline PTX: the warp-collective mma.sync and
 * ldmatrix, the asynchronous copies and the flags between blocks. */
#define HXC_EMULATED_MMA 1
static inline void mma_16816(float (&d)[4], const uint32_t (&a)[4],
                             uint32_t b0, uint32_t b1) {
  emu::mma_16816(d, a, b0, b1);
}
static inline void ldmatrix_x4_trans(uint32_t (&r)[4],
                                     const __nv_bfloat16 *row_addr) {
  emu::ldmatrix_x4_trans(r, row_addr);
}
static inline void ldmatrix_x4(uint32_t (&r)[4],
                               const __nv_bfloat16 *row_addr) {
  emu::ldmatrix_x4(r, row_addr);
}
static inline void cp_async_16(void *dst, const void *src, bool valid) {
  emu::cp_async(dst, src, 16, valid ? 16 : 0);
}
static inline void cp_async_4(void *dst, const void *src, bool valid) {
  emu::cp_async(dst, src, 4, valid ? 4 : 0);
}
static inline void cp_async_commit() { emu::cp_async_commit(); }
template <int N> static inline void cp_async_wait() { emu::cp_async_wait(N); }
static inline void wait_flag(const int *flag, int value) {
  emu::wait_flag(flag, value);
}
static inline void set_flag(int *flag, int value) { *flag = value; }

#endif
