/* hexic-ckpt: hexic checkpoints and the Hugging Face formats.
 *   info CKPT_DIR [--step N] | FILE.safetensors
 *   export CKPT_DIR -o OUT.safetensors [--format safetensors] [--dtype fp32|bf16] [--step N]
 *   import IN.safetensors | IN.safetensors.index.json -o OUT.safetensors [--config config.json]
 *   import-hf config.json [-o OUT.hx] [--name NAME]
 * (each with -o takes --force: replace an existing regular file OUT).
 * export writes the model of a checkpoint of any plan with Hugging Face
 * Llama names and layout (RoPE rows of q_proj/k_proj permuted to
 * rotate_half's order; rtlib/ckpt/hf_llama.h); import checks a Llama
 * safetensors file (or a sharded one through its index) against its
 * config.json, every name and shape, and writes hexic's initial weights: a
 * safetensors file with hexic's canonical names and layout that the
 * programs' --init-from reads. Errors name the file and the tensor and leave
 * nothing written; exit 1 (2 for a usage error). -o never replaces what is
 * not a regular file (a symbolic link, a device, a FIFO, a directory), a
 * regular file only with --force, and never writes into a checkpoint folder
 * (the tool's own input, resume's source). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "rtlib/ckpt/ckpt_json.h"
#include "rtlib/ckpt/hf_llama.h"
#include "rtlib/ckpt/safetensors.h"
#include "rtlib/rt_ckpt.h"

enum { ERR_SIZE = 1024 };

static const char usage_text[] =
    "usage: hexic-ckpt info CKPT_DIR [--step N] | FILE.safetensors\n"
    "       hexic-ckpt export CKPT_DIR -o OUT.safetensors [--format safetensors] [--dtype "
    "fp32|bf16]"
    " [--step N]\n"
    "       hexic-ckpt import IN.safetensors|IN.safetensors.index.json -o OUT.safetensors"
    " [--config config.json]\n"
    "       hexic-ckpt import-hf config.json [-o OUT.hx] [--name NAME]\n"
    "       options may come before or after the argument; -- ends them\n"
    "       -o never replaces a symbolic link, device, FIFO or directory, nor writes into a\n"
    "       checkpoint folder; an existing file OUT is replaced only with --force\n";

static int usage(const char *why) {
  if (why)
    fprintf(stderr, "hexic-ckpt: %s\n", why);
  fputs(usage_text, stderr);
  return 2;
}

static int error(const char *msg) {
  fprintf(stderr, "hexic-ckpt: error: %s\n", msg);
  return 1;
}

/* The options after the subcommand's one argument. */
struct options {
  const char *out, *format, *dtype, *config, *name;
  int64_t step;
  bool force; /* --force: -o may replace an existing regular file */
};

/* A name or path read from a file, as a terminal may show it (control bytes as
 * \xNN: a tensor name holding an escape sequence must not reach the terminal
 * raw); two at once in one message, hence the two buffers. */
static char shown_buf[2][256];
static const char *shown(int k, const char *s) {
  return hx_rt_printable(s, shown_buf[k], sizeof shown_buf[k]);
}

/* The subcommand's options and its one argument, in any order (GNU
 * getopt_long: options may follow or precede the argument, `--` ends them):
 * `export --format safetensors DIR -o OUT` as `export DIR -o OUT --format
 * safetensors`. argv[0] is the subcommand. */
