/* The checked-call machinery (cuda_check.h) and the per-stream context:
 * cuBLASLt handle, matmul workspace, reduction scratch; dtype conversion. */
#include <stdio.h>
#include <stdlib.h>

#include "kernels/cuda/common.cuh"

static int error_rank = -1, error_device = -1;
static hxc_fatal_fn fatal_fn;
static void *fatal_arg;

void hxc_set_error_context(int rank, int device) {
  error_rank = rank;
  error_device = device;
}

void hxc_set_fatal_handler(hxc_fatal_fn fn, void *arg) {
  fatal_fn = fn;
  fatal_arg = arg;
}

/* The device the failing call ran on: the runtime's word for it, else the
 * current device (asked without checking: we are already failing). */
static int failing_device(void) {
  if (error_device >= 0)
    return error_device;
  int dev = -1;
  if (cudaGetDevice(&dev) != cudaSuccess)
    return -1;
  return dev;
}

void hxc_fail(const char *call, const char *error, const char *file,
              int line) {
  char msg[1024];
  char rank[32] = "rank ?";
  if (error_rank >= 0)
    snprintf(rank, sizeof rank, "rank %d", error_rank);
  snprintf(msg, sizeof msg, "hexic: %s (device %d): %s failed at %s:%d: %s",
           rank, failing_device(), call, file, line, error);
  if (fatal_fn)
    fatal_fn(msg, fatal_arg);
  else {
    fprintf(stderr, "%s\n", msg);
    fflush(stderr);
    exit(1);
  }
  abort(); /* a handler that returns would let a broken stream run on */
}

void hxc_check_cuda(cudaError_t status, const char *call, const char *file,
                    int line) {
  if (status == cudaSuccess)
    return;
  char error[256];
  snprintf(error, sizeof error, "%s (%s)", cudaGetErrorString(status),
           cudaGetErrorName(status));
  hxc_fail(call, error, file, line);
}

/* cuBLAS's own names; cublasGetStatusString lives in libcublas, which the
 * kernels do not otherwise need. */
static const char *cublas_status_name(cublasStatus_t s) {
  switch (s) {
  case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
  case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
  case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
  case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
  case CUBLAS_STATUS_ARCH_MISMATCH: return "CUBLAS_STATUS_ARCH_MISMATCH";
  case CUBLAS_STATUS_MAPPING_ERROR: return "CUBLAS_STATUS_MAPPING_ERROR";
  case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
  case CUBLAS_STATUS_INTERNAL_ERROR: return "CUBLAS_STATUS_INTERNAL_ERROR";
  case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
  case CUBLAS_STATUS_LICENSE_ERROR: return "CUBLAS_STATUS_LICENSE_ERROR";
  default: return "unknown cuBLAS status";
  }
}

void hxc_check_cublas(cublasStatus_t status, const char *call,
                      const char *file, int line) {
  if (status == CUBLAS_STATUS_SUCCESS)
    return;
  char error[128];
  snprintf(error, sizeof error, "%s (%d)", cublas_status_name(status),
           (int)status);
  hxc_fail(call, error, file, line);
}

size_t hxc_dtype_bytes(enum hxc_dtype dt) {
  return dt == HXC_BF16 ? 2 : 4;
}

struct hxc_ctx *hxc_ctx_create(size_t workspace_bytes) {
  struct hxc_ctx *ctx = (struct hxc_ctx *)calloc(1, sizeof *ctx);
  if (!ctx)
    hxc_fail("calloc(struct hxc_ctx)", "out of host memory", __FILE__,
             __LINE__);
  ctx->workspace_bytes = workspace_bytes ? workspace_bytes : (32u << 20);
  HXC_CHECK(cublasLtCreate(&ctx->lt));
  HXC_CHECK(cudaMalloc(&ctx->workspace, ctx->workspace_bytes));
  return ctx;
}

void hxc_ctx_destroy(struct hxc_ctx *ctx) {
  if (!ctx)
    return;
  hxc_algos_free(ctx);
  HXC_CHECK(cudaFree(ctx->scratch));
  HXC_CHECK(cudaFree(ctx->workspace));
  HXC_CHECK(cublasLtDestroy(ctx->lt));
  free(ctx);
}

