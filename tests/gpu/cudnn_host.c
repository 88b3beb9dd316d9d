/* cuDNN's fused attention (rtlib/cuda/attention_cudnn.c) on a machine
 * without a GPU: what can be checked before one runs it.
 *
 *   cudnn_host          the shape rules (refusals with their reasons), the
 *                       4-d views of hexic's layout, and every tensor and
 *                       operation descriptor of the forward and backward
 *                       graphs finalized by cuDNN itself (dims, strides and
 *                       types of each product, mask, softmax and reduction)
 *                       for MHA and GQA shapes at head dims 64 and 128
 *   cudnn_host --open   opens the runtime state: without a GPU cudnnCreate
 *                       fails and the message names it with cuDNN's words
 *                       (ctest gpu.cudnn_host_open matches it); on a GPU it
 *                       says it opened
 *
 * What needs a GPU (the operation graph on a handle, the engines, the
 * numbers) is tests/gpu/check_kernels.cu's cudnn group. */
#include <stdio.h>
#include <string.h>

#include "rtlib/cuda/cuda_backend.h"

static int passed, failed;

static void expect(bool ok, const char *what, const char *detail) {
  printf("%s  %s%s%s\n", ok ? "PASS" : "FAIL", what, detail ? ": " : "", detail ? detail : "");
  if (ok)
    passed++;
  else
    failed++;
}

/* nseq 2, T 256, 8 query heads over 2 kv heads (group 4), hd 64, bf16 */
static struct rt_cudnn_attn_shape base(void) {
  struct rt_cudnn_attn_shape s = {2, 256, 8, 2, 64, 0, 4, 0, true};
  return s;
}

static void refusal(const char *what, struct rt_cudnn_attn_shape s, bool refused,
                    const char *needle) {
  char why[256] = "";
  bool got = rt_cudnn_attention_refuses(&s, why, sizeof why);
  expect(got == refused && (!refused || strstr(why, needle)), what, got ? why : "taken");
}

static void check_rules(void) {
  struct rt_cudnn_attn_shape s = base();
  refusal("whole layer, GQA 4", s, false, NULL);
  s.bf16 = false;
  refusal("fp32 refused", s, true, "bf16 only");
  s = base(), s.hd = 12;
  refusal("hd 12 refused", s, true, "multiples of 8 up to 128, not 12");
  s = base(), s.hd = 256;
  refusal("hd 256 refused", s, true, "not 256");
  /* a TP shard of query heads 4..7 of 16 over 4 kv heads: kv head 1 only */
  s = base(), s.nq = 4, s.nkv = 1, s.q_begin = 4, s.kv_begin = 1;
  refusal("shard keeping its group", s, false, NULL);
  /* heads 2..5 of 8 (group 4): kv heads 0 and 1, two query heads each, as
   * cuDNN maps 4 over 2 */
  s = base(), s.nq = 4, s.nkv = 2, s.q_begin = 2, s.kv_begin = 0;
  refusal("shard of two half groups", s, false, NULL);
  /* heads 1..4 of 8: three read kv head 0, one kv head 1 */
  s = base(), s.nq = 4, s.nkv = 2, s.q_begin = 1, s.kv_begin = 0;
  refusal("shard cutting groups unevenly refused", s, true,
          "query head 2 of this shard reads kv head 0, where cuDNN's GQA reads 1");
  s = base(), s.nq = 6, s.nkv = 4;
  refusal("6 heads over 4 refused", s, true, "a whole group each");
  s = base(), s.nseq = 0;
  refusal("empty refused", s, true, "empty shape");
  /* 0 and -8 are multiples of 8; group 0 would divide by zero */
  s = base(), s.hd = 0;
  refusal("hd 0 refused", s, true, "empty shape");
  s = base(), s.hd = -8;
  refusal("hd -8 refused", s, true, "empty shape");
  s = base(), s.group = 0;
  refusal("group 0 refused", s, true, "empty shape");
}

/* The plan cache's key: a call that differs in anything but reuses a
 * cached plan would skip rt_cudnn_attention_refuses (an fp32 call after a
 * bf16 one of the same dims would run bf16 plans on fp32 buffers). */
static void plan_key(const char *what, struct rt_cudnn_attn_shape b, bool same) {
  struct rt_cudnn_attn_shape a = base();
  expect(rt_cudnn_same_plan(&a, &b) == same && rt_cudnn_same_plan(&b, &a) == same, what,
         same ? NULL : "a cache hit would skip the refusal");
}

static void check_plan_key(void) {
  struct rt_cudnn_attn_shape s = base();
  plan_key("plan key: the same shape shares plans", s, true);
  s.bf16 = false;
  plan_key("plan key: fp32 misses the bf16 plans of its dims", s, false);
  /* the dims of "shard of two half groups", cutting groups otherwise */
  s = base(), s.nq = 4, s.q_begin = 1;
  struct rt_cudnn_attn_shape t = base();
  t.nq = 4, t.q_begin = 2;
  expect(!rt_cudnn_same_plan(&s, &t), "plan key: another head map misses", NULL);
  s = base(), s.group = 2;
  plan_key("plan key: another group misses", s, false);
  s = base(), s.kv_begin = 1;
  plan_key("plan key: another kv_begin misses", s, false);
  s = base(), s.nseq = 3;
  plan_key("plan key: another nseq misses", s, false);
}

