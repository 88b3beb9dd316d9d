/* Checked calls: every CUDA runtime and cuBLAS(Lt) call of kernels/cuda/ goes
 * through HXC_CHECK, and every kernel launch is followed by HXC_LAUNCHED.
 * A failure is reported as one line that names the rank and device (set by
 * the runtime through hxc_set_error_context), the call as written, the
 * file:line and the library's error string, e.g.
 *
 *   hexic: rank 3 (device 1): cudaMalloc(&p, bytes) failed at
 *   kernels/cuda/linear.cu:88: out of memory (cudaErrorMemoryAllocation)
 *
 * and then goes to the fatal handler: by default the line is printed on
 * stderr and the process exits with status 1; the runtime installs its own
 * (its watchdog path, which ends every rank instead of leaving peers hung).
 * The handler must not return; if it does, the process aborts.
 *
 * The header is C and C++: C++ picks the checker by overloading, C11 by
 * _Generic, so one macro serves cudaError_t, cublasStatus_t and, when
 * nccl.h / cudnn.h are included first, ncclResult_t and cudnnStatus_t. */
#ifndef HXC_CUDA_CHECK_H
#define HXC_CUDA_CHECK_H

#include <cublasLt.h>
#include <cublas_api.h>
#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Called with the formatted message; must not return. */
typedef void (*hxc_fatal_fn)(const char *message, void *arg);

/* Rank and device named in every message (-1: unknown; the device is then
 * asked of the runtime when the error happens). */
void hxc_set_error_context(int rank, int device);

/* Replaces the fatal handler (NULL restores the default: print, exit 1). */
void hxc_set_fatal_handler(hxc_fatal_fn fn, void *arg);

/* Formats "hexic: rank R (device D): CALL failed at FILE:LINE: ERROR" and
 * calls the fatal handler. Also used for misuse the API detects itself
 * (an unsupported head dimension, a shape out of range). */
void hxc_fail(const char *call, const char *error, const char *file, int line);

/* Checkers: do nothing on success, else hxc_fail with the library's string. */
void hxc_check_cuda(cudaError_t status, const char *call, const char *file,
                    int line);
void hxc_check_cublas(cublasStatus_t status, const char *call,
                      const char *file, int line);
#ifdef NCCL_H_
static inline void hxc_check_nccl(ncclResult_t status, const char *call,
                                  const char *file, int line) {
  if (status != ncclSuccess)
    hxc_fail(call, ncclGetErrorString(status), file, line);
}
#endif
#ifdef CUDNN_H_
static inline void hxc_check_cudnn(cudnnStatus_t status, const char *call,
                                   const char *file, int line) {
  if (status != CUDNN_STATUS_SUCCESS)
    hxc_fail(call, cudnnGetErrorString(status), file, line);
}
#endif

#ifdef __cplusplus
} /* extern "C" */

static inline void hxc_check_result(cudaError_t s, const char *call,
                                    const char *file, int line) {
  hxc_check_cuda(s, call, file, line);
}
static inline void hxc_check_result(cublasStatus_t s, const char *call,
                                    const char *file, int line) {
  hxc_check_cublas(s, call, file, line);
}
#ifdef NCCL_H_
static inline void hxc_check_result(ncclResult_t s, const char *call,
                                    const char *file, int line) {
  hxc_check_nccl(s, call, file, line);
}
#endif
#ifdef CUDNN_H_
static inline void hxc_check_result(cudnnStatus_t s, const char *call,
                                    const char *file, int line) {
  hxc_check_cudnn(s, call, file, line);
}
#endif
#define HXC_CHECK(call) hxc_check_result((call), #call, __FILE__, __LINE__)

#else /* C11 */

#ifdef NCCL_H_
#define HXC_CHECK_NCCL_CASE_ ncclResult_t : hxc_check_nccl,
#else
#define HXC_CHECK_NCCL_CASE_
#endif
#ifdef CUDNN_H_
#define HXC_CHECK_CUDNN_CASE_ cudnnStatus_t : hxc_check_cudnn,
#else
#define HXC_CHECK_CUDNN_CASE_
#endif
/* The controlling expression of _Generic is not evaluated: the call runs once. */
#define HXC_CHECK(call)                                                        \
  _Generic((call),                                                             \
      HXC_CHECK_NCCL_CASE_ HXC_CHECK_CUDNN_CASE_ cublasStatus_t                \
      : hxc_check_cublas, default                                              \
      : hxc_check_cuda)((call), #call, __FILE__, __LINE__)

#endif /* __cplusplus */

/* After a kernel launch: a bad configuration is reported here, naming the
 * kernel; an error inside the kernel surfaces at the next checked call.
 * (The host emulator, tests/gpu/emulate/cuda_emu.h, defines its own that
 * also tells it the kernel's name.) */
#ifndef HXC_LAUNCHED
#define HXC_LAUNCHED(kernel_name)                                              \
  HXC_CHECK_AS(cudaGetLastError(), "launch of " kernel_name)
#endif
#define HXC_CHECK_AS(call, name) hxc_check_cuda((call), name, __FILE__, __LINE__)

#endif