static bool parse_options(int argc, char **argv, struct options *o, const char **arg, char *why,
                          size_t why_size) {
  static const struct option longs[] = {{"format", required_argument, NULL, 'f'},
                                        {"dtype", required_argument, NULL, 'd'},
                                        {"config", required_argument, NULL, 'c'},
                                        {"name", required_argument, NULL, 'n'},
                                        {"step", required_argument, NULL, 's'},
                                        {"force", no_argument, NULL, 'F'},
                                        {NULL, 0, NULL, 0}};
  *o = (struct options){NULL, "safetensors", "fp32", NULL, NULL, -1, false};
  opterr = 0; /* our messages, with the usage */
  optind = 1;
  int c;
  while ((c = getopt_long(argc, argv, ":o:", longs, NULL)) != -1) {
    const char **slot = c == 'o'   ? &o->out
                        : c == 'f' ? &o->format
                        : c == 'd' ? &o->dtype
                        : c == 'c' ? &o->config
                        : c == 'n' ? &o->name
                                   : NULL;
    char *end;
    if (slot) {
      *slot = optarg;
    } else if (c == 'F') {
      o->force = true;
    } else if (c == 's') {
      o->step = strtoll(optarg, &end, 10);
      if (*end || end == optarg || o->step < 0) {
        snprintf(why, why_size, "--step wants a step number (0 or more), not '%.200s'", optarg);
        return false;
      }
    } else { /* name the option a user got wrong, not just that one was */
      snprintf(why, why_size, c == ':' ? "%.200s needs a value" : "unknown option '%.200s'",
               argv[optind - 1]);
      return false;
    }
  }
  if (optind == argc) {
    snprintf(why, why_size, "a subcommand takes an argument");
    return false;
  }
  if (optind < argc - 1) {
    snprintf(why, why_size, "a subcommand takes one argument, not '%.200s' too", argv[optind + 1]);
    return false;
  }
  *arg = argv[optind];
  return true;
}

/* ---- the output file ---- */

static bool write_text_file(const char *out, void (*write)(FILE *, const void *), const void *arg,
                            const char *what, char *err, size_t err_size);

/* "step_" and digits: a checkpoint's step folder. */
static bool is_step_name(const char *name) {
  if (strncmp(name, "step_", 5) || !name[5])
    return false;
  for (const char *p = name + 5; *p; p++)
    if (*p < '0' || *p > '9')
      return false;
  return true;
}

/* dir (a real path) is a checkpoint folder or one of its step folders: a
 * MANIFEST there, or a step_N folder, or step_N/MANIFEST below it. */
static bool is_checkpoint_folder(const char *dir) {
  char path[PATH_MAX + 300];
  struct stat sb;
  const char *base = strrchr(dir, '/');
  base = base ? base + 1 : dir;
  snprintf(path, sizeof path, "%s/MANIFEST", dir);
  if (is_step_name(base) || lstat(path, &sb) == 0)
    return true;
  DIR *d = opendir(dir);
  struct dirent *e;
  bool found = false;
  while (d && !found && (e = readdir(d)) != NULL) {
    snprintf(path, sizeof path, "%s/%s/MANIFEST", dir, e->d_name);
    found = is_step_name(e->d_name) && lstat(path, &sb) == 0;
  }
  if (d)
    closedir(d);
  return found;
}

/* Whether -o OUT may be written (else why, in err): OUT is absent, or a
 * regular file and --force; its folder is not a checkpoint folder. */
static bool output_ok(const char *out, bool force, char *err, size_t err_size) {
  struct stat sb;
  if (lstat(out, &sb) == 0) {
    const char *kind = S_ISLNK(sb.st_mode)    ? "a symbolic link"
                       : S_ISDIR(sb.st_mode)  ? "a directory"
                       : S_ISCHR(sb.st_mode)  ? "a character device"
                       : S_ISBLK(sb.st_mode)  ? "a block device"
                       : S_ISFIFO(sb.st_mode) ? "a FIFO"
                       : S_ISSOCK(sb.st_mode) ? "a socket"
                       : S_ISREG(sb.st_mode)  ? NULL
                                              : "not a regular file";
    if (kind) {
      snprintf(err, err_size, "-o %.300s is %s, not a regular file: refusing to replace it", out,
               kind);
      return false;
    }
    if (!force) {
      snprintf(err, err_size,
               "-o %.300s exists: refusing to replace it (add --force to, or pick another name)",
               out);
      return false;
    }
  } else if (errno != ENOENT) {
    snprintf(err, err_size, "-o %.300s: %s", out, strerror(errno));
    return false;
  }
  char parent[PATH_MAX + 16], real[PATH_MAX];
  hx_st_folder_prefix(out, parent, PATH_MAX);
  if (!parent[0])
    snprintf(parent, sizeof parent, ".");
  if (!realpath(parent, real)) {
    snprintf(err, err_size, "-o %.300s: its folder %.300s: %s", out, parent, strerror(errno));
    return false;
  }
  if (is_checkpoint_folder(real)) {
    snprintf(err, err_size,
             "-o %.300s is inside the checkpoint folder %.300s: refusing to write there (pick a "
             "path outside it)",
             out, real);
    return false;
  }
  /* OUT is written as OUT.tmp, then renamed: a file of that name is not ours to replace */
  char tmp[PATH_MAX + 16];
  snprintf(tmp, sizeof tmp, "%s.tmp", out);
  if (lstat(tmp, &sb) == 0) {
    snprintf(err, err_size,
             "-o %.300s: %.300s exists (a write under way, or an interrupted one): refusing to "
             "replace it (remove it first)",
             out, tmp);
    return false;
  }
  return true;
}

