/* Checkpoint files without MPI: write, verify, find the newest complete one,
 * skip corrupt / truncated / incomplete ones, keep the last two, load back. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "rt_test.h"
#include "rtlib/rt_ckpt.h"

enum { NRANKS = 2, NTENSORS = 3 };
static const int64_t tensor_sizes[NTENSORS] = {5, 1, 37};
static const char *FP = "plan-3f2a9c";
static char dir[256];

/* One rank's buffers, filled with values that depend on rank and step. */
struct rank_state {
  float data[NTENSORS][3][64];
  struct hx_rt_ckpt_tensor tensors[NTENSORS];
  struct hx_rt_ckpt_state st;
};

static void rank_state_init(struct rank_state *r, int rank, int64_t step) {
  for (int i = 0; i < NTENSORS; i++) {
    for (int k = 0; k < 3; k++)
      for (int e = 0; e < 64; e++)
        r->data[i][k][e] = (float)(rank * 1000 + step * 10 + i) + (float)(k * 64 + e) * 0.125f;
    r->tensors[i] = (struct hx_rt_ckpt_tensor){.param = r->data[i][0],
                                               .adam_m = r->data[i][1],
                                               .adam_v = r->data[i][2],
                                               .n = tensor_sizes[i]};
  }
  r->st = (struct hx_rt_ckpt_state){.step = step,
                                    .data_pos = (uint64_t)step * 7,
                                    .ntensors = NTENSORS,
                                    .tensors = r->tensors,
                                    .schedule_steps = 100};
}

/* What the collective save does, done by one process for every rank. */
static bool save_all(int64_t step, const char *fp) {
  char err[512] = "";
  uint64_t sizes[NRANKS], sums[NRANKS];
  int counts[NRANKS];
  int64_t index[NRANKS * NTENSORS * HX_RT_CKPT_INDEX_INTS];
  struct rank_state rs;
  bool ok = hx_rt_ckpt_prepare(dir, step, err, sizeof err);
  for (int r = 0; ok && r < NRANKS; r++) {
    rank_state_init(&rs, r, step);
    counts[r] = NTENSORS;
    ok = hx_rt_ckpt_write_rank(dir, r, fp, &rs.st, &sizes[r], &sums[r],
                               index + r * NTENSORS * HX_RT_CKPT_INDEX_INTS, err, sizeof err);
  }
  struct hx_rt_ckpt_files files = {NRANKS, sizes, sums, counts, index};
  ok = ok && hx_rt_ckpt_write_manifest(dir, &rs.st, fp, &files, err, sizeof err);
  if (!ok)
    fprintf(stderr, "save_all(%lld): %s\n", (long long)step, err);
  return ok;
}

static bool step_dir_exists(int64_t step) {
  char path[512];
  struct stat st;
  hx_rt_ckpt_step_dir(path, sizeof path, dir, step);
  return stat(path, &st) == 0;
}

static void flip_byte(const char *path, long at) {
  FILE *f = fopen(path, "r+b");
  CHECK(f != NULL);
  if (!f)
    return;
  fseek(f, at, SEEK_SET);
  int c = fgetc(f);
  fseek(f, at, SEEK_SET);
  fputc(c ^ 0x01, f);
  fclose(f);
}

static void test_write_verify_load(void) {
  CHECK(hx_rt_ckpt_find_newest(dir, NRANKS, FP, NULL) == -1); /* nothing yet */
  CHECK(save_all(10, FP));
  char err[512] = "";
  CHECK(hx_rt_ckpt_verify(dir, 10, NRANKS, FP, err, sizeof err));
  CHECK(hx_rt_ckpt_find_newest(dir, NRANKS, FP, NULL) == 10);
  /* Another plan or world size never resumes from it. */
  CHECK(!hx_rt_ckpt_verify(dir, 10, NRANKS, "other-plan", err, sizeof err));
  CHECK_CONTAINS(err, "another plan");
  CHECK(hx_rt_ckpt_find_newest(dir, 3, FP, NULL) == -1);

  struct rank_state want, got;
  rank_state_init(&want, 1, 10);
  rank_state_init(&got, 1, 0);
  memset(got.data, 0, sizeof got.data);
  got.st.data_pos = 0;
  CHECK(hx_rt_ckpt_load_rank(dir, 10, 1, FP, &got.st, err, sizeof err));
  CHECK(got.st.step == 10 && got.st.data_pos == 70);
  CHECK(got.st.schedule_steps == 100); /* from the MANIFEST: the run's --steps */
  for (int i = 0; i < NTENSORS; i++)
    for (int k = 0; k < 3; k++)
      CHECK(memcmp(got.data[i][k], want.data[i][k], sizeof(float) * (size_t)tensor_sizes[i]) == 0);
  /* A rank whose layout differs (another tensor size) is refused. */
  struct rank_state other;
  rank_state_init(&other, 1, 0);
  other.tensors[2].n = 36;
  CHECK(!hx_rt_ckpt_load_rank(dir, 10, 1, FP, &other.st, err, sizeof err));
  CHECK_CONTAINS(err, "tensor 2 has 37 elements");
  other.tensors[2].n = 37;
  other.st.ntensors = 2;
  CHECK(!hx_rt_ckpt_load_rank(dir, 10, 1, FP, &other.st, err, sizeof err));
  CHECK_CONTAINS(err, "holds 3 tensors");
  CHECK(!hx_rt_ckpt_load_rank(dir, 10, 2, FP, &other.st, err, sizeof err));
}

