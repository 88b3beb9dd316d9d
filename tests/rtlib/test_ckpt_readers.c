/* The checkpoint readers facing hostile files (issue 24, items 7, 8, 12):
 * rtlib/ckpt's JSON reader, safetensors, config.json, and the token data
 * open (rt_data.c), through rtlib/ckpt/user_file's one open helper.
 * - A FIFO or /dev/zero given as any of them is refused by its kind; before,
 *   a FIFO blocked open() forever (an alarm fails the test instead).
 * - Parsing is linear: a 4 MiB header of 70000 tensors opens in seconds
 *   (before: over two minutes under ASan, 2.5 GB at 1 MiB); every bound
 *   (string length, depth, config.json's size, the header's 100 MB) is
 *   refused with a message naming it, and input at the bound is read.
 * - Duplicate member names: the last value, as Python's json (config.json);
 *   refused in a safetensors header. Names and metadata with control
 *   characters are shown escaped; attention_bias/mlp_bias other than
 *   true/false/null are refused; the .hx import-hf writes keeps numbers
 *   exact and a path's newline inside its comment. */
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "rt_test.h"
#include "rtlib/ckpt/ckpt_json.h"
#include "rtlib/ckpt/hf_llama.h"
#include "rtlib/ckpt/safetensors.h"
#include "rtlib/rt_ckpt.h"
#include "rtlib/rt_data.h"
#include "rtlib/ckpt/user_file.h"

static char tmpdir[256];
static const char *volatile doing = "starting";

static const char *tmp_path(const char *name) {
  static char buf[4][512];
  static int next;
  char *p = buf[next++ % 4];
  snprintf(p, sizeof buf[0], "%s/%s", tmpdir, name);
  return p;
}

/* A hang (a FIFO's open, a quadratic parse) fails the test by name. */
static void on_alarm(int sig) {
  (void)sig;
  static const char msg[] = "test_ckpt_readers: FAIL: hung (over the alarm) while ";
  if (write(2, msg, sizeof msg - 1) < 0 || write(2, doing, strlen(doing)) < 0 ||
      write(2, "\n", 1) < 0)
    _exit(1);
  _exit(1);
}

static void write_file(const char *path, const void *p, size_t n) {
  FILE *f = fopen(path, "wb");
  CHECK(f && fwrite(p, 1, n, f) == n);
  if (f)
    fclose(f);
}

/* A safetensors file of header text json (padded to 8) and data bytes of zeros. */
static void write_st(const char *path, const char *json, size_t data_bytes) {
  size_t n = strlen(json), padded = (n + 7) / 8 * 8;
  char *buf = calloc(1, 8 + padded + data_bytes + 1);
  uint64_t len = padded;
  memcpy(buf, &len, 8);
  memcpy(buf + 8, json, n);
  memset(buf + 8 + n, ' ', padded - n);
  write_file(path, buf, 8 + padded + data_bytes);
  free(buf);
}

static bool has_control_byte(const char *s) {
  for (; *s; s++)
    if ((unsigned char)*s < 0x20 || (unsigned char)*s == 0x7f)
      return true;
  return false;
}

/* ---- item 7: FIFOs and devices ---- */

static void refuses_special_files(void) {
  const char *fifo = tmp_path("pipe.safetensors");
  CHECK(mkfifo(fifo, 0600) == 0);
  const char *paths[] = {fifo, "/dev/zero"};
  const char *kinds[] = {"is a FIFO, not a regular file", "is a character device"};
  for (int i = 0; i < 2; i++) {
    char err[1024] = "";
    struct hx_st_file f;
    doing = "hx_st_open (a safetensors file, a shard, --init-from)";
    CHECK(!hx_st_open(&f, paths[i], err, sizeof err));
    CHECK_CONTAINS(err, kinds[i]);
    err[0] = '\0';
    doing = "hx_json_parse_file (an index)";
    CHECK(!hx_json_parse_file(paths[i], 64 << 20, err, sizeof err));
    CHECK_CONTAINS(err, kinds[i]);
    err[0] = '\0';
    struct hx_hf_model m;
    doing = "hx_hf_config_read (config.json)";
    CHECK(!hx_hf_config_read(paths[i], &m, err, sizeof err));
    CHECK_CONTAINS(err, kinds[i]);
    err[0] = '\0';
    struct hx_rt_data d;
    doing = "hx_rt_data_open (--data)";
    CHECK(!hx_rt_data_open(&d, paths[i], HX_DATA_AUTO, 256, 8, 1, err, sizeof err));
    CHECK_CONTAINS(err, kinds[i]);
    err[0] = '\0';
    struct hx_rt_ckpt_state st = {0};
    doing = "hx_rt_ckpt_init_from (--init-from)";
    CHECK(!hx_rt_ckpt_init_from(paths[i], 0, &st, err, sizeof err));
    CHECK_CONTAINS(err, kinds[i]);
    err[0] = '\0';
    doing = "hx_rt_open_regular";
    CHECK(hx_rt_open_regular(paths[i], err, sizeof err) < 0);
    CHECK_CONTAINS(err, paths[i]);
  }
  char err[512] = "";
  CHECK(hx_rt_open_regular(tmpdir, err, sizeof err) < 0);
  CHECK_CONTAINS(err, "is a directory");
  CHECK(hx_rt_open_regular(tmp_path("absent"), err, sizeof err) < 0);
  CHECK_CONTAINS(err, "cannot open: No such file");
  /* what is opened is blocking (the O_NONBLOCK of the open is cleared) */
  write_file(tmp_path("plain"), "x", 1);
  int fd = hx_rt_open_regular(tmp_path("plain"), err, sizeof err);
  CHECK(fd >= 0 && !(fcntl(fd, F_GETFL) & O_NONBLOCK));
  if (fd >= 0)
    close(fd);
  doing = "the rest";
}

