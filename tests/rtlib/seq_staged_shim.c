/* The few CUDA runtime calls rtlib/cuda/transport_mpi_staged.c makes, on
 * host memory ("device" buffers are host buffers, one stream, every copy
 * complete when it returns), so test_rt_seq runs the staged transport's
 * sendrecv and alltoallv on any machine (rtlib.seq.staged): the staging
 * offsets, the copies down and up, the pieces of a ragged exchange. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cuda/cuda_check.h"
#include "rtlib/cuda/cuda_backend.h"

/* The backend's rt_transport_open (transport_select.c) picks a transport
 * on a GPU machine; here it is always the staged one under test. */
const struct rt_transport *rt_transport_open(const struct hx_rt_rank_config *cfg,
                                             const struct rt_device *dev) {
  return rt_cuda_staged_open(cfg, dev);
}

cudaError_t cudaMallocHost(void **p, size_t bytes) {
  *p = malloc(bytes ? bytes : 1);
  return *p ? cudaSuccess : cudaErrorMemoryAllocation;
}

cudaError_t cudaFreeHost(void *p) {
  free(p);
  return cudaSuccess;
}

cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t bytes, enum cudaMemcpyKind kind,
                            cudaStream_t stream) {
  (void)kind, (void)stream;
  memmove(dst, src, bytes);
  return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
  (void)stream;
  return cudaSuccess;
}

struct CUstream_st *rt_cuda_stream(void) {
  return NULL;
}

void hxc_check_cuda(cudaError_t status, const char *call, const char *file, int line) {
  if (status != cudaSuccess) {
    fprintf(stderr, "seq_staged_shim: %s failed at %s:%d\n", call, file, line);
    exit(1);
  }
}