static void test_keep_last_two(void) {
  CHECK(save_all(20, FP));
  CHECK(save_all(30, FP));
  CHECK(!step_dir_exists(10));
  CHECK(step_dir_exists(20) && step_dir_exists(30));
  CHECK(hx_rt_ckpt_find_newest(dir, NRANKS, FP, NULL) == 30);
}

static void test_corrupt_file_skipped(void) {
  char path[512], err[512] = "";
  hx_rt_ckpt_rank_path(path, sizeof path, dir, 30, 1);
  flip_byte(path, 200);
  CHECK(!hx_rt_ckpt_verify(dir, 30, NRANKS, FP, err, sizeof err));
  CHECK_CONTAINS(err, "rank_0001.ckpt is corrupt");
  char report[2048] = "";
  FILE *skipped = fmemopen(report, sizeof report, "w");
  CHECK(hx_rt_ckpt_find_newest(dir, NRANKS, FP, skipped) == 20);
  fclose(skipped);
  CHECK_CONTAINS(report, "skipping checkpoint");
  CHECK_CONTAINS(report, "step_00000030");
  struct rank_state got;
  rank_state_init(&got, 1, 0);
  CHECK(!hx_rt_ckpt_load_rank(dir, 30, 1, FP, &got.st, err, sizeof err));
  CHECK_CONTAINS(err, "does not match the manifest");
  flip_byte(path, 200); /* repaired */
  CHECK(hx_rt_ckpt_find_newest(dir, NRANKS, FP, NULL) == 30);
}

static void test_truncated_file_skipped(void) {
  char path[512], err[512] = "";
  hx_rt_ckpt_rank_path(path, sizeof path, dir, 30, 0);
  struct stat st;
  CHECK(stat(path, &st) == 0);
  CHECK(truncate(path, st.st_size - 4) == 0);
  CHECK(!hx_rt_ckpt_verify(dir, 30, NRANKS, FP, err, sizeof err));
  CHECK_CONTAINS(err, "rank_0000.ckpt is corrupt");
  CHECK(hx_rt_ckpt_find_newest(dir, NRANKS, FP, NULL) == 20);
  struct rank_state got;
  rank_state_init(&got, 0, 0);
  CHECK(!hx_rt_ckpt_load_rank(dir, 30, 0, FP, &got.st, err, sizeof err));
  CHECK_CONTAINS(err, "truncated");
}

/* A kill between the rank files and the manifest: rank files and a .tmp
 * there, no MANIFEST. Also a damaged manifest and a missing rank file. */