/* ---- item 8: linear parsing, and every bound named ---- */

/* A header of n empty tensors t0000000..: about 60 bytes each. */
static char *many_tensors(int n, const char *metadata) {
  char *json = malloc((size_t)n * 80 + strlen(metadata) + 64), *p = json;
  p += sprintf(p, "{\"__metadata__\":%s", metadata);
  for (int i = 0; i < n; i++)
    p += sprintf(p, ",\"t%07d\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[0,0]}", i);
  strcpy(p, "}");
  return json;
}

static void parses_big_headers_linearly(void) {
  int n = 70000; /* a 4.2 MB header */
  char *json = many_tensors(n, "{\"format\":\"pt\"}");
  write_st(tmp_path("big.safetensors"), json, 0);
  free(json);
  struct hx_st_file f;
  char err[1024] = "";
  doing = "opening a 4 MB header (quadratic: minutes)";
  bool opened = hx_st_open(&f, tmp_path("big.safetensors"), err, sizeof err);
  CHECK(opened);
  if (!opened) {
    fprintf(stderr, "%s\n", err);
    return;
  }
  CHECK(f.ntensors == n);
  doing = "finding every tensor of 70000 (linear: quadratic)";
  int found = 0;
  for (int i = 0; i < n; i++) {
    char name[16];
    snprintf(name, sizeof name, "t%07d", i);
    const struct hx_st_tensor *t = hx_st_find(&f, name);
    found += t && !strcmp(t->name, name);
  }
  CHECK(found == n);
  CHECK(!hx_st_find(&f, "t") && !hx_st_find(&f, "t9999999") && !hx_st_find(&f, ""));
  hx_st_close(&f);
  doing = "the rest";
}