/* A failure to write -o OUT (hx_st_write's reason, which may name the
 * tensor being written or OUT.tmp only) as one line naming OUT and saying
 * that nothing is left of it. */
static void name_output(const char *out, char *err, size_t err_size) {
  char why[ERR_SIZE];
  snprintf(why, sizeof why, "%s", err);
  snprintf(err, err_size, "-o %.300s: %.600s; nothing was written", out, why);
}

/* ---- info ---- */

static int info_safetensors(const char *path) {
  char err[ERR_SIZE];
  struct hx_st_file f;
  if (!hx_st_open(&f, path, err, sizeof err))
    return error(err);
  /* names as hx_rt_printable shows them: a name's \u001b would be a terminal escape */
  char shown[1024];
  printf("%s: safetensors, %d tensors, %" PRIu64 " bytes of data\n",
         hx_rt_printable(path, shown, sizeof shown), f.ntensors, f.size - f.data_start);
  for (int i = 0; i < f.ntensors; i++) {
    const struct hx_st_tensor *t = &f.tensors[i];
    printf("  %s %s [", hx_rt_printable(t->name, shown, sizeof shown), t->dtype);
    for (int d = 0; d < t->ndim; d++)
      printf("%s%" PRId64, d ? ", " : "", t->shape[d]);
    printf("]\n");
  }
  hx_st_close(&f);
  return 0;
}

static int info_checkpoint(const char *dir, int64_t step) {
  char err[ERR_SIZE];
  struct hx_rt_ckpt_info in;
  if (!hx_rt_ckpt_info_load(dir, step, &in, err, sizeof err))
    return error(err);
  printf("checkpoint %s/step_%08" PRId64 "\n  step %" PRId64 " of %" PRId64
         " (the learning-rate schedule's steps)\n  plan %s, %d ranks\n  model %s\n  data %s\n",
         dir, in.step, in.step, in.schedule_steps, in.fingerprint, in.nranks, in.model, in.data);
  const int64_t *r = in.index;
  for (int k = 0; k < in.nranks; k++) {
    printf("  rank_%04d.ckpt: %d tensors\n", k, in.ntensors[k]);
    for (int i = 0; i < in.ntensors[k]; i++, r += HX_RT_CKPT_INDEX_INTS) {
      char name[64];
      hx_rt_ckpt_tensor_name((uint64_t)r[0], name, sizeof name);
      printf("    %s [%" PRId64 ", %" PRId64 "] rows [%" PRId64 ", %" PRId64 ") cols [%" PRId64
             ", %" PRId64 ")\n",
             name, r[1], r[2], r[3], r[4], r[5], r[6]);
    }
  }
  hx_rt_ckpt_info_free(&in);
  return 0;
}

/* ---- export ---- */

struct export_ctx {
  const char *dir;
  struct hx_rt_ckpt_info *info; /* the MANIFEST, parsed once for every tensor */
  struct hx_hf_model model;
  bool fill_failed; /* the reason is a tensor's (it names it), not the output's */
};

/* Rows of one RoPE-permuted tensor from one order into the other: to_hf
 * takes hexic's interleaved rows to Hugging Face's halves, else back. False
 * (with the reason in err) when its copy cannot be allocated: the tensor
 * would otherwise be written in the wrong row order without a word. */