static void test_incomplete_skipped(void) {
  char path[512], err[512] = "";
  CHECK(save_all(40, FP));
  /* 30 is corrupt, so the complete one kept beside 40 is 20. */
  CHECK(step_dir_exists(20) && !step_dir_exists(30));
  hx_rt_ckpt_manifest_path(path, sizeof path, dir, 40);
  CHECK(unlink(path) == 0);
  hx_rt_ckpt_rank_path(path, sizeof path, dir, 40, 0);
  strcat(path, ".tmp");
  FILE *f = fopen(path, "wb");
  CHECK(f != NULL);
  if (f)
    fclose(f);
  CHECK(!hx_rt_ckpt_verify(dir, 40, NRANKS, FP, err, sizeof err));
  CHECK_CONTAINS(err, "no readable MANIFEST");
  CHECK(hx_rt_ckpt_find_newest(dir, NRANKS, FP, NULL) == 20);

  CHECK(save_all(50, FP));
  CHECK(save_all(60, FP));
  CHECK(!step_dir_exists(20) && !step_dir_exists(40));
  CHECK(hx_rt_ckpt_find_newest(dir, NRANKS, FP, NULL) == 60);
  hx_rt_ckpt_manifest_path(path, sizeof path, dir, 60);
  flip_byte(path, 25);
  CHECK(!hx_rt_ckpt_verify(dir, 60, NRANKS, FP, err, sizeof err));
  CHECK_CONTAINS(err, "MANIFEST is damaged");
  CHECK(hx_rt_ckpt_find_newest(dir, NRANKS, FP, NULL) == 50);
  hx_rt_ckpt_rank_path(path, sizeof path, dir, 50, 1);
  CHECK(unlink(path) == 0);
  CHECK(!hx_rt_ckpt_verify(dir, 50, NRANKS, FP, err, sizeof err));
  CHECK_CONTAINS(err, "rank_0001.ckpt is missing");
  CHECK(hx_rt_ckpt_find_newest(dir, NRANKS, FP, NULL) == -1);
}

/* Rewriting a step directory (a resumed run saving the same step again)
 * replaces it cleanly; non-step entries in dir are ignored. */
static void test_rewrite_same_step(void) {
  char path[512];
  snprintf(path, sizeof path, "%s/step_12x", dir);
  CHECK(mkdir(path, 0777) == 0);
  CHECK(save_all(60, FP));
  CHECK(hx_rt_ckpt_find_newest(dir, NRANKS, FP, NULL) == 60);
  CHECK(save_all(70, FP));
  CHECK(step_dir_exists(60) && step_dir_exists(70) && !step_dir_exists(50));
}

/* The directory is checked before the first checkpoint needs it (issue 10,
 * item 13): created by rank 0, written by every rank, no trace left. */
static void test_probe_dir(void) {
  char err[512] = "", path[600], file[700];
  snprintf(path, sizeof path, "%s/probe/ckpts", dir);
  CHECK(hx_rt_ckpt_probe_dir(path, 0, true, err, sizeof err));
  CHECK(hx_rt_ckpt_probe_dir(path, 3, false, err, sizeof err));
  snprintf(file, sizeof file, "%s/.hexic-write-test.rank_0003", path);
  CHECK(access(file, F_OK) != 0);
  snprintf(file, sizeof file, "%s/plain", dir);
  FILE *f = fopen(file, "w");
  CHECK(f && fclose(f) == 0);
  snprintf(path, sizeof path, "%s/plain/ckpts", dir); /* under a regular file */
  CHECK(!hx_rt_ckpt_probe_dir(path, 0, true, err, sizeof err));
  CHECK_CONTAINS(err, "cannot create directory");
  CHECK(!hx_rt_ckpt_probe_dir(path, 1, false, err, sizeof err));
  CHECK_CONTAINS(err, "plain/ckpts: cannot write a file there");
}

/* A manifest of format 1 (no schedule steps) is named as such, not damaged. */
static void test_old_format(void) {
  CHECK(save_all(40, FP));
  char path[600], err[512] = "";
  hx_rt_ckpt_manifest_path(path, sizeof path, dir, 40);
  FILE *f = fopen(path, "r+b");
  CHECK(f && fseek(f, 17, SEEK_SET) == 0 && fputc('1', f) != EOF && fclose(f) == 0);
  CHECK(!hx_rt_ckpt_verify(dir, 40, NRANKS, FP, err, sizeof err));
  CHECK_CONTAINS(err, "checkpoint format 1 (an older hexic");
}

/* Another plan's checkpoint (issue 17): rank 0 held rows [0, 3) of a [5, 4]
 * tensor, rank 1 rows [2, 5) (row 2 on both, as a replicated kv head is);
 * a reader holding columns [1, 3) of every row gets exactly those values,
 * moments too, from both files. Another model, a tensor nobody holds and a
 * reader of the wrong shape are refused with the reason. */
enum { ROWS = 5, COLS = 4 };

static float full_value(int k, int r, int c) { return (float)(k * 100 + r * 10 + c); }