static void version_rule(const char *what, long version, int seq_len, const char *needle) {
  struct rt_cudnn_attn_shape s = base();
  s.seq_len = seq_len;
  char why[256] = "";
  bool got = rt_cudnn_version_refuses(version, &s, why, sizeof why);
  expect(got == (needle != NULL) && (!needle || strstr(why, needle)), what, got ? why : "taken");
}

static void check_versions(void) {
  version_rule("cuDNN 9.19.0, T 333", 91900, 333, NULL);
  version_rule("cuDNN 9.15.1, T 333", 91501, 333, NULL);
  version_rule("cuDNN 9.15.0, T 256", 91500, 256, NULL);
  version_rule("cuDNN 9.15.0, T 333 refused", 91500, 333, "multiple of 128");
  version_rule("cuDNN 9.10.1 refused", 91001, 2048, "9.10.1's attention backward has known bugs");
  version_rule("cuDNN 8.9.7 refused", 8907, 2048, "cuDNN 9");
  version_rule("one-token sequences refused", 91900, 1, "one token");
}

static void expect_view(const char *what, const int64_t *got, const int64_t *want) {
  char text[160];
  snprintf(text, sizeof text, "[%lld %lld %lld %lld]", (long long)got[0], (long long)got[1],
           (long long)got[2], (long long)got[3]);
  expect(memcmp(got, want, 4 * sizeof *got) == 0, what, text);
}

static void check_views(void) {
  int64_t dims[4], strides[4];
  /* q [2*256, 8*64]: token n = s*256 + t, head h at column h*64 */
  rt_cudnn_token_view(2, 256, 8, 64, false, dims, strides);
  expect_view("q dims", dims, (const int64_t[]){2, 8, 256, 64});
  expect_view("q strides", strides, (const int64_t[]){256 * 512, 64, 512, 1});
  rt_cudnn_token_view(2, 256, 2, 64, true, dims, strides);
  expect_view("k^T dims", dims, (const int64_t[]){2, 2, 64, 256});
  expect_view("k^T strides", strides, (const int64_t[]){256 * 128, 64, 1, 128});
  rt_cudnn_stats_view(2, 256, 8, dims, strides);
  expect_view("stats dims", dims, (const int64_t[]){2, 8, 256, 1});
  expect_view("stats strides", strides, (const int64_t[]){8 * 256, 256, 1, 1});
  struct rt_cudnn_attn_shape s = base();
  size_t rows = 2 * 8 * 256;
  expect(rt_cudnn_backward_extra_bytes(&s) == rows * 64 * 4 + rows * 4,
         "backward's fp32 buffers: dQ accumulator + row sums", NULL);
}

/* Every descriptor finalized by cuDNN: forward 14 operations, backward 22
 * (MHA) or 24 (GQA: dK and dV summed over each group's query heads). */
static void describe(const char *what, struct rt_cudnn_attn_shape s, int want_bwd) {
  int fwd = 0, bwd = 0;
  char why[512] = "";
  bool ok = rt_cudnn_attention_describe(&s, &fwd, &bwd, why, sizeof why);
  char text[600];
  snprintf(text, sizeof text, "%d + %d operations%s%s", fwd, bwd, ok ? "" : "; ", why);
  expect(ok && fwd == 14 && bwd == want_bwd, what, text);
}

static void check_graphs(void) {
  printf("cudnn_host: cuDNN %ld\n", rt_cudnn_version());
  struct rt_cudnn_attn_shape s = base();
  describe("graphs: GQA 4, hd 64, T 256", s, 24);
  s = base(), s.nkv = 8, s.group = 1, s.hd = 128, s.seq_len = 333;
  describe("graphs: MHA, hd 128, T 333", s, 22);
  /* the 1.3B Llama's layer: 8 sequences of 2048, 16 heads of 128 */
  s = (struct rt_cudnn_attn_shape){8, 2048, 16, 16, 128, 0, 1, 0, true};
  describe("graphs: 1.3B layer", s, 22);
  s = base(), s.nq = 4, s.nkv = 1, s.q_begin = 4, s.kv_begin = 1;
  describe("graphs: TP shard, one kv head", s, 24);
  int fwd, bwd;
  char why[256] = "";
  s = base(), s.bf16 = false;
  expect(!rt_cudnn_attention_describe(&s, &fwd, &bwd, why, sizeof why) && fwd == 0 &&
             strstr(why, "bf16 only"),
         "graphs: fp32 refused before any descriptor", why);
}

static void *no_alloc(size_t bytes, void *arg) {
  (void)bytes, (void)arg;
  return NULL;
}
static void no_release(void *p, void *arg) { (void)p, (void)arg; }

int main(int argc, char **argv) {
  if (argc == 2 && strcmp(argv[1], "--open") == 0) {
    /* fatal without a GPU (the kernels' default handler prints and exits) */
    struct rt_cudnn_attention *a = rt_cudnn_attention_open(NULL, no_alloc, no_release, NULL);
    printf("cudnn_host: opened on a GPU (cuDNN %ld)\n", rt_cudnn_version());
    rt_cudnn_attention_close(a);
    return 0;
  }
  check_rules();
  check_plan_key();
  check_versions();
  check_views();
  check_graphs();
  printf("cudnn_host: %d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}