static bool permute_rows(float *w, int64_t heads, int64_t hd, int64_t cols, bool to_hf, char *err,
                         size_t err_size) {
  float *copy = malloc(sizeof(float) * (size_t)(heads * hd * cols));
  if (!copy) {
    snprintf(err, err_size, "out of memory reordering the RoPE rows (%lld floats)",
             (long long)(heads * hd * cols));
    return false;
  }
  memcpy(copy, w, sizeof(float) * (size_t)(heads * hd * cols));
  for (int64_t h = 0; h < heads; h++)
    for (int64_t j = 0; j < hd; j++) {
      int64_t hexic = h * hd + hx_hf_rope_row(j, hd), hf = h * hd + j;
      memcpy(w + (to_hf ? hf : hexic) * cols, copy + (to_hf ? hexic : hf) * cols,
             sizeof(float) * (size_t)cols);
    }
  free(copy);
  return true;
}

/* hx_st_out's fill: the whole tensor gathered from the checkpoint's ranks. */
static bool export_fill(void *arg, int index, float *dst, char *err, size_t err_size) {
  struct export_ctx *c = arg;
  uint64_t id = hx_hf_tensor_id(&c->model, index);
  int64_t rows, cols;
  hx_hf_tensor_shape(&c->model, id, &rows, &cols);
  struct hx_rt_ckpt_tensor t = {.param = dst,
                                .n = rows * cols,
                                .id = id,
                                .rows = rows,
                                .cols = cols,
                                .r0 = 0,
                                .r1 = rows,
                                .c0 = 0,
                                .c1 = cols};
  int heads = hx_hf_rope_heads(&c->model, id);
  bool ok = hx_rt_ckpt_info_read(c->dir, c->info, &t, err, err_size) &&
            (!heads ||
             permute_rows(dst, heads, c->model.hidden / c->model.heads, cols, true, err, err_size));
  c->fill_failed = !ok;
  return ok;
}

struct config_args {
  const struct hx_hf_model *m;
  const char *dtype;
};

static void write_config(FILE *f, const void *arg) {
  const struct config_args *a = arg;
  hx_hf_config_write(f, a->m, a->dtype);
}

/* The config.json an export puts beside OUT (from_pretrained reads the
 * folder): path in buf; *same when one of exactly this text is there
 * already (a second export into the folder, or a rerun). Another text is
 * replaced only with --force, as OUT is. */
static bool config_output_ok(const char *out, const struct hx_hf_model *m, const char *dtype,
                             bool force, char *buf, size_t size, bool *same, char *err,
                             size_t err_size) {
  hx_st_folder_prefix(out, buf, size);
  strncat(buf, "config.json", size - strlen(buf) - 1);
  char *want = NULL, have[8192];
  size_t want_len = 0;
  FILE *mem = open_memstream(&want, &want_len);
  if (!mem) {
    snprintf(err, err_size, "out of memory");
    return false;
  }
  hx_hf_config_write(mem, m, dtype);
  fclose(mem);
  FILE *old = fopen(buf, "r");
  size_t got = old ? fread(have, 1, sizeof have, old) : 0;
  struct stat sb;
  *same = old && lstat(buf, &sb) == 0 && S_ISREG(sb.st_mode) && got == want_len &&
          !memcmp(have, want, want_len);
  if (old)
    fclose(old);
  free(want);
  if (*same)
    return true;
  if (!output_ok(buf, force, err, err_size)) {
    char why[ERR_SIZE];
    snprintf(why, sizeof why, "%s", err);
    snprintf(err, err_size, "%.700s (export writes the model's config.json beside -o %.200s)", why,
             out);
    return false;
  }
  return true;
}