static bool save_split(int64_t step) {
  char err[512] = "";
  float data[2][3][3 * COLS];
  struct hx_rt_ckpt_tensor t[2];
  uint64_t sizes[2], sums[2];
  int counts[2] = {1, 1};
  int64_t index[2 * HX_RT_CKPT_INDEX_INTS];
  struct hx_rt_ckpt_state st = {
      .step = step, .ntensors = 1, .schedule_steps = 9, .model = "tiny-model", .data = "batch 8"};
  bool ok = hx_rt_ckpt_prepare(dir, step, err, sizeof err);
  for (int rank = 0; ok && rank < 2; rank++) {
    int r0 = rank ? 2 : 0;
    for (int k = 0; k < 3; k++)
      for (int r = 0; r < 3; r++)
        for (int c = 0; c < COLS; c++)
          data[rank][k][r * COLS + c] = full_value(k, r0 + r, c);
    t[rank] = (struct hx_rt_ckpt_tensor){.param = data[rank][0],
                                         .adam_m = data[rank][1],
                                         .adam_v = data[rank][2],
                                         .n = 3 * COLS,
                                         .id = 37,
                                         .rows = ROWS,
                                         .cols = COLS,
                                         .r0 = r0,
                                         .r1 = r0 + 3,
                                         .c0 = 0,
                                         .c1 = COLS};
    st.tensors = &t[rank];
    ok = hx_rt_ckpt_write_rank(dir, rank, "plan-A", &st, &sizes[rank], &sums[rank],
                               index + rank * HX_RT_CKPT_INDEX_INTS, err, sizeof err);
  }
  struct hx_rt_ckpt_files files = {2, sizes, sums, counts, index};
  ok = ok && hx_rt_ckpt_write_manifest(dir, &st, "plan-A", &files, err, sizeof err);
  if (!ok)
    fprintf(stderr, "save_split: %s\n", err);
  return ok;
}

static void test_resharded(void) {
  CHECK(save_split(80));
  char err[512] = "";
  CHECK(hx_rt_ckpt_verify_complete(dir, 80, err, sizeof err));
  CHECK(hx_rt_ckpt_find_newest_any(dir, NULL) == 80);
  CHECK(hx_rt_ckpt_find_newest(dir, NRANKS, FP, NULL) != 80); /* not this plan's */
  float got[3][ROWS * 2];
  struct hx_rt_ckpt_tensor t = {.param = got[0],
                                .adam_m = got[1],
                                .adam_v = got[2],
                                .n = ROWS * 2,
                                .id = 37,
                                .rows = ROWS,
                                .cols = COLS,
                                .r0 = 0,
                                .r1 = ROWS,
                                .c0 = 1,
                                .c1 = 3};
  struct hx_rt_ckpt_state st = {
      .ntensors = 1, .tensors = &t, .model = "tiny-model", .data = "batch 8"};
  CHECK(hx_rt_ckpt_load_resharded(dir, 80, &st, err, sizeof err));
  CHECK(st.step == 80 && st.schedule_steps == 9 && st.source_ranks == 2 && st.resharded);
  CHECK(!strcmp(st.source_fingerprint, "plan-A"));
  int wrong = 0;
  for (int k = 0; k < 3; k++)
    for (int r = 0; r < ROWS; r++)
      for (int c = 1; c < 3; c++)
        wrong += got[k][r * 2 + (c - 1)] != full_value(k, r, c);
  CHECK(wrong == 0);
  st.model = "other-model";
  CHECK(!hx_rt_ckpt_load_resharded(dir, 80, &st, err, sizeof err));
  CHECK_CONTAINS(
      err, "the checkpoint is of another model (tiny-model); this program trains other-model");
  st.model = "tiny-model";
  st.data = "batch 16";
  CHECK(!hx_rt_ckpt_load_resharded(dir, 80, &st, err, sizeof err));
  CHECK_CONTAINS(err, "data order (batch 8) is not this run's (batch 16)");
  st.data = "batch 8";
  t.id = 38; /* layers.1.w_gate: nobody holds it */
  CHECK(!hx_rt_ckpt_load_resharded(dir, 80, &st, err, sizeof err));
  CHECK_CONTAINS(err, "no rank file of the checkpoint holds row 0, column 1 of layers.1.w_gate");
  t.id = 37, t.cols = 8, t.c1 = 3;
  CHECK(!hx_rt_ckpt_load_resharded(dir, 80, &st, err, sizeof err));
  CHECK_CONTAINS(err, "layers.1.mlp_norm is [5, 4] in the checkpoint, [5, 8] in this model");
}

