/* Prints the launch of every CUDA kernel at the largest shapes
 * --target=cuda accepts, one line per (shape, kernel):
 *
 *   KERNEL THREADS DYN_SMEM OPT_IN GRID_X GRID_Y GRID_Z
 *
 * from hxc_launch_table (kernels/cuda/: each launcher's own functions pick
 * block, grid and dynamic shared memory), for check_resources.py to hold
 * against the registers and shared memory ptxas gives each kernel. Runs
 * without a GPU: nothing here touches the device.
 *
 * The shapes: hidden up to 16384 (codegen/emit_cuda.c's CUDA_MAX_HIDDEN),
 * head dims 16, 32, 64 and 128 (its cuda_head_dims) with every head on one
 * rank (TP 1: hidden / hd query and kv heads), ffn and vocab 256 Ki, a
 * micro-batch from 1 to 2^24 sequences (passes/sema.c's MAX_BATCH; 65535
 * and 65536 on each side of gridDim.z's limit) of 1 or 128 Ki tokens, and
 * an optimizer group of 2^40 floats. */
#include <stdio.h>

#include "kernels/cuda/llama_cuda.h"

static void print_launch(void *arg, const char *kernel,
                         const struct hxc_launch_dims *l) {
  (void)arg;
  printf("%s %d %zu %d %lu %lu %lu\n", kernel, l->threads, l->smem,
         l->opt_in ? 1 : 0, l->gx, l->gy, l->gz);
}

int main(void) {
  const int head_dims[] = {16, 32, 64, 128};
  const int hiddens[] = {16384, 128};
  const long batches[] = {1, 65535, 65536, 1L << 24};
  const int seq_lens[] = {1, 131072};
  for (int hd : head_dims)
    for (int hidden : hiddens)
      for (long nseq : batches)
        for (int seq_len : seq_lens) {
          struct hxc_launch_shapes s = {};
          s.nseq = nseq;
          s.seq_len = seq_len;
          s.hidden = hidden;
          s.ffn = 262144;
          s.nq = hidden / hd;
          s.nkv = hidden / hd;
          s.hd = hd;
          s.vocab = 262144;
          s.group_elems = 1L << 40;
          s.group_chunks = s.group_elems / 65536;
          hxc_launch_table(&s, print_launch, NULL);
        }
  return 0;
}
