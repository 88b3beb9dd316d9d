/* Token files (llm.c shards of both versions, raw uint16), their validation,
 * the synthetic stream, and the spec's batching offsets. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kernels/cpu/llama.h"
#include "rt_test.h"
#include "rtlib/rt_data.h"

static char tmpdir[256];

static const char *tmp_path(const char *name) {
  static char buf[512];
  snprintf(buf, sizeof buf, "%s/%s", tmpdir, name);
  return buf;
}

static void write_bytes(const char *path, const void *p, size_t n) {
  FILE *f = fopen(path, "wb");
  CHECK(f && fwrite(p, 1, n, f) == n);
  if (f)
    fclose(f);
}

static size_t read_bytes(const char *path, unsigned char *buf, size_t cap) {
  FILE *f = fopen(path, "rb");
  size_t n = f ? fread(buf, 1, cap, f) : 0;
  if (f)
    fclose(f);
  return n;
}

/* Opens path expecting failure, and that the message mentions `needle`. */
static void expect_rejected(const char *path, enum hx_rt_data_format fmt, int64_t vocab,
                            int64_t seq_len, const char *needle) {
  struct hx_rt_data d;
  char err[512] = "";
  CHECK(!hx_rt_data_open(&d, path, fmt, vocab, seq_len, 0, err, sizeof err));
  CHECK_CONTAINS(err, needle);
  CHECK_CONTAINS(err, path);
  CHECK(!d.has_file && d.path == NULL);
}

static void test_splitmix_vector(void) {
  /* Published first outputs of splitmix64 seeded with 0 and 1234567. */
  CHECK(hxk_splitmix64(0) == UINT64_C(0xE220A8397B1DCDAF));
  CHECK(hxk_splitmix64(UINT64_C(0x9E3779B97F4A7C15)) == UINT64_C(0x6E789E6AA1B965F4));
  CHECK(hxk_splitmix64(1234567) == UINT64_C(6457827717110365317));
}

static void test_shard_round_trip(bool wide) {
  enum { N = 3000 };
  uint32_t tokens[N];
  for (int k = 0; k < N; k++)
    tokens[k] = (uint32_t)((k * 7919u) % (wide ? 100000u : 50257u));
  const char *path = tmp_path(wide ? "u32.bin" : "u16.bin");
  char err[512] = "";
  CHECK(hx_rt_shard_write(path, tokens, N, false, err, sizeof err));
  unsigned char raw[4 * 256 + 4 * N + 8];
  size_t size = read_bytes(path, raw, sizeof raw);
  CHECK(size == 1024 + (size_t)N * (wide ? 4 : 2));
  /* header[0..2] little-endian: magic, version, count */
  int32_t h[3];
  memcpy(h, raw, sizeof h);
  CHECK(h[0] == (wide ? 20240801 : 20240520));
  CHECK(h[1] == (wide ? 7 : 1));
  CHECK(h[2] == N);
  struct hx_rt_data d;
  CHECK(hx_rt_data_open(&d, path, HX_DATA_AUTO, wide ? 100000 : 50257, 64, 0, err, sizeof err));
  CHECK(d.kind == (wide ? HX_DATA_KIND_SHARD_U32 : HX_DATA_KIND_SHARD_U16));
  CHECK(d.ntokens == N);
  int mismatches = 0;
  for (int k = 0; k < N; k++)
    mismatches += hx_rt_data_token(&d, k) != tokens[k];
  CHECK(mismatches == 0);
  hx_rt_data_close(&d);
  CHECK(hx_rt_data_open(&d, path, HX_DATA_SHARD, wide ? 100000 : 50257, 64, 0, err, sizeof err));
  hx_rt_data_close(&d);
}

static void test_forced_u32(void) {
  uint32_t tokens[300];
  for (int k = 0; k < 300; k++)
    tokens[k] = (uint32_t)k % 256;
  char err[512] = "";
  const char *path = tmp_path("forced32.bin");
  CHECK(hx_rt_shard_write(path, tokens, 300, true, err, sizeof err));
  struct hx_rt_data d;
  CHECK(hx_rt_data_open(&d, path, HX_DATA_AUTO, 256, 16, 0, err, sizeof err));
  CHECK(d.kind == HX_DATA_KIND_SHARD_U32);
  CHECK(hx_rt_data_token(&d, 299) == 299 % 256);
  hx_rt_data_close(&d);
}