/* A forged index record (the manifest's own checksum recomputed): a [2^32,
 * 2^32] slice whose 12-byte elements overflow int64 to 0 bytes is refused,
 * not taken for an empty slice inside the file. */
static void test_forged_index(void) {
  CHECK(save_split(90));
  char path[600], err[512] = "", *text = calloc(1, 1 << 16);
  hx_rt_ckpt_manifest_path(path, sizeof path, dir, 90);
  FILE *f = fopen(path, "rb");
  size_t len = f ? fread(text, 1, (1 << 16) - 1, f) : 0;
  if (f)
    fclose(f);
  char *rec = strstr(text, "tensor 37 5 4 0 3 0 4 "), *sum = strstr(text, "manifest-fnv64 ");
  CHECK(len > 0 && rec && sum);
  if (!rec || !sum) {
    free(text);
    return;
  }
  *sum = '\0';
  char forged[1 << 16];
  int n = snprintf(forged, sizeof forged,
                   "%.*stensor 37 4294967296 4294967296 0 4294967296 0 "
                   "4294967296 %s",
                   (int)(rec - text), text, rec + strlen("tensor 37 5 4 0 3 0 4 "));
  snprintf(forged + n, sizeof forged - (size_t)n, "manifest-fnv64 %016llx\n",
           (unsigned long long)hx_rt_fnv64(HX_FNV64_INIT, forged, (size_t)n));
  f = fopen(path, "wb");
  CHECK(f && fputs(forged, f) >= 0 && fclose(f) == 0);
  struct hx_rt_ckpt_info info;
  bool loaded = hx_rt_ckpt_info_load(dir, 90, &info, err, sizeof err);
  CHECK(!loaded);
  CHECK_CONTAINS(err, "tensor 0 of rank_0000.ckpt lies outside the file");
  if (loaded)
    hx_rt_ckpt_info_free(&info);
  free(text);
}

/* A MANIFEST signed over an index whose wq and wo offsets are swapped (the
 * rank file untouched, its checksum holds): verify, info and a reader under
 * another plan (which reads through the index without verifying) refuse it
 * naming the tensor, instead of loading wq's values into wo and back. */
enum { SW_ROWS = 2, SW_COLS = 3, SW_N = SW_ROWS * SW_COLS };

static bool save_swapped(int64_t step) {
  char err[512] = "";
  float data[2][3][SW_N];
  struct hx_rt_ckpt_tensor t[2];
  for (int i = 0; i < 2; i++) {
    for (int k = 0; k < 3; k++)
      for (int e = 0; e < SW_N; e++)
        data[i][k][e] = (float)(i * 100 + k * 10 + e);
    t[i] = (struct hx_rt_ckpt_tensor){.param = data[i][0],
                                      .adam_m = data[i][1],
                                      .adam_v = data[i][2],
                                      .n = SW_N,
                                      .id = i ? 20 : 17, /* layers.0.wo, layers.0.wq */
                                      .rows = SW_ROWS,
                                      .cols = SW_COLS,
                                      .r0 = 0,
                                      .r1 = SW_ROWS,
                                      .c0 = 0,
                                      .c1 = SW_COLS};
  }
  struct hx_rt_ckpt_state st = {.step = step,
                                .ntensors = 2,
                                .tensors = t,
                                .schedule_steps = 9,
                                .model = "tiny-model",
                                .data = "batch 8"};
  uint64_t size = 0, sum = 0;
  int count = 2;
  int64_t index[2 * HX_RT_CKPT_INDEX_INTS];
  bool ok = hx_rt_ckpt_prepare(dir, step, err, sizeof err) &&
            hx_rt_ckpt_write_rank(dir, 0, "plan-A", &st, &size, &sum, index, err, sizeof err);
  int64_t wq_at = index[7];
  index[7] = index[HX_RT_CKPT_INDEX_INTS + 7];
  index[HX_RT_CKPT_INDEX_INTS + 7] = wq_at;
  struct hx_rt_ckpt_files files = {1, &size, &sum, &count, index};
  ok = ok && hx_rt_ckpt_write_manifest(dir, &st, "plan-A", &files, err, sizeof err);
  if (!ok)
    fprintf(stderr, "save_swapped: %s\n", err);
  return ok;
}