static int export_checkpoint(const char *dir, const struct options *o) {
  if (!o->out)
    return usage("export needs -o OUT.safetensors");
  if (strcmp(o->format, "safetensors"))
    return usage("--format: only safetensors is written");
  if (strcmp(o->dtype, "fp32") && strcmp(o->dtype, "bf16"))
    return usage("--dtype is fp32 or bf16");
  char err[ERR_SIZE];
  if (!output_ok(o->out, o->force, err, sizeof err))
    return error(err);
  struct hx_rt_ckpt_info in;
  if (!hx_rt_ckpt_info_load(dir, o->step, &in, err, sizeof err))
    return error(err);
  struct export_ctx ctx = {dir, &in, {0}, false};
  if (!hx_hf_parse_model_line(in.model, &ctx.model)) {
    snprintf(err, sizeof err, "%s: the checkpoint's model line '%s' is not one hexic writes",
             shown(0, dir), shown(1, in.model));
    hx_rt_ckpt_info_free(&in);
    return error(err);
  }
  /* the positions config.json gives: the sequence length trained */
  if (sscanf(in.data, "global_batch %*d seq_len %d", &ctx.model.max_positions) != 1 ||
      ctx.model.max_positions <= 0)
    ctx.model.max_positions = 2048;
  const char *torch_dtype = !strcmp(o->dtype, "bf16") ? "bfloat16" : "float32";
  char config[PATH_MAX + 16];
  bool config_there = false;
  if (!config_output_ok(o->out, &ctx.model, torch_dtype, o->force, config, sizeof config,
                        &config_there, err, sizeof err)) {
    hx_rt_ckpt_info_free(&in);
    return error(err);
  }
  int n = hx_hf_tensor_count(&ctx.model);
  struct hx_st_out *out = calloc((size_t)n, sizeof *out);
  char(*names)[96] = calloc((size_t)n, sizeof *names);
  for (int i = 0; out && names && i < n; i++) {
    uint64_t id = hx_hf_tensor_id(&ctx.model, i);
    int64_t rows, cols;
    hx_hf_tensor_shape(&ctx.model, id, &rows, &cols);
    hx_hf_name(id, names[i], sizeof names[i]);
    out[i] = (struct hx_st_out){
        names[i], rows == 1 ? 1 : 2, {rows == 1 ? cols : rows, cols}, export_fill, &ctx};
  }
  char meta[1024];
  snprintf(meta, sizeof meta, "step %" PRId64 "; plan %s; %s", in.step, in.fingerprint, in.model);
  bool ok = out && names &&
            hx_st_write(o->out, out, n, !strcmp(o->dtype, "bf16"), "hexic", meta, err, sizeof err);
  if (!ok && out && names && !ctx.fill_failed)
    name_output(o->out, err, sizeof err);
  struct config_args cargs = {&ctx.model, torch_dtype};
  if (ok && !config_there &&
      !write_text_file(config, write_config, &cargs, "config.json", err, sizeof err)) {
    unlink(o->out); /* the weights without their config would load as another model */
    ok = false;
  }
  /* only now: the files are complete, flushed and renamed into place */
  if (ok)
    printf("%s: %d tensors of step %" PRId64 " (%s), Hugging Face Llama names, %s; %s\n", o->out,
           n, in.step, in.model, o->dtype, config);
  free(out);
  free(names);
  hx_rt_ckpt_info_free(&in);
  return ok ? 0 : error(out && names ? err : "out of memory");
}

/* ---- import ---- */

static bool ends_with(const char *s, const char *tail) {
  size_t n = strlen(s), k = strlen(tail);
  return n >= k && !strcmp(s + n - k, tail);
}

static const struct hx_st_tensor *find_tensor(const struct hx_st_set *s, const char *name,
                                              const struct hx_st_file **file) {
  return hx_st_set_find(s, name, file);
}

/* By parsing the name, not comparing it with every parameter's: a file of a
 * 100000-layer config has 900k tensors, and that comparison was quadratic. */
static bool is_expected(const struct hx_hf_model *m, const char *name) {
  uint64_t id;
  return hx_hf_id_of_name(m, name, &id) ||
         ends_with(name, ".rotary_emb.inv_freq"); /* a buffer older exports carry: ignored */
}

/* Every parameter of the config present once with its shape and a dtype
 * hexic reads; no tensor the model does not have. */
