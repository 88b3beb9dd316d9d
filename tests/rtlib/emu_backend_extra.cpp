/* The CUDA runtime calls of rtlib/cuda/ that tests/gpu/emulate/emu_runtime.cpp
 * (which serves kernels/cuda/) does not define: streams, events, pinned host
 * memory, stream-ordered allocation, 2-D copies, device choice and memory
 * info, on host memory with the same model (one stream; every call completes
 * before it returns). Weak, so a definition the emulator gains later takes
 * precedence. Linked by tests/rtlib/emulate_backend.sh and
 * tests/nccl/emulate_nccl.sh.
 *
 * The one exception to "completes before it returns": NCCL ops of
 * tests/nccl/nccl_shim.c on a side stream (one made by
 * cudaStreamCreateWithFlags, as transport_nccl.c's links and gradient
 * stream are) run in the background, as on a GPU. An event records the
 * shim's ticket of its stream (hx_nccl_shim_mark); cudaEventQuery asks
 * whether the stream's ops up to it are done, and cudaStreamWaitEvent and
 * cudaStreamSynchronize wait for them (the host is the waiting stream).
 * Without the shim (its hooks are weak) every event is complete. */
#include <cuda_runtime_api.h>

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define WEAK __attribute__((weak))

extern "C" {

/* Any device the emulator reports (one, or one per rank of the machine with
 * tests/nccl/nccl_shim.c): all are the same host memory. */
WEAK cudaError_t cudaSetDevice(int device) {
  int count = 1;
  if (cudaGetDeviceCount(&count) != cudaSuccess)
    count = 1;
  return device >= 0 && device < count ? cudaSuccess : cudaErrorInvalidDevice;
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

/* ---- side streams and events (tests/nccl/nccl_shim.c's hooks) ---- */

uint64_t hx_nccl_shim_mark(cudaStream_t stream) __attribute__((weak));
int hx_nccl_shim_reached(cudaStream_t stream, uint64_t ticket, int wait) __attribute__((weak));

namespace {
const unsigned side_magic = 0x51de5eau;
struct side_stream {
  unsigned magic;
};
struct emu_event {
  cudaStream_t stream;
  uint64_t ticket;
};
bool reached(cudaStream_t stream, uint64_t ticket, bool wait) {
  return !hx_nccl_shim_reached || hx_nccl_shim_reached(stream, ticket, wait ? 1 : 0);
}
} // namespace

/* Whether a stream is a side stream (the shim completes its ops later). */
WEAK int hx_emu_stream_side(cudaStream_t stream) {
  return stream && ((const side_stream *)stream)->magic == side_magic;
}

WEAK cudaError_t cudaStreamCreateWithFlags(cudaStream_t *stream, unsigned int flags) {
  (void)flags;
  side_stream *s = (side_stream *)malloc(sizeof *s);
  if (!s)
    return cudaErrorMemoryAllocation;
  s->magic = side_magic;
  *stream = (cudaStream_t)s;
  return cudaSuccess;
}

WEAK cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
  if (hx_nccl_shim_mark)
    reached(stream, hx_nccl_shim_mark(stream), true);
  return cudaSuccess;
}

WEAK cudaError_t cudaEventCreateWithFlags(cudaEvent_t *event, unsigned int flags) {
  (void)flags;
  emu_event *e = (emu_event *)calloc(1, sizeof *e);
  if (!e)
    return cudaErrorMemoryAllocation;
  *event = (cudaEvent_t)e;
  return cudaSuccess;
}

WEAK cudaError_t cudaEventCreate(cudaEvent_t *event) { return cudaEventCreateWithFlags(event, 0); }

WEAK cudaError_t cudaEventDestroy(cudaEvent_t event) {
  free(event);
  return cudaSuccess;
}

WEAK cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
  emu_event *e = (emu_event *)event;
  e->stream = stream;
  e->ticket = hx_nccl_shim_mark ? hx_nccl_shim_mark(stream) : 0;
  return cudaSuccess;
}

WEAK cudaError_t cudaEventQuery(cudaEvent_t event) {
  emu_event *e = (emu_event *)event;
  return reached(e->stream, e->ticket, false) ? cudaSuccess : cudaErrorNotReady;
}

WEAK cudaError_t cudaEventSynchronize(cudaEvent_t event) {
  emu_event *e = (emu_event *)event;
  reached(e->stream, e->ticket, true);
  return cudaSuccess;
}

/* The waiting stream is the host here: it waits. */
WEAK cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned int flags) {
  (void)stream, (void)flags;
  return cudaEventSynchronize(event);
}

/* ---- stream-ordered allocation: the emulator's cudaMalloc (NaN bytes) ---- */

WEAK cudaError_t cudaMallocAsync(void **p, size_t bytes, cudaStream_t stream) {
  (void)stream;
  return cudaMalloc(p, bytes);
}

WEAK cudaError_t cudaFreeAsync(void *p, cudaStream_t stream) {
  (void)stream;
  return cudaFree(p);
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