static void test_swapped_index(void) {
  CHECK(save_swapped(95));
  char err[512] = "";
  CHECK(!hx_rt_ckpt_verify_complete(dir, 95, err, sizeof err));
  CHECK_CONTAINS(err, "the MANIFEST's index puts layers.0.wq at byte 304 of rank_0000.ckpt, where "
                      "the file holds it at byte 168");
  CHECK(hx_rt_ckpt_find_newest_any(dir, NULL) != 95);
  struct hx_rt_ckpt_info info;
  bool loaded = hx_rt_ckpt_info_load(dir, 95, &info, err, sizeof err);
  CHECK(!loaded);
  CHECK_CONTAINS(err, "does not verify: the MANIFEST's index puts layers.0.wq at byte 304");
  if (loaded)
    hx_rt_ckpt_info_free(&info);
  float got[3][SW_N];
  struct hx_rt_ckpt_tensor t = {.param = got[0],
                                .adam_m = got[1],
                                .adam_v = got[2],
                                .n = SW_N,
                                .id = 17,
                                .rows = SW_ROWS,
                                .cols = SW_COLS,
                                .r0 = 0,
                                .r1 = SW_ROWS,
                                .c0 = 0,
                                .c1 = SW_COLS};
  struct hx_rt_ckpt_state st = {
      .ntensors = 1, .tensors = &t, .model = "tiny-model", .data = "batch 8"};
  CHECK(!hx_rt_ckpt_load_resharded(dir, 95, &st, err, sizeof err));
  CHECK_CONTAINS(err, "rank_0000.ckpt does not hold layers.0.wq at byte 304, where the MANIFEST's "
                      "index puts it");
}

/* The model line's rope_theta and norm_eps (issue 24): another value is
 * another model; a line written before they were recorded (an older
 * hexic's: the same line up to " rope_theta ") is this model's shape. */
static void test_model_line_fields(void) {
  CHECK(save_split(97)); /* records the model line "tiny-model" */
  char err[512] = "";
  float got[3][ROWS * COLS];
  struct hx_rt_ckpt_tensor t = {.param = got[0],
                                .adam_m = got[1],
                                .adam_v = got[2],
                                .n = ROWS * COLS,
                                .id = 37,
                                .rows = ROWS,
                                .cols = COLS,
                                .r0 = 0,
                                .r1 = ROWS,
                                .c0 = 0,
                                .c1 = COLS};
  struct hx_rt_ckpt_state st = {.ntensors = 1,
                                .tensors = &t,
                                .model = "tiny-model rope_theta 10000 norm_eps 1e-05",
                                .data = "batch 8"};
  CHECK(hx_rt_ckpt_load_resharded(dir, 97, &st, err, sizeof err));
  st.model = "tiny-model-2 rope_theta 10000 norm_eps 1e-05"; /* not a prefix: another shape */
  CHECK(!hx_rt_ckpt_load_resharded(dir, 97, &st, err, sizeof err));
  CHECK_CONTAINS(err, "the checkpoint is of another model (tiny-model); this program trains "
                      "tiny-model-2 rope_theta 10000 norm_eps 1e-05");
  st.model = "tiny"; /* the recorded line is longer: another model, not an older line */
  CHECK(!hx_rt_ckpt_load_resharded(dir, 97, &st, err, sizeof err));
  CHECK_CONTAINS(err, "the checkpoint is of another model (tiny-model); this program trains tiny");
}

static void test_fnv64(void) {
  /* Published FNV-1a 64 vectors. */
  CHECK(hx_rt_fnv64(HX_FNV64_INIT, "", 0) == UINT64_C(0xcbf29ce484222325));
  CHECK(hx_rt_fnv64(HX_FNV64_INIT, "a", 1) == UINT64_C(0xaf63dc4c8601ec8c));
  CHECK(hx_rt_fnv64(HX_FNV64_INIT, "foobar", 6) == UINT64_C(0x85944171f73967e8));
}

int main(void) {
  snprintf(dir, sizeof dir, "/tmp/hexic-rt-ckpt-XXXXXX");
  if (!mkdtemp(dir)) {
    perror("mkdtemp");
    return 1;
  }
  test_fnv64();
  test_write_verify_load();
  test_keep_last_two();
  test_corrupt_file_skipped();
  test_truncated_file_skipped();
  test_incomplete_skipped();
  test_rewrite_same_step();
  test_probe_dir();
  test_old_format();
  test_resharded();
  test_forged_index();
  test_swapped_index();
  test_model_line_fields();
  rt_test_remove_dir(dir);
  return rt_test_finish("test_rt_ckpt");
}