static bool check_sources(const struct hx_st_set *s, const struct hx_hf_model *m, const char *in,
                          char *err, size_t err_size) {
  for (int f = 0; f < s->n; f++)
    for (int i = 0; i < s->files[f].ntensors; i++) {
      const struct hx_st_tensor *t = &s->files[f].tensors[i];
      if (!is_expected(m, t->name)) {
        snprintf(err, err_size, "%s: unexpected tensor '%s': not a parameter of this Llama config",
                 shown(0, s->files[f].path), shown(1, t->name));
        return false;
      }
      if (strcmp(t->dtype, "F32") && strcmp(t->dtype, "BF16") && strcmp(t->dtype, "F16") &&
          !ends_with(t->name, "inv_freq")) {
        snprintf(err, err_size, "%s: tensor '%s' has dtype %s; hexic reads F32, BF16 and F16",
                 shown(0, s->files[f].path), shown(1, t->name), t->dtype);
        return false;
      }
      /* once: the import reads the first copy, whose shape alone is checked below */
      const struct hx_st_file *first = NULL;
      if (find_tensor(s, t->name, &first) != t) {
        snprintf(err, err_size, "%s: tensor '%s' is in %s too (each parameter once)",
                 shown(0, s->files[f].path), t->name, shown(1, first->path));
        return false;
      }
    }
  for (int i = 0; i < hx_hf_tensor_count(m); i++) {
    uint64_t id = hx_hf_tensor_id(m, i);
    int64_t rows, cols;
    char name[96];
    hx_hf_tensor_shape(m, id, &rows, &cols);
    hx_hf_name(id, name, sizeof name);
    const struct hx_st_file *file = NULL;
    const struct hx_st_tensor *t = find_tensor(s, name, &file);
    bool shape_ok = t && (rows == 1 ? t->ndim == 1 && t->shape[0] == cols
                                    : t->ndim == 2 && t->shape[0] == rows && t->shape[1] == cols);
    if (!t)
      snprintf(err, err_size,
               "%s: missing tensor '%s' ([%" PRId64 ", %" PRId64 "] for this config)", shown(0, in),
               name, rows, cols);
    else if (!shape_ok)
      snprintf(err, err_size,
               "%s: tensor '%s' is not [%" PRId64 ", %" PRId64 "], its shape for this config",
               shown(0, file->path), name, rows, cols);
    if (!shape_ok)
      return false;
  }
  return true;
}

struct import_ctx {
  const struct hx_st_set *src;
  struct hx_hf_model model;
  bool fill_failed; /* the reason is a source tensor's (it names it), not the output's */
};

/* A NaN or infinite weight would train to a NaN loss: refused, the source
 * file, the tensor and the first such element (in the file's layout) named. */
static bool finite_weights(const float *w, int64_t rows, int64_t cols, const char *file,
                           const char *name, char *err, size_t err_size) {
  int64_t bad = hx_rt_first_nonfinite(w, rows * cols);
  if (bad < 0)
    return true;
  snprintf(err, err_size,
           "%.500s: tensor '%.100s' holds %s at element %" PRId64 " (row %" PRId64
           ", column %" PRId64 "): non-finite weights are refused",
           file, name, isnan(w[bad]) ? "NaN" : "an infinity", bad, bad / cols, bad % cols);
  return false;
}

static bool import_fill(void *arg, int index, float *dst, char *err, size_t err_size) {
  struct import_ctx *c = arg;
  uint64_t id = hx_hf_tensor_id(&c->model, index);
  int64_t rows, cols;
  char name[96];
  hx_hf_tensor_shape(&c->model, id, &rows, &cols);
  hx_hf_name(id, name, sizeof name);
  const struct hx_st_file *file = NULL;
  const struct hx_st_tensor *t = find_tensor(c->src, name, &file);
  int heads = hx_hf_rope_heads(&c->model, id);
  bool ok = t && hx_st_read_f32(file, t, 0, rows, 0, cols, dst, err, err_size) &&
            finite_weights(dst, rows, cols, file->path, name, err, err_size) &&
            (!heads || permute_rows(dst, heads, c->model.hidden / c->model.heads, cols, false, err,
                                    err_size));
  c->fill_failed = !ok;
  return ok;
}

