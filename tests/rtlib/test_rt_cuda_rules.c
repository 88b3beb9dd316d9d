/* The CUDA backend's pure rules (rtlib/cuda/binding.c, staging.c), which
 * run on any machine: which GPU a rank takes, whether a device's name is
 * the plan's GPU type, the memory check's verdict and message, the pieces
 * of a staged all-reduce, bf16 on the host, and gradient runs grouped into
 * 2-D copies. The CUDA calls around them need a GPU (rtlib.backend_cuda). */
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "rtlib/cuda/cuda_backend.h"
#include "tests/check.h"

static void test_pick_device(void) {
  CHECK(rt_cuda_pick_device(0, 8) == 0);
  CHECK(rt_cuda_pick_device(7, 8) == 7);
  CHECK(rt_cuda_pick_device(9, 8) == 1);
  CHECK(rt_cuda_pick_device(3, 1) == 0); /* four ranks on one GPU: all on device 0 */
  CHECK(rt_cuda_pick_device(2, 0) == 0);
}

static void test_names(void) {
  CHECK(rt_cuda_name_matches("NVIDIA H100 80GB HBM3", "H100"));
  CHECK(rt_cuda_name_matches("NVIDIA H200", "h200"));
  CHECK(rt_cuda_name_matches("NVIDIA A100-SXM4-80GB", "A100"));
  CHECK(rt_cuda_name_matches("NVIDIA GeForce RTX 4090", "RTX4090"));
  CHECK(rt_cuda_name_matches("NVIDIA GeForce RTX 4090", "RTX 4090"));
  CHECK(rt_cuda_name_matches("NVIDIA GeForce RTX 4090", "4090"));
  CHECK(rt_cuda_name_matches("NVIDIA GH200 480GB", "GH200"));
  CHECK(!rt_cuda_name_matches("NVIDIA L40S", "L40"));   /* another GPU */
  CHECK(!rt_cuda_name_matches("NVIDIA GH200 480GB", "H200"));
  CHECK(!rt_cuda_name_matches("NVIDIA A800 80GB PCIe", "A100"));
  CHECK(!rt_cuda_name_matches("NVIDIA GeForce RTX 3090", "RTX4090"));
  CHECK(!rt_cuda_name_matches("NVIDIA H100", "H100 NVL")); /* the type says more than the name */
  CHECK(!rt_cuda_name_matches("NVIDIA H100", "cpu"));
  CHECK(!rt_cuda_name_matches(NULL, "H100"));
  CHECK(rt_cuda_name_matches("NVIDIA H100", NULL)); /* no type in the plan: nothing to warn */
  CHECK(rt_cuda_name_matches("NVIDIA H100", "--"));
}

static void test_memory(void) {
  const int64_t gib = INT64_C(1) << 30;
  char msg[512] = "";
  CHECK(rt_cuda_memory_fits(0, 10, 20, 0, "x", msg, sizeof msg)); /* unknown: no check */
  CHECK(rt_cuda_memory_fits(40 * gib, 40 * gib, 80 * gib, 0, "x", msg, sizeof msg));
  CHECK(!strcmp(msg, ""));
  CHECK(!rt_cuda_memory_fits(90 * gib, 20 * gib + gib / 2, 141 * gib, 1, "NVIDIA H200", msg,
                             sizeof msg));
  CHECK(strstr(msg, "90.00 GiB") != NULL);
  CHECK(strstr(msg, "20.50 GiB free of 141.00 GiB") != NULL);
  CHECK(strstr(msg, "device 1 (NVIDIA H200)") != NULL);
  char small[24];
  CHECK(!rt_cuda_memory_fits(2, 1, 2, 0, "x", small, sizeof small)); /* truncated, terminated */
  CHECK(strlen(small) == sizeof small - 1);
}

static void test_pieces(void) {
  CHECK(rt_stage_piece_elems(64 << 20, 4) == 16 << 20);
  CHECK(rt_stage_piece_elems(64 << 20, 6) == (64 << 20) / 6); /* bf16 + its fp32 sum */
  CHECK(rt_stage_piece_elems(3, 4) == 1);                     /* never zero */
  CHECK(rt_stage_piece_elems(INT64_C(1) << 40, 4) == INT_MAX); /* one MPI count */
  CHECK(rt_stage_piece_elems(100, 0) == 100);
}

static float from_bits(uint32_t bits) {
  float f;
  memcpy(&f, &bits, sizeof f);
  return f;
}

static uint16_t bf16(float f) {
  uint16_t h;
  rt_bf16_from_f32(&h, &f, 1);
  return h;
}

