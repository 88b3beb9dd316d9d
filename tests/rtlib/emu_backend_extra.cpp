/* The CUDA runtime calls of rtlib/cuda/ that tests/gpu/emulate/emu_runtime.cpp
 * (which serves kernels/cuda/) does not define: streams, pinned host memory,
 * 2-D copies, device choice and memory info, on host memory with the same
 * model (one stream; every call completes before it returns). Weak, so a
 * definition the emulator gains later takes precedence. Linked only by
 * tests/rtlib/emulate_backend.sh. */
#include <cuda_runtime_api.h>

#include <stdlib.h>
#include <string.h>

#define WEAK __attribute__((weak))

extern "C" {

WEAK cudaError_t cudaSetDevice(int device) {
  return device == 0 ? cudaSuccess : cudaErrorInvalidDevice;
}

/* A fixed 8 GiB device: what the memory check compares the plan with. */
WEAK cudaError_t cudaMemGetInfo(size_t *free_bytes, size_t *total_bytes) {
  *free_bytes = *total_bytes = (size_t)8 << 30;
  return cudaSuccess;
}

WEAK cudaError_t cudaStreamCreate(cudaStream_t *stream) {
  static int token;
  *stream = (cudaStream_t)&token; /* any non-null handle: there is one stream */
  return cudaSuccess;
}

WEAK cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
  (void)stream;
  return cudaSuccess;
}

WEAK cudaError_t cudaMallocHost(void **p, size_t bytes) {
  *p = malloc(bytes ? bytes : 1);
  return *p ? cudaSuccess : cudaErrorMemoryAllocation;
}

WEAK cudaError_t cudaFreeHost(void *p) {
  free(p);
  return cudaSuccess;
}

WEAK cudaError_t cudaMemcpy2DAsync(void *dst, size_t dpitch, const void *src, size_t spitch,
                                   size_t width, size_t height, enum cudaMemcpyKind kind,
                                   cudaStream_t stream) {
  (void)kind, (void)stream;
  if (width > dpitch || width > spitch)
    return cudaErrorInvalidPitchValue;
  for (size_t r = 0; r < height; r++)
    memmove((char *)dst + r * dpitch, (const char *)src + r * spitch, width);
  return cudaSuccess;
}

} /* extern "C" */