size_t hxc_ctx_device_bytes(const struct hxc_ctx *ctx) {
  return ctx->workspace_bytes + ctx->scratch_bytes;
}

void *hxc_ctx_scratch(struct hxc_ctx *ctx, size_t bytes) {
  if (bytes <= ctx->scratch_bytes)
    return ctx->scratch;
  if (ctx->sealed) { /* reserved at start: growing now could deadlock NCCL */
    char error[256];
    snprintf(error, sizeof error,
             "a kernel needs %zu bytes of context scratch, %zu were reserved "
             "at start (hxc_ctx_reserve): the reservation missed a shape",
             bytes, ctx->scratch_bytes);
    hxc_fail("hxc_ctx_scratch", error, __FILE__, __LINE__);
  }
  /* Kernels queued on any stream may still read the old buffer. */
  HXC_CHECK(cudaDeviceSynchronize());
  HXC_CHECK(cudaFree(ctx->scratch));
  ctx->scratch = NULL;
  ctx->scratch_bytes = 0;
  size_t grown = bytes + bytes / 4; /* a little headroom for the next shape */
  HXC_CHECK(cudaMalloc(&ctx->scratch, grown));
  ctx->scratch_bytes = grown;
  return ctx->scratch;
}

/* Once, before the first step (nothing queued yet reads the scratch):
 * exactly the bytes asked, then sealed. */
void hxc_ctx_reserve(struct hxc_ctx *ctx, size_t scratch_bytes) {
  HXC_REQUIRE(!ctx->sealed, "hxc_ctx_reserve: once per context");
  if (scratch_bytes > ctx->scratch_bytes) {
    HXC_CHECK(cudaFree(ctx->scratch));
    ctx->scratch = NULL;
    ctx->scratch_bytes = 0;
    HXC_CHECK(cudaMalloc(&ctx->scratch, scratch_bytes));
    ctx->scratch_bytes = scratch_bytes;
  }
  ctx->sealed = true;
}

/* dst[i] = src[i] converted: fp32 <-> bf16 (round to nearest even). */
template <typename D, typename S>
__global__ void convert_kernel(D *dst, const S *src, long n) {
  for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n;
       i += (long)gridDim.x * blockDim.x)
    store_f(dst + i, load_f(src + i));
}

void hxc_convert(void *dst, enum hxc_dtype dst_dt, const void *src,
                 enum hxc_dtype src_dt, long n, cudaStream_t stream) {
  if (n <= 0)
    return;
  const int threads = EW_THREADS;
  HXC_DISPATCH(dst_dt, D,
               HXC_DISPATCH(src_dt, S,
                            convert_kernel<D, S>
                            <<<grid_for(n, threads), threads, 0, stream>>>(
                                (D *)dst, (const S *)src, n)));
  HXC_LAUNCHED("convert_kernel");
}

/* Weights and activations converted: the group's floats at most. */
HXC_LAUNCHES(hxc_context_launches) {
  struct hxc_launch_dims l = ew_launch(s->group_elems);
  fn(arg, "convert_kernel", &l);
}

/* Every kernel's launch at the shapes s (the parts live beside their
 * launchers). */
void hxc_launch_table(const struct hxc_launch_shapes *s, hxc_launch_fn fn,
                      void *arg) {
  hxc_context_launches(s, fn, arg);
  hxc_embedding_launches(s, fn, arg);
  hxc_init_launches(s, fn, arg);
  hxc_rmsnorm_launches(s, fn, arg);
  hxc_rope_launches(s, fn, arg);
  hxc_swiglu_launches(s, fn, arg);
  hxc_residual_launches(s, fn, arg);
  hxc_layer_launches(s, fn, arg);
  hxc_head_launches(s, fn, arg);
  hxc_optim_launches(s, fn, arg);
  hxc_attention_launches(s, fn, arg);
  hxc_attention_tc_launches(s, fn, arg);
  hxc_attention_block_launches(s, fn, arg);
}