static void test_raw16(void) {
  enum { N = 1000 };
  unsigned char raw[2 * N];
  for (int k = 0; k < N; k++) {
    raw[2 * k] = (unsigned char)(k & 0xff);
    raw[2 * k + 1] = (unsigned char)(k >> 8);
  }
  const char *path = tmp_path("raw.bin");
  write_bytes(path, raw, sizeof raw);
  struct hx_rt_data d;
  char err[512] = "";
  CHECK(hx_rt_data_open(&d, path, HX_DATA_AUTO, 1000, 32, 0, err, sizeof err));
  CHECK(d.kind == HX_DATA_KIND_RAW_U16);
  CHECK(d.ntokens == N);
  CHECK(hx_rt_data_token(&d, 0) == 0 && hx_rt_data_token(&d, 999) == 999);
  hx_rt_data_close(&d);
  CHECK(hx_rt_data_open(&d, path, HX_DATA_RAW16, 1000, 32, 0, err, sizeof err));
  hx_rt_data_close(&d);
  /* An explicit shard request on a headerless file is refused. */
  expect_rejected(path, HX_DATA_SHARD, 1000, 32, "bad magic");
  expect_rejected(path, HX_DATA_AUTO, 400, 32, "token 400 at position 400 is >= vocab 400");
  /* Shorter than a shard header: raw is the only reading. */
  write_bytes(tmp_path("short.bin"), raw, 600);
  CHECK(hx_rt_data_open(&d, tmp_path("short.bin"), HX_DATA_AUTO, 1000, 32, 0, err, sizeof err));
  CHECK(d.kind == HX_DATA_KIND_RAW_U16 && d.ntokens == 300);
  hx_rt_data_close(&d);
  write_bytes(tmp_path("odd.bin"), raw, 7);
  expect_rejected(tmp_path("odd.bin"), HX_DATA_AUTO, 1000, 1, "odd size");
}

static void test_bad_headers(void) {
  uint32_t tokens[400];
  for (int k = 0; k < 400; k++)
    tokens[k] = (uint32_t)k % 200;
  char err[512] = "";
  const char *good = tmp_path("good.bin");
  CHECK(hx_rt_shard_write(good, tokens, 400, false, err, sizeof err));
  unsigned char buf[1024 + 800];
  size_t size = read_bytes(good, buf, sizeof buf);
  CHECK(size == sizeof buf);

  unsigned char bad[sizeof buf];
  memcpy(bad, buf, size);
  bad[0] ^= 0x5a; /* damaged magic, header otherwise intact */
  write_bytes(tmp_path("badmagic.bin"), bad, size);
  expect_rejected(tmp_path("badmagic.bin"), HX_DATA_AUTO, 256, 16, "bad magic");

  memcpy(bad, buf, size);
  bad[4] = 7; /* uint16 magic with the uint32 version */
  write_bytes(tmp_path("badversion.bin"), bad, size);
  expect_rejected(tmp_path("badversion.bin"), HX_DATA_AUTO, 256, 16, "version 7 (expected 1)");

  write_bytes(tmp_path("truncated.bin"), buf, size - 3);
  expect_rejected(tmp_path("truncated.bin"), HX_DATA_AUTO, 256, 16, "truncated shard");
  write_bytes(tmp_path("headeronly.bin"), buf, 600);
  expect_rejected(tmp_path("headeronly.bin"), HX_DATA_SHARD, 256, 16, "truncated");

  memcpy(bad, buf, size);
  bad[1024 + 2 * 123] = 250; /* token 123 becomes 250 > vocab 200 */
  write_bytes(tmp_path("badtoken.bin"), bad, size);
  expect_rejected(tmp_path("badtoken.bin"), HX_DATA_AUTO, 200, 16, "token 250 at position 123");

  expect_rejected(good, HX_DATA_AUTO, 256, 399, "needs at least 401");
  expect_rejected(tmp_path("does-not-exist.bin"), HX_DATA_AUTO, 256, 16, "cannot open");
}

/* A file that shrinks or changes under an open stream (issue 10, item 12):
 * a read past its new end, or of a token past the vocabulary, is an error
 * naming the file, never a SIGBUS. */