static void test_bf16(void) {
  CHECK(bf16(1.0f) == 0x3f80);
  CHECK(bf16(-2.0f) == 0xc000);
  /* Ties go to even: 1 + 2^-8 lies halfway between 1 and 1 + 2^-7. */
  CHECK(bf16(1.0f + 0x1p-8f) == 0x3f80);
  CHECK(bf16(1.0f + 3 * 0x1p-8f) == 0x3f82);
  CHECK(bf16(1.0f + 0x1p-8f + 0x1p-20f) == 0x3f81); /* past the tie: up */
  CHECK(bf16(from_bits(0x7f7fffff)) == 0x7f80);     /* FLT_MAX rounds to infinity */
  CHECK(bf16(INFINITY) == 0x7f80);
  uint16_t nan = bf16(from_bits(0x7f800001)); /* a payload that rounding would lose */
  CHECK((nan & 0x7f80) == 0x7f80 && (nan & 0x7f) != 0);
  int bad = 0;
  for (uint32_t h = 0; h < 0x10000; h++) { /* every finite bf16 survives the round trip */
    uint16_t x = (uint16_t)h, back;
    float f;
    rt_f32_from_bf16(&f, &x, 1);
    if (!isfinite(f))
      continue;
    rt_bf16_from_f32(&back, &f, 1);
    bad += back != x;
  }
  CHECK(bad == 0);
}

/* Every run of the list covered once, in order, by the blocks. */
static int blocks_of(const struct rt_run *runs, int n, struct rt_block *out) {
  int nb = 0;
  long packed = 0;
  for (int k = 0; k < n;) {
    k = rt_runs_block(runs, n, k, packed, &out[nb]);
    packed += out[nb].width * out[nb].rows;
    nb++;
  }
  return nb;
}

static void test_blocks(void) {
  /* Columns [2, 5) of a [4, 10] matrix at 100: one block of 4 rows; then
   * three runs of 8 at one stride: a second block. */
  struct rt_run runs[] = {{102, 3}, {112, 3}, {122, 3}, {132, 3}, {500, 8}, {600, 8}, {700, 8}};
  struct rt_block b[8];
  int nb = blocks_of(runs, 7, b);
  CHECK(nb == 2);
  CHECK(b[0].off == 102 && b[0].width == 3 && b[0].stride == 10 && b[0].rows == 4 &&
        b[0].packed == 0);
  CHECK(b[1].off == 500 && b[1].width == 8 && b[1].stride == 100 && b[1].rows == 3 &&
        b[1].packed == 12);
  struct rt_run uneven[] = {{0, 4}, {10, 4}, {25, 4}, {30, 2}};
  nb = blocks_of(uneven, 4, b);
  CHECK(nb == 3);
  CHECK(b[0].rows == 2 && b[0].stride == 10);
  CHECK(b[1].off == 25 && b[1].rows == 1 && b[1].stride == 4 && b[1].packed == 8);
  CHECK(b[2].off == 30 && b[2].width == 2 && b[2].packed == 12);
  struct rt_run overlapping[] = {{0, 4}, {2, 4}};
  nb = blocks_of(overlapping, 2, b);
  CHECK(nb == 2 && b[0].rows == 1 && b[1].packed == 4);
  struct rt_run one[] = {{7, 5}};
  nb = blocks_of(one, 1, b);
  CHECK(nb == 1 && b[0].off == 7 && b[0].rows == 1 && b[0].width == 5);
}

/* NCCL when the build has it and no GPU is shared; the staged transport
 * when asked for, or when ranks share GPUs (with a note); refusals. */
static void test_pick_transport(void) {
  char note[256];
  CHECK(rt_cuda_pick_transport("nccl", true, false, note, sizeof note) == RT_CUDA_NCCL);
  CHECK(note[0] == 0);
  CHECK(rt_cuda_pick_transport("mpi", true, false, note, sizeof note) == RT_CUDA_STAGED);
  CHECK(rt_cuda_pick_transport(NULL, false, false, note, sizeof note) == RT_CUDA_STAGED);
  CHECK(rt_cuda_pick_transport("nccl", true, true, note, sizeof note) == RT_CUDA_STAGED);
  CHECK(strstr(note, "ranks share a GPU here") != NULL);
  CHECK(rt_cuda_pick_transport("mpi", true, true, note, sizeof note) == RT_CUDA_STAGED);
  CHECK(rt_cuda_pick_transport("nccl", false, false, note, sizeof note) == -1);
  CHECK(strstr(note, "built without NCCL") != NULL);
  CHECK(rt_cuda_pick_transport("gloo", true, false, note, sizeof note) == -1);
  CHECK(strcmp(note, "HEXIC_TRANSPORT='gloo' is neither nccl nor mpi") == 0);
}

int main(void) {
  test_pick_device();
  test_pick_transport();
  test_names();
  test_memory();
  test_pieces();
  test_bf16();
  test_blocks();
  if (failures)
    fprintf(stderr, "test_rt_cuda_rules: %d failure(s)\n", failures);
  return failures != 0;
}
