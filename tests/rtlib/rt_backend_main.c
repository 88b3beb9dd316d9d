/* One rank training a tiny Llama through hx_rt_main, as a generated rank
 * program would, on whichever backend it is linked with: rt_backend_cpu
 * (hexic_rt_cpu) or rt_backend_cuda (hexic_rt_cuda, built with
 * HX_TEST_CUDA). run_backend.sh runs both and compares their losses and
 * weights. Without a GPU the CUDA one exits 77 (ctest: skipped).
 *
 *   rt_backend_X [--precision fp32|bf16] [hx_rt_main's options...]
 *
 * The shape has head dimension 64 (the tensor-core attention's in bf16),
 * grouped-query attention (2 heads, 1 kv head), two layers, two
 * micro-batches of two sequences. */
#include <stdio.h>
#include <string.h>

#include "rtlib/hexic_rt.h"

#ifdef HX_TEST_CUDA
#include <cuda_runtime_api.h>

static int gpu_count(void) {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess ? n : 0;
}
#endif

static const struct hx_rt_model model = {.layers = 2,
                                         .hidden = 128,
                                         .ffn = 256,
                                         .heads = 2,
                                         .kv_heads = 1,
                                         .vocab = 256,
                                         .seq_len = 32,
                                         .rope_theta = 10000.0,
                                         .norm_eps = 1e-5,
                                         .tie_embeddings = 0};

static struct hx_rt_train train = {.global_batch = 4,
                                   .lr = 3e-3,
                                   .beta1 = 0.9,
                                   .beta2 = 0.95,
                                   .eps = 1e-8,
                                   .weight_decay = 0.1,
                                   .grad_clip = 1.0,
                                   .warmup_steps = 1,
                                   .steps = 3,
                                   .seed = 1234,
                                   .data = NULL,
                                   .checkpoint_every = 0,
                                   .checkpoint_dir = NULL,
                                   .precision = HX_RT_FP32};

static const int tp_group[] = {0}, head_bounds[] = {0, 2}, ffn_bounds[] = {0, 256};

static const struct hx_rt_op schedule[] = {
    {HX_RT_FORWARD, 0}, {HX_RT_BACKWARD, 0},  {HX_RT_FORWARD, 1},
    {HX_RT_BACKWARD, 1}, {HX_RT_GRAD_SYNC, -1}, {HX_RT_OPTIMIZER, -1},
};

static const struct hx_rt_rank_config config = {
    .program = "rank_0000",
    .rank = 0,
    .world_size = 1,
    .fingerprint = "rt-backend-test",
    .pipeline = 0,
    .npipelines = 1,
    .stage = 0,
    .nstages = 1,
    .tp_rank = 0,
    .tp = 1,
    .tp_group = tp_group,
    .leader_tp_rank = 0,
    .head_bounds = head_bounds,
    .ffn_bounds = ffn_bounds,
    .recompute = 0,
    .layer_begin = 0,
    .layer_end = 2,
    .has_embedding = 1,
    .has_head = 1,
    .micro_batch_size = 2,
    .micro_batches = 2,
    .activation_slots = 1,
    .first_sequence = 0,
    .prev_leader = -1,
    .next_leader = -1,
    .model = &model,
    .train = &train,
    .ngroups = 0,
    .groups = NULL,
    .nops = (int)(sizeof schedule / sizeof schedule[0]),
    .schedule = schedule,
    .device_type = "H200",
    .device_memory_bytes = 1 << 30,
};

int main(int argc, char **argv) {
  if (argc > 2 && !strcmp(argv[1], "--precision")) {
    if (strcmp(argv[2], "fp32") && strcmp(argv[2], "bf16")) {
      fprintf(stderr, "rt_backend: --precision fp32 or bf16, not '%s'\n", argv[2]);
      return 2;
    }
    train.precision = strcmp(argv[2], "bf16") ? HX_RT_FP32 : HX_RT_BF16;
    argv[2] = argv[0];
    argv += 2;
    argc -= 2;
  }
#ifdef HX_TEST_CUDA
  if (gpu_count() == 0) {
    fprintf(stderr, "rt_backend_cuda: no CUDA device: skipped\n");
    return 77;
  }
#endif
  return hx_rt_main(&config, argc, argv);
}