/* An export of hexic's without a config.json beside it (written before
 * export wrote one): the model line export records in the file's metadata
 * ("step N; plan F; layers ...") is the model, when it carries rope_theta
 * and norm_eps. False when IN is no such file. */
static bool model_of_export(const char *in, struct hx_hf_model *m) {
  struct hx_st_file f;
  char err[ERR_SIZE];
  if (ends_with(in, ".json") || !hx_st_open(&f, in, err, sizeof err))
    return false;
  const char *line = f.hexic_export ? strstr(f.hexic_export, "; layers ") : NULL;
  bool ok = line && hx_hf_parse_model_line(line + 2, m) && m->rope_theta > 0;
  hx_st_close(&f);
  return ok;
}

static int import_weights(const char *in, const struct options *o) {
  if (!o->out)
    return usage("import needs -o OUT.safetensors");
  char err[ERR_SIZE], config[PATH_MAX + 16];
  if (!output_ok(o->out, o->force, err, sizeof err))
    return error(err);
  if (o->config) {
    snprintf(config, sizeof config, "%s", o->config);
  } else {
    hx_st_folder_prefix(in, config, PATH_MAX);
    strcat(config, "config.json");
  }
  struct import_ctx ctx = {NULL, {0}, false};
  struct stat sb;
  bool from_export = !o->config && stat(config, &sb) != 0 && errno == ENOENT &&
                     model_of_export(in, &ctx.model);
  if (from_export)
    fprintf(stderr,
            "hexic-ckpt: note: no %s: %s is hexic's export, and the model line it records is "
            "taken\n",
            config, in);
  else if (!hx_hf_config_read(config, &ctx.model, err, sizeof err))
    return error(err);
  struct hx_st_set *s = calloc(1, sizeof *s);
  if (!s)
    return error("out of memory");
  bool ok = hx_st_set_open(s, in, err, sizeof err);
  ok = ok && check_sources(s, &ctx.model, in, err, sizeof err);
  ctx.src = s;
  int n = hx_hf_tensor_count(&ctx.model);
  struct hx_st_out *out = ok ? calloc((size_t)n, sizeof *out) : NULL;
  char(*names)[64] = ok ? calloc((size_t)n, sizeof *names) : NULL;
  for (int i = 0; out && names && i < n; i++) {
    uint64_t id = hx_hf_tensor_id(&ctx.model, i);
    int64_t rows, cols;
    hx_hf_tensor_shape(&ctx.model, id, &rows, &cols);
    hx_rt_ckpt_tensor_name(id, names[i], sizeof names[i]);
    out[i] = (struct hx_st_out){names[i], 2, {rows, cols}, import_fill, &ctx};
  }
  char line[512];
  hx_hf_model_line(&ctx.model, line, sizeof line);
  bool writing = ok && out && names;
  ok = writing && hx_st_write(o->out, out, n, false, "hexic_model", line, err, sizeof err);
  if (writing && !ok && !ctx.fill_failed)
    name_output(o->out, err, sizeof err);
  /* only now: the file is complete, flushed and renamed into place */
  if (ok)
    printf("%s: hexic's initial weights, %d tensors (%s), from %s; train from them with "
           "--init-from %s\n",
           o->out, n, line, in, o->out);
  free(out);
  free(names);
  hx_st_set_close(s);
  free(s);
  return ok ? 0 : error(err);
}

/* ---- import-hf ---- */

/* A text file written to OUT as import and export write theirs: OUT.tmp
 * (created, never an existing file followed), flushed, fsync'ed and renamed
 * over OUT; on any failure (a full disk: EFBIG, ENOSPC) OUT.tmp is removed
 * and err says why, naming what (the model block, config.json). */