static void names_every_bound(void) {
  char err[1024] = "";
  /* a string of HX_JSON_MAX_STRING bytes is read, one more is refused */
  size_t big = HX_JSON_MAX_STRING;
  char *text = malloc(big + 16);
  text[0] = '"';
  memset(text + 1, 'a', big);
  strcpy(text + 1 + big, "\"");
  struct hx_json *v = hx_json_parse(text, big + 2, err, sizeof err);
  CHECK(v && v->kind == HX_JSON_STRING && strlen(v->text) == big);
  hx_json_free(v);
  text[1 + big] = 'a';
  strcpy(text + 2 + big, "\"");
  CHECK(!hx_json_parse(text, big + 3, err, sizeof err));
  CHECK_CONTAINS(err, "a string of more than 1048576 bytes (the limit)");
  free(text);
  /* nesting: HX_JSON_MAX_DEPTH arrays inside the outermost are read, one more is not */
  char deep[2 * HX_JSON_MAX_DEPTH + 8];
  for (int extra = 0; extra < 2; extra++) {
    int d = HX_JSON_MAX_DEPTH + 1 + extra;
    memset(deep, '[', (size_t)d);
    memset(deep + d, ']', (size_t)d);
    v = hx_json_parse(deep, 2 * (size_t)d, err, sizeof err);
    CHECK(extra ? !v : v != NULL);
    hx_json_free(v);
  }
  CHECK_CONTAINS(err, "nested deeper than 64");
  /* config.json: over 1 MiB is refused naming the limit */
  FILE *f = fopen(tmp_path("huge-config.json"), "w");
  fprintf(f, "{\"pad\": \"%*s\"}", HX_JSON_CONFIG_LIMIT, "");
  fclose(f);
  struct hx_hf_model m;
  CHECK(!hx_hf_config_read(tmp_path("huge-config.json"), &m, err, sizeof err));
  CHECK_CONTAINS(err, "over the 1048576-byte limit for this file");
  /* a safetensors header over safetensors' 100 MB (a sparse file) */
  int fd = open(tmp_path("huge.safetensors"), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  uint64_t len = HX_ST_MAX_HEADER + 8;
  CHECK(fd >= 0 && write(fd, &len, 8) == 8 && ftruncate(fd, (off_t)(len + 8)) == 0);
  close(fd);
  struct hx_st_file st;
  CHECK(!hx_st_open(&st, tmp_path("huge.safetensors"), err, sizeof err));
  CHECK_CONTAINS(err, "the header length 100000008 is over the 100000000-byte limit");
}

/* ---- item 12: duplicates, escapes, booleans, numbers ---- */

static const char *config_with(const char *name, const char *extra) {
  const char *path = tmp_path(name);
  FILE *f = fopen(path, "w");
  fprintf(f,
          "{\"architectures\": [\"LlamaForCausalLM\"], \"hidden_size\": 64, "
          "\"intermediate_size\": 128, \"num_attention_heads\": 4, \"vocab_size\": 256, "
          "\"num_hidden_layers\": 2%s}",
          extra);
  fclose(f);
  return path;
}

static void duplicates_keep_the_last(void) {
  char err[512] = "";
  const char *text = "{\"a\": 1, \"b\": {\"x\": 1, \"x\": [2]}, \"a\": 3, \"c\": 4, \"a\": 5}";
  struct hx_json *v = hx_json_parse(text, strlen(text), err, sizeof err);
  CHECK(v && v->count == 3 && v->duplicate && !strcmp(v->duplicate, "a"));
  if (!v)
    return;
  /* Python's dict: a keeps its first place, its last value */
  CHECK(!strcmp(v->child->key, "a") && v->child->number == 5);
  CHECK(!strcmp(v->child->next->key, "b") && !strcmp(v->child->next->next->key, "c"));
  const struct hx_json *b = hx_json_get(v, "b");
  CHECK(b && b->count == 1 && hx_json_get(b, "x") && hx_json_get(b, "x")->kind == HX_JSON_ARRAY);
  hx_json_free(v);
  /* config.json: the last num_hidden_layers, as transformers reads it */
  struct hx_hf_model m;
  CHECK(hx_hf_config_read(config_with("dup.json", ", \"num_hidden_layers\": 6"), &m, err,
                          sizeof err));
  CHECK(m.layers == 6);
  /* a safetensors header: refused, naming the tensor */
  write_st(tmp_path("dup.safetensors"),
           "{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
           "\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}",
           8);
  struct hx_st_file f;
  CHECK(!hx_st_open(&f, tmp_path("dup.safetensors"), err, sizeof err));
  CHECK_CONTAINS(err, "'w' is in the header twice");
}

static void shows_names_escaped(void) {
  char buf[64];
  CHECK(!strcmp(hx_rt_printable("a\x1b[2Jb\n\\", buf, sizeof buf), "a\\x1b[2Jb\\x0a\\\\"));
  CHECK(!strcmp(hx_rt_printable("caf\xc3\xa9", buf, sizeof buf), "caf\\xc3\\xa9"));
  CHECK(!strcmp(hx_rt_printable("abcdefghij", buf, 8), "abcd..."));
  CHECK(!strcmp(hx_rt_printable("abcdefg", buf, 8), "abcdefg"));
  /* a tensor's name with escapes in a message; __metadata__'s model line */
  write_st(tmp_path("esc.safetensors"),
           "{\"__metadata__\":{\"hexic_model\":\"layers 1\\u001b]0;x\\u0007\"},"
           "\"\\u001b[2Jevil\\n\":{\"dtype\":\"Q9\",\"shape\":[1],\"data_offsets\":[0,4]}}",
           4);
  struct hx_st_file f;
  char err[1024] = "";
  CHECK(!hx_st_open(&f, tmp_path("esc.safetensors"), err, sizeof err));
  CHECK_CONTAINS(err, "tensor '\\x1b[2Jevil\\x0a': unknown dtype 'Q9'");
  CHECK(!has_control_byte(err));
  write_st(tmp_path("esc2.safetensors"),
           "{\"__metadata__\":{\"hexic_model\":\"layers 1\\u001b]0;x\\u0007\"},"
           "\"\\u001b[2J\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}",
           4);
  bool opened = hx_st_open(&f, tmp_path("esc2.safetensors"), err, sizeof err);
  CHECK(opened);
  if (opened) {
    CHECK(f.hexic_model && !strcmp(f.hexic_model, "layers 1\\x1b]0;x\\x07"));
    CHECK(hx_st_find(&f, "\x1b[2J") != NULL); /* found by its real name */
    CHECK(!hx_st_read_f32(&f, &f.tensors[0], 0, 1, 0, 2, (float[2]){0}, err, sizeof err));
    CHECK_CONTAINS(err, "tensor '\\x1b[2J': rows [0, 1) x columns [0, 2) are outside it");
    hx_st_close(&f);
  }
}

static void biases_are_booleans(void) {
  static const struct {
    const char *extra, *error; /* NULL: read */
  } cases[] = {
      {", \"attention_bias\": \"yes\"", "attention_bias is not true, false or null"},
      {", \"mlp_bias\": 1", "mlp_bias is not true, false or null"},
      {", \"mlp_bias\": \"false\"", "mlp_bias is not true, false or null"},
      {", \"attention_bias\": true", "attention_bias = true is not supported"},
      {", \"attention_bias\": false, \"mlp_bias\": null", NULL},
      {"", NULL},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char err[512] = "";
    struct hx_hf_model m;
    bool ok = hx_hf_config_read(config_with("bias.json", cases[i].extra), &m, err, sizeof err);
    CHECK(ok == !cases[i].error);
    if (cases[i].error)
      CHECK_CONTAINS(err, cases[i].error);
  }
}

static void writes_exact_numbers_and_one_comment_line(void) {
  char err[512] = "";
  struct hx_hf_model m;
  CHECK(hx_hf_config_read(
      config_with("theta.json", ", \"rope_theta\": 123456789012.5, \"rms_norm_eps\": 1e-05"), &m,
      err, sizeof err));
  char *text = NULL;
  size_t size = 0;
  FILE *f = open_memstream(&text, &size);
  hx_hf_write_hx(f, &m, "m", "dir\nmodel \"evil\" {\n/config.json");
  fclose(f);
  CHECK_CONTAINS(text, "rope_theta = 123456789012.5; norm_eps = 1e-05;");
  CHECK_CONTAINS(
      text, "# Written by hexic-ckpt import-hf from dir\\x0amodel \"evil\" {\\x0a/config.json.\n");
  int lines = 0;
  for (const char *p = text; *p; p++)
    lines += *p == '\n';
  CHECK(lines == 6);
  free(text);
  /* a subnormal eps (the .hx lexer's strtod reports a range error) is refused */
  CHECK(!hx_hf_config_read(config_with("eps.json", ", \"rms_norm_eps\": 1e-310"), &m, err,
                           sizeof err));
  CHECK_CONTAINS(err, "outside hexic's ranges");
}

/* hx_hf_id_of_name inverts hx_hf_name for every parameter of a model, in
 * constant time (hexic-ckpt import's is_expected compares each file name
 * with every name of the config: 100000 layers, 900000 names). */
static void names_map_back_to_ids(void) {
  struct hx_hf_model m = {.layers = 20000,
                          .hidden = 8,
                          .ffn = 8,
                          .heads = 2,
                          .kv_heads = 2,
                          .vocab = 16,
                          .tied = false};
  doing = "mapping 180000 names back to ids";
  int good = 0, n = hx_hf_tensor_count(&m);
  for (int i = 0; i < n; i++) {
    char name[96];
    uint64_t id = hx_hf_tensor_id(&m, i), back = UINT64_MAX;
    hx_hf_name(id, name, sizeof name);
    good += hx_hf_id_of_name(&m, name, &back) && back == id;
  }
  CHECK(good == n);
  uint64_t id;
  static const char *const not_names[] = {"model.layers.20000.mlp.up_proj.weight",
                                          "model.layers.01.mlp.up_proj.weight",
                                          "model.layers.+1.mlp.up_proj.weight",
                                          "model.layers.1.mlp.up_proj.weightx",
                                          "model.layers.1.mlp.up_proj",
                                          "model.layers.1.rotary_emb.inv_freq",
                                          "lm_head.bias",
                                          ""};
  for (size_t i = 0; i < sizeof not_names / sizeof not_names[0]; i++)
    CHECK(!hx_hf_id_of_name(&m, not_names[i], &id));
  m.tied = true;
  CHECK(!hx_hf_id_of_name(&m, "lm_head.weight", &id));
  CHECK(hx_hf_id_of_name(&m, "model.norm.weight", &id) && id == 1);
  doing = "the rest";
}

int main(void) {
  snprintf(tmpdir, sizeof tmpdir, "/tmp/hx_ckpt_readers_XXXXXX");
  if (!mkdtemp(tmpdir)) {
    perror("mkdtemp");
    return 1;
  }
  signal(SIGALRM, on_alarm);
  alarm(50); /* all of it takes a few seconds under ASan */
  refuses_special_files();
  parses_big_headers_linearly();
  names_every_bound();
  duplicates_keep_the_last();
  shows_names_escaped();
  biases_are_booleans();
  writes_exact_numbers_and_one_comment_line();
  names_map_back_to_ids();
  alarm(0);
  rt_test_remove_dir(tmpdir);
  return rt_test_finish("test_ckpt_readers");
}
