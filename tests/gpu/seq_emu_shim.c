/* What test_rt_seq_emu (tests/gpu/tests.cmake) takes from the CUDA
 * backend's files that it does not link: the transport (always the staged
 * MPI one, whose CUDA calls the emulator serves on host memory) and the
 * stream (the emulator has one; every launch completes before the next). */
#include <stddef.h>

#include "rtlib/cuda/cuda_backend.h"

const struct rt_transport *rt_transport_open(const struct hx_rt_rank_config *cfg,
                                             const struct rt_device *dev) {
  return rt_cuda_staged_open(cfg, dev);
}

struct CUstream_st *rt_cuda_stream(void) {
  return NULL;
}