static bool write_text_file(const char *out, void (*write)(FILE *, const void *), const void *arg,
                            const char *what, char *err, size_t err_size) {
  char tmp[PATH_MAX + 16];
  snprintf(tmp, sizeof tmp, "%s.tmp", out);
  int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL, 0666);
  FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
  if (!f) {
    snprintf(err, err_size, "-o %.300s: cannot create %.300s: %s", out, tmp, strerror(errno));
    if (fd >= 0)
      close(fd);
    unlink(tmp);
    return false;
  }
  errno = 0;
  write(f, arg);
  /* the first failure's errno: a later call may change errno */
  int failure = ferror(f) ? (errno ? errno : EIO) : 0;
  if (!failure && (fflush(f) != 0 || fsync(fileno(f)) != 0))
    failure = errno;
  if (fclose(f) != 0 && !failure)
    failure = errno;
  if (!failure && rename(tmp, out) != 0)
    failure = errno;
  if (failure) {
    unlink(tmp);
    snprintf(err, err_size, "-o %.300s: cannot write %s: %s; nothing was written", out, what,
             strerror(failure));
  }
  return !failure;
}

struct hx_block_args {
  const struct hx_hf_model *m;
  const char *name, *config;
};

static void write_hx_block(FILE *f, const void *arg) {
  const struct hx_block_args *a = arg;
  hx_hf_write_hx(f, a->m, a->name, a->config);
}

static bool write_hx_file(const char *out, const struct hx_hf_model *m, const char *name,
                          const char *config, char *err, size_t err_size) {
  struct hx_block_args a = {m, name, config};
  return write_text_file(out, write_hx_block, &a, "the model block", err, err_size);
}

static bool write_hx_stdout(const struct hx_hf_model *m, const char *name, const char *config,
                            char *err, size_t err_size) {
  errno = 0;
  hx_hf_write_hx(stdout, m, name, config);
  if (fflush(stdout) == 0 && !ferror(stdout))
    return true;
  snprintf(err, err_size, "cannot write the model block to standard output: %s",
           strerror(errno ? errno : EIO));
  return false;
}

static int import_config(const char *config, const struct options *o) {
  char err[ERR_SIZE];
  struct hx_hf_model m;
  if (!hx_hf_config_read(config, &m, err, sizeof err))
    return error(err);
  char name[64] = "imported";
  if (o->name) {
    size_t n = 0;
    for (const char *p = o->name; *p && n + 1 < sizeof name; p++)
      if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
          strchr("._-", *p))
        name[n++] = *p;
    name[n] = '\0';
  }
  if (o->out && !output_ok(o->out, o->force, err, sizeof err))
    return error(err);
  bool ok = o->out ? write_hx_file(o->out, &m, name, config, err, sizeof err)
                   : write_hx_stdout(&m, name, config, err, sizeof err);
  if (!ok)
    return error(err);
  /* only now: the block is complete (on disk, renamed into place) */
  int64_t params = hx_hf_parameter_count(&m);
  fprintf(o->out ? stdout : stderr, "model %s: %" PRId64 " parameters (%.2fB)%s%s\n", name, params,
          (double)params / 1e9, o->out ? ", written to " : "", o->out ? o->out : "");
  return 0;
}

int main(int argc, char **argv) {
  if (argc == 2 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
    fputs(usage_text, stdout); /* asked for: not an error */
    return 0;
  }
  const char *cmd = argc > 1 ? argv[1] : NULL;
  bool known = cmd && (!strcmp(cmd, "info") || !strcmp(cmd, "export") || !strcmp(cmd, "import") ||
                       !strcmp(cmd, "import-hf"));
  char why[512];
  if (cmd && !known) {
    snprintf(why, sizeof why, "unknown subcommand '%.200s'", cmd);
    return usage(why);
  }
  if (argc < 3)
    return usage(cmd ? "a subcommand takes an argument" : NULL);
  struct options o;
  const char *arg;
  if (!parse_options(argc - 1, argv + 1, &o, &arg, why, sizeof why))
    return usage(why);
  if (!strcmp(cmd, "info"))
    return ends_with(arg, ".safetensors") ? info_safetensors(arg) : info_checkpoint(arg, o.step);
  if (!strcmp(cmd, "export"))
    return export_checkpoint(arg, &o);
  if (!strcmp(cmd, "import"))
    return import_weights(arg, &o);
  if (!strcmp(cmd, "import-hf"))
    return import_config(arg, &o);
  return usage("unknown subcommand");
}