static void test_changed_while_open(void) {
  enum { N = 30000, T = 16 };
  static uint32_t tokens[N];
  for (int k = 0; k < N; k++)
    tokens[k] = (uint32_t)(k * 7 % 200);
  char err[512] = "";
  const char *path = tmp_path("shrinks.bin");
  CHECK(hx_rt_shard_write(path, tokens, N, false, err, sizeof err));
  struct hx_rt_data d;
  CHECK(hx_rt_data_open(&d, path, HX_DATA_AUTO, 200, T, 0, err, sizeof err));
  int32_t in[T], tg[T];
  /* step 1000 of batch 1: tokens from 16000 on, 8 pages into the file */
  CHECK(hx_rt_data_sequence(&d, T, 1, 1000, 0, in, tg, err, sizeof err));
  CHECK(in[0] == (int32_t)tokens[16000] && tg[T - 1] == (int32_t)tokens[16000 + T]);
  /* Rewritten in place: token 16005 becomes 250, past the vocabulary. */
  FILE *f = fopen(path, "r+b");
  CHECK(f && fseek(f, 1024 + 2 * 16005, SEEK_SET) == 0 && fputc(250, f) != EOF && fclose(f) == 0);
  CHECK(!hx_rt_data_sequence(&d, T, 1, 1000, 0, in, tg, err, sizeof err));
  CHECK_CONTAINS(err,
                 "token 250 at position 16005 is >= vocab 200 (the file changed while training?)");
  /* Truncated to 100 tokens: a mapping would raise SIGBUS on that page. */
  CHECK(truncate(path, 1024 + 200) == 0);
  CHECK(!hx_rt_data_sequence(&d, T, 1, 1000, 0, in, tg, err, sizeof err));
  CHECK_CONTAINS(err, path);
  CHECK_CONTAINS(err, "the file ends at byte 1224 but held 61024 bytes when training started");
  CHECK(hx_rt_data_token(&d, N - 1) == UINT32_MAX);
  CHECK(hx_rt_data_sequence(&d, T, 1, 0, 0, in, tg, err, sizeof err)); /* tokens 0..16 remain */
  hx_rt_data_close(&d);
  hx_rt_data_close(&d); /* twice: safe */
}

/* Files that are not training data (issue 10, item 12): all one token (1 KiB
 * of zeros reads as 512 raw tokens), or shorter than a sequence. */
static void test_not_training_data(void) {
  unsigned char zeros[1024] = {0};
  write_bytes(tmp_path("zeros.bin"), zeros, sizeof zeros);
  expect_rejected(tmp_path("zeros.bin"), HX_DATA_AUTO, 256, 64,
                  "all 512 tokens are 0: not training data");
  uint32_t same[400];
  for (int k = 0; k < 400; k++)
    same[k] = 7;
  char err[512] = "";
  CHECK(hx_rt_shard_write(tmp_path("same.bin"), same, 400, false, err, sizeof err));
  expect_rejected(tmp_path("same.bin"), HX_DATA_AUTO, 256, 16, "all 400 tokens are 7");
  unsigned char raw[66];
  for (int k = 0; k < 66; k++)
    raw[k] = (unsigned char)(k % 2 ? 0 : k);
  write_bytes(tmp_path("short33.bin"), raw, sizeof raw); /* 33 raw tokens */
  expect_rejected(tmp_path("short33.bin"), HX_DATA_AUTO, 256, 32,
                  "33 tokens; seq_len 32 needs at least 34");
  struct hx_rt_data d;
  CHECK(hx_rt_data_open(&d, tmp_path("short33.bin"), HX_DATA_AUTO, 256, 31, 0, err, sizeof err));
  hx_rt_data_close(&d);
}

static void test_offsets(void) {
  /* N=100, T=8: off = (g*8) mod 91 with g = s*B + j */
  CHECK(hx_rt_data_offset(100, 8, 3, 0, 0) == 0);
  CHECK(hx_rt_data_offset(100, 8, 3, 2, 1) == 56); /* g=7 */
  CHECK(hx_rt_data_offset(100, 8, 3, 5, 2) == 45); /* g=17: 136 mod 91 */
  CHECK(hx_rt_data_offset(100, 8, 3, 1000, 2) == (3002 * 8) % 91);
  /* Huge steps do not overflow: (g*T) mod M computed exactly. */
  int64_t n = INT64_C(5000000000), t = 4096;
  int64_t g = INT64_C(3000000000000); /* s*B + j with s = 1e12, B = 3 */
  int64_t want = (int64_t)(((__int128)g * t) % (n - t - 1));
  CHECK(hx_rt_data_offset(n, t, 3, INT64_C(1000000000000), 0) == want);
}

static void test_sequences_and_plans(void) {
  enum { N = 1000, T = 16, B = 6 };
  uint32_t tokens[N];
  for (int k = 0; k < N; k++)
    tokens[k] = (uint32_t)(k * 31 % 97);
  char err[512] = "";
  const char *path = tmp_path("seq.bin");
  CHECK(hx_rt_shard_write(path, tokens, N, false, err, sizeof err));
  struct hx_rt_data d;
  CHECK(hx_rt_data_open(&d, path, HX_DATA_AUTO, 97, T, 0, err, sizeof err));
  int32_t in[T], tg[T];
  CHECK(hx_rt_data_sequence(&d, T, B, 3, 4, in, tg, err, sizeof err));
  int64_t off = (int64_t)(3 * B + 4) * T % (N - T - 1);
  for (int t = 0; t < T; t++) {
    CHECK(in[t] == (int32_t)tokens[off + t]);
    CHECK(tg[t] == (int32_t)tokens[off + t + 1]);
  }
  /* Two plans: one pipeline of 6 sequences, or pipelines of 2 and 4 taking
   * j = 0..1 and 2..5 in micro-batches of 1 and 2: the same tokens. */
  int32_t whole[B * T], split[B * T];
  CHECK(hx_rt_data_batch(&d, T, B, 7, 0, B, whole, NULL, err, sizeof err));
  CHECK(hx_rt_data_batch(&d, T, B, 7, 0, 1, split, NULL, err, sizeof err));
  CHECK(hx_rt_data_batch(&d, T, B, 7, 1, 1, split + T, NULL, err, sizeof err));
  CHECK(hx_rt_data_batch(&d, T, B, 7, 2, 2, split + 2 * T, NULL, err, sizeof err));
  CHECK(hx_rt_data_batch(&d, T, B, 7, 4, 2, split + 4 * T, NULL, err, sizeof err));
  CHECK(memcmp(whole, split, sizeof whole) == 0);
  hx_rt_data_close(&d);
}

static void test_synthetic(void) {
  struct hx_rt_data d;
  char err[512] = "";
  CHECK(hx_rt_data_open(&d, NULL, HX_DATA_AUTO, 50257, 1024, 42, err, sizeof err));
  CHECK(d.kind == HX_DATA_KIND_SYNTHETIC && d.ntokens == (1 << 20));
  for (int64_t k = 0; k < 5; k++) {
    uint64_t want = hxk_splitmix64(UINT64_C(42) ^ (0x5EED + (uint64_t)k)) % 50257;
    CHECK(hx_rt_data_token(&d, k) == want);
  }
  /* Same seed, same stream; another seed, another stream. */
  struct hx_rt_data e;
  CHECK(hx_rt_data_open(&e, "", HX_DATA_AUTO, 50257, 1024, 43, err, sizeof err));
  int same = 0;
  for (int64_t k = 0; k < 100; k++)
    same += hx_rt_data_token(&d, k) == hx_rt_data_token(&e, k);
  CHECK(same < 5);
  char desc[256];
  hx_rt_data_describe(&d, NULL, desc, sizeof desc);
  CHECK_CONTAINS(desc, "synthetic tokens: 1048576 tokens, seed 42");
  hx_rt_data_close(&d);
  hx_rt_data_close(&e);
}

int main(void) {
  snprintf(tmpdir, sizeof tmpdir, "/tmp/hexic-rt-data-XXXXXX");
  if (!mkdtemp(tmpdir)) {
    perror("mkdtemp");
    return 1;
  }
  test_splitmix_vector();
  test_shard_round_trip(false);
  test_shard_round_trip(true);
  test_forced_u32();
  test_raw16();
  test_bad_headers();
  test_changed_while_open();
  test_not_training_data();
  test_offsets();
  test_sequences_and_plans();
  test_synthetic();
  rt_test_remove_dir(tmpdir);
  return rt_test_finish("test_rt_data");
}
