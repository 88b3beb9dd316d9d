/* Crash-safe checkpoints (see rt_ckpt.h for the layout and the protocol). */
#include "rt_ckpt.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ckpt/hf_llama.h"
#include "ckpt/safetensors.h"
#include "ckpt/user_file.h"
#include "rt_init.h"

/* Floats are stored as the host's bytes; the format is little-endian. */
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "hexic checkpoints are little-endian; this host is not"
#endif

enum { PATH_SIZE = 4096, FINGERPRINT_FIELD = 64, FORMAT_VERSION = 2, LINE_FIELD = 400 };

/* Error messages may be cut to the caller's buffer; through a va_list gcc does
 * not flag that truncation, which is intended here, under -Wformat-truncation. */
__attribute__((format(printf, 3, 4))) static void set_error(char *err, size_t err_size,
                                                            const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err, err_size, fmt, ap);
  va_end(ap);
}
static const char RANK_MAGIC[8] = {'H', 'X', 'C', 'K', 'P', 'T', '0', '1'};
static const char MANIFEST_HEAD[] = "hexic-checkpoint 3\n";
static const char MANIFEST_SUM_KEY[] = "manifest-fnv64 ";

uint64_t hx_rt_fnv64(uint64_t h, const void *data, size_t n) {
  const unsigned char *p = data;
  for (size_t i = 0; i < n; i++) {
    h ^= p[i];
    h *= UINT64_C(0x100000001b3);
  }
  return h;
}

/* ---- paths ---- */

void hx_rt_ckpt_step_dir(char *buf, size_t size, const char *dir, int64_t step) {
  snprintf(buf, size, "%s/step_%08" PRId64, dir, step);
}

void hx_rt_ckpt_rank_path(char *buf, size_t size, const char *dir, int64_t step, int rank) {
  snprintf(buf, size, "%s/step_%08" PRId64 "/rank_%04d.ckpt", dir, step, rank);
}

void hx_rt_ckpt_manifest_path(char *buf, size_t size, const char *dir, int64_t step) {
  snprintf(buf, size, "%s/step_%08" PRId64 "/MANIFEST", dir, step);
}

static bool path_fits(const char *dir, char *err, size_t err_size) {
  if (strlen(dir) + 64 < PATH_SIZE)
    return true;
  set_error(err, err_size, "checkpoint directory name too long (%zu characters)", strlen(dir));
  return false;
}

/* ---- durable files ---- */

/* A file being written: bytes counted and checksummed on the way out. */
struct sink {
  FILE *f;
  uint64_t size, hash;
  bool ok;
  int error; /* errno of the first failed write: later calls may change errno */
};

static void sink_put(struct sink *s, const void *p, size_t n) {
  if (!s->ok)
    return;
  s->ok = fwrite(p, 1, n, s->f) == n;
  if (!s->ok)
    s->error = errno;
  s->hash = hx_rt_fnv64(s->hash, p, n);
  s->size += n;
}

static void sink_u32(struct sink *s, uint32_t v) { sink_put(s, &v, sizeof v); }
static void sink_u64(struct sink *s, uint64_t v) { sink_put(s, &v, sizeof v); }

typedef void (*write_body_fn)(struct sink *s, const void *ctx);

/* path.tmp, written, flushed, fsync'ed, renamed over path, directory
 * fsync'ed: a reader sees the old file, or the whole new one. */
static bool write_atomically(const char *path, write_body_fn body, const void *ctx,
                             uint64_t *size_out, uint64_t *hash_out, char *err, size_t err_size) {
  char tmp[PATH_SIZE + 8];
  snprintf(tmp, sizeof tmp, "%s.tmp", path);
  struct sink s = {fopen(tmp, "wb"), 0, HX_FNV64_INIT, true, 0};
  if (!s.f) {
    set_error(err, err_size, "%s: cannot create: %s", tmp, strerror(errno));
    return false;
  }
  body(&s, ctx);
  /* the first failure's errno: a later call may change errno */
  int error = s.ok ? 0 : s.error ? s.error : EIO;
  if (!error && (fflush(s.f) != 0 || fsync(fileno(s.f)) != 0))
    error = errno;
  if (fclose(s.f) != 0 && !error)
    error = errno;
  if (!error && rename(tmp, path) != 0)
    error = errno;
  if (!error && !hx_rt_fsync_folder_of(path))
    error = errno ? errno : EIO;
  bool ok = !error;
  if (!ok) {
    set_error(err, err_size, "%s: write failed: %s", path, strerror(error));
    unlink(tmp);
    return false;
  }
  if (size_out)
    *size_out = s.size;
  if (hash_out)
    *hash_out = s.hash;
  return true;
}

static bool mkdir_p(const char *path, char *err, size_t err_size) {
  char buf[PATH_SIZE];
  snprintf(buf, sizeof buf, "%s", path);
  for (char *p = buf + 1; *p; p++) {
    if (*p != '/')
      continue;
    *p = '\0';
    if (mkdir(buf, 0777) != 0 && errno != EEXIST)
      break;
    *p = '/';
  }
  if (mkdir(buf, 0777) != 0 && errno != EEXIST) {
    set_error(err, err_size, "%s: cannot create directory: %s", buf, strerror(errno));
    return false;
  }
  return true;
}

bool hx_rt_ckpt_prepare(const char *dir, int64_t step, char *err, size_t err_size) {
  if (!path_fits(dir, err, err_size))
    return false;
  char path[PATH_SIZE];
  hx_rt_ckpt_step_dir(path, sizeof path, dir, step);
  if (!mkdir_p(path, err, err_size))
    return false;
  hx_rt_ckpt_manifest_path(path, sizeof path, dir, step);
  if (unlink(path) != 0 && errno != ENOENT) {
    set_error(err, err_size, "%s: cannot remove the stale manifest: %s", path, strerror(errno));
    return false;
  }
  return hx_rt_fsync_folder_of(path) || (set_error(err, err_size, "%s: fsync failed", dir), false);
}

bool hx_rt_ckpt_probe_dir(const char *dir, int rank, bool create, char *err, size_t err_size) {
  if (!path_fits(dir, err, err_size) || (create && !mkdir_p(dir, err, err_size)))
    return false;
  char path[PATH_SIZE];
  snprintf(path, sizeof path, "%s/.hexic-write-test.rank_%04d", dir, rank);
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0666);
  bool ok = fd >= 0 && write(fd, "x", 1) == 1;
  int saved = errno;
  if (fd >= 0)
    ok = close(fd) == 0 && ok;
  if (fd >= 0)
    unlink(path);
  if (!ok)
    set_error(err, err_size, "%s: cannot write a file there: %s", dir,
              strerror(fd >= 0 ? saved : errno));
  return ok;
}

/* ---- rank files ---- */

struct rank_file_ctx {
  int rank;
  const char *fingerprint;
  const struct hx_rt_ckpt_state *st;
  int64_t *index; /* NULL, or ntensors records written here */
};

/* Tensor i's canonical identity, as the file and the index record it: id,
 * rows, cols, r0, r1, c0, c1 (a tensor without one: id i, [1, n], whole). */
static void identity_of(const struct hx_rt_ckpt_state *st, int i, int64_t out[7]) {
  const struct hx_rt_ckpt_tensor *t = &st->tensors[i];
  if (t->rows == 0) {
    int64_t opaque[7] = {i, 1, t->n, 0, 1, 0, t->n};
    memcpy(out, opaque, sizeof opaque);
    return;
  }
  int64_t given[7] = {(int64_t)t->id, t->rows, t->cols, t->r0, t->r1, t->c0, t->c1};
  memcpy(out, given, sizeof given);
}

static void write_rank_body(struct sink *s, const void *vctx) {
  const struct rank_file_ctx *c = vctx;
  char fp[FINGERPRINT_FIELD] = {0};
  snprintf(fp, sizeof fp, "%s", c->fingerprint);
  sink_put(s, RANK_MAGIC, sizeof RANK_MAGIC);
  sink_u32(s, FORMAT_VERSION);
  sink_u32(s, (uint32_t)c->rank);
  sink_u64(s, (uint64_t)c->st->step);
  sink_u64(s, c->st->data_pos);
  sink_put(s, fp, sizeof fp);
  sink_u32(s, (uint32_t)c->st->ntensors);
  sink_u32(s, 0); /* reserved */
  for (int i = 0; i < c->st->ntensors; i++) {
    const struct hx_rt_ckpt_tensor *t = &c->st->tensors[i];
    size_t bytes = (size_t)t->n * sizeof(float);
    int64_t ident[7];
    identity_of(c->st, i, ident);
    sink_u64(s, (uint64_t)t->n);
    sink_put(s, ident, sizeof ident);
    if (c->index) {
      memcpy(c->index + (size_t)i * HX_RT_CKPT_INDEX_INTS, ident, sizeof ident);
      c->index[(size_t)i * HX_RT_CKPT_INDEX_INTS + 7] = (int64_t)s->size;
    }
    sink_put(s, t->param, bytes);
    sink_put(s, t->adam_m, bytes);
    sink_put(s, t->adam_v, bytes);
  }
}

bool hx_rt_ckpt_write_rank(const char *dir, int rank, const char *fingerprint,
                           const struct hx_rt_ckpt_state *st, uint64_t *size_out,
                           uint64_t *checksum_out, int64_t *index, char *err, size_t err_size) {
  if (!path_fits(dir, err, err_size))
    return false;
  char path[PATH_SIZE];
  hx_rt_ckpt_rank_path(path, sizeof path, dir, st->step, rank);
  struct rank_file_ctx ctx = {rank, fingerprint, st, index};
  return write_atomically(path, write_rank_body, &ctx, size_out, checksum_out, err, err_size);
}

/* ---- the manifest ---- */

struct manifest {
  int64_t step, schedule_steps;
  int nranks;
  char fingerprint[256], model[LINE_FIELD + 8], data[LINE_FIELD + 8];
  uint64_t *sizes, *checksums; /* malloc'ed, nranks each */
  int *ntensors;               /* per rank */
  int64_t *index;              /* every rank's records, in rank order */
  int64_t nrecords;
};

static void manifest_free(struct manifest *m) {
  free(m->sizes);
  free(m->checksums);
  free(m->ntensors);
  free(m->index);
  m->sizes = m->checksums = NULL;
  m->ntensors = NULL;
  m->index = NULL;
}

struct manifest_ctx {
  const struct hx_rt_ckpt_state *st;
  const char *fingerprint;
  const struct hx_rt_ckpt_files *files;
};

static void write_manifest_body(struct sink *s, const void *vctx) {
  const struct manifest_ctx *c = vctx;
  const struct hx_rt_ckpt_files *f = c->files;
  char line[1024];
  int n = snprintf(line, sizeof line,
                   "%sstep %" PRId64 "\nschedule-steps %" PRId64
                   "\nranks %d\nfingerprint %s\nmodel %s\ndata %s\n",
                   MANIFEST_HEAD, c->st->step, c->st->schedule_steps, f->nranks, c->fingerprint,
                   c->st->model ? c->st->model : "", c->st->data ? c->st->data : "");
  sink_put(s, line, (size_t)n);
  const int64_t *rec = f->index;
  for (int r = 0; r < f->nranks; r++) {
    int nt = f->ntensors ? f->ntensors[r] : 0;
    n = snprintf(line, sizeof line,
                 "rank %d rank_%04d.ckpt size %" PRIu64 " fnv64 %016" PRIx64 " tensors %d\n", r, r,
                 f->sizes[r], f->checksums[r], nt);
    sink_put(s, line, (size_t)n);
    for (int i = 0; i < nt; i++, rec += HX_RT_CKPT_INDEX_INTS) {
      n = snprintf(line, sizeof line,
                   "tensor %" PRId64 " %" PRId64 " %" PRId64 " %" PRId64 " %" PRId64 " %" PRId64
                   " %" PRId64 " %" PRId64 "\n",
                   rec[0], rec[1], rec[2], rec[3], rec[4], rec[5], rec[6], rec[7]);
      sink_put(s, line, (size_t)n);
    }
  }
  /* The checksum of everything above: a damaged manifest is detected too. */
  n = snprintf(line, sizeof line, "%s%016" PRIx64 "\n", MANIFEST_SUM_KEY, s->hash);
  sink_put(s, line, (size_t)n);
}

static bool valid_line(const char *what, const char *text, size_t limit, char *err,
                       size_t err_size) {
  if (!text || (strlen(text) < limit && !strpbrk(text, "\n\r")))
    return true;
  set_error(err, err_size, "%s must be one line under %zu characters", what, limit);
  return false;
}

static void prune_older(const char *dir, const struct hx_rt_ckpt_state *st);

bool hx_rt_ckpt_write_manifest(const char *dir, const struct hx_rt_ckpt_state *st,
                               const char *fingerprint, const struct hx_rt_ckpt_files *files,
                               char *err, size_t err_size) {
  if (!path_fits(dir, err, err_size) ||
      !valid_line("plan fingerprint", fingerprint, 200, err, err_size) ||
      !valid_line("the model line", st->model, LINE_FIELD, err, err_size) ||
      !valid_line("the data line", st->data, LINE_FIELD, err, err_size))
    return false;
  char path[PATH_SIZE];
  hx_rt_ckpt_manifest_path(path, sizeof path, dir, st->step);
  struct manifest_ctx ctx = {st, fingerprint, files};
  if (!write_atomically(path, write_manifest_body, &ctx, NULL, NULL, err, err_size))
    return false;
  prune_older(dir, st);
  return true;
}

/* Reads a whole file of at most limit bytes into a NUL-terminated malloc'ed
 * buffer the size of the file (not of the limit: a MANIFEST is read at
 * every verify, resume and export). */
static char *read_small_file(const char *path, size_t limit, size_t *len_out) {
  FILE *f = fopen(path, "rb");
  if (!f)
    return NULL;
  struct stat sb;
  size_t want = fstat(fileno(f), &sb) == 0 && sb.st_size >= 0 && (uint64_t)sb.st_size < limit
                    ? (size_t)sb.st_size
                    : limit;
  char *buf = malloc(want + 1);
  size_t len = buf ? fread(buf, 1, want + 1, f) : 0;
  bool ok = buf && !ferror(f) && len <= want;
  fclose(f);
  if (!ok) {
    free(buf);
    return NULL;
  }
  buf[len] = '\0';
  *len_out = len;
  return buf;
}

/* Checks the manifest's own checksum line; returns where that line starts. */
static const char *manifest_sum_ok(const char *text, size_t len) {
  const char *key = NULL;
  for (const char *p = strstr(text, MANIFEST_SUM_KEY); p; p = strstr(p + 1, MANIFEST_SUM_KEY))
    key = p;
  if (!key || (key != text && key[-1] != '\n') || memchr(text, '\0', len))
    return NULL;
  uint64_t recorded = 0;
  char tail = 0;
  if (sscanf(key + strlen(MANIFEST_SUM_KEY), "%16" SCNx64 "%c", &recorded, &tail) != 2 ||
      tail != '\n' || key + strlen(MANIFEST_SUM_KEY) + 17 != text + len)
    return NULL;
  return hx_rt_fnv64(HX_FNV64_INIT, text, (size_t)(key - text)) == recorded ? key : NULL;
}

/* "KEY rest-of-line\n" at *p: the rest into out, *p past the line. */
static bool take_line(const char **p, const char *key, char *out, size_t size) {
  size_t klen = strlen(key);
  const char *nl = strchr(*p, '\n');
  if (strncmp(*p, key, klen) != 0 || !nl || (size_t)(nl - *p) - klen >= size)
    return false;
  snprintf(out, size, "%.*s", (int)((size_t)(nl - *p) - klen), *p + klen);
  *p = nl + 1;
  return true;
}

/* The index lines of one rank file, appended to m->index. */
static bool parse_index(const char **p, int count, struct manifest *m) {
  if (count < 0 || count > 1 << 24)
    return false;
  int64_t *grown =
      realloc(m->index, sizeof *grown * (size_t)(m->nrecords + count) * HX_RT_CKPT_INDEX_INTS + 1);
  if (!grown)
    return false;
  m->index = grown;
  for (int i = 0; i < count; i++) {
    int64_t *r = m->index + (size_t)(m->nrecords + i) * HX_RT_CKPT_INDEX_INTS;
    int used = 0;
    if (sscanf(*p,
               "tensor %" SCNd64 " %" SCNd64 " %" SCNd64 " %" SCNd64 " %" SCNd64 " %" SCNd64
               " %" SCNd64 " %" SCNd64 "\n%n",
               &r[0], &r[1], &r[2], &r[3], &r[4], &r[5], &r[6], &r[7], &used) != 8 ||
        !used)
      return false;
    *p += used;
  }
  m->nrecords += count;
  return true;
}

/* Parses the body lines (head, step, ranks, fingerprint, model, data, one
 * line per rank followed by its tensors). */
static bool parse_manifest_body(const char *p, const char *end, struct manifest *m) {
  int used = 0;
  if (strncmp(p, MANIFEST_HEAD, strlen(MANIFEST_HEAD)) != 0)
    return false;
  p += strlen(MANIFEST_HEAD);
  if (sscanf(p, "step %" SCNd64 "\nschedule-steps %" SCNd64 "\nranks %d\n%n", &m->step,
             &m->schedule_steps, &m->nranks, &used) != 3 ||
      !used || m->nranks <= 0 || m->nranks > 1 << 20 || m->schedule_steps < 0)
    return false;
  p += used;
  if (!take_line(&p, "fingerprint ", m->fingerprint, sizeof m->fingerprint) ||
      !take_line(&p, "model ", m->model, sizeof m->model) ||
      !take_line(&p, "data ", m->data, sizeof m->data))
    return false;
  m->sizes = calloc((size_t)m->nranks, sizeof *m->sizes);
  m->checksums = calloc((size_t)m->nranks, sizeof *m->checksums);
  m->ntensors = calloc((size_t)m->nranks, sizeof *m->ntensors);
  if (!m->sizes || !m->checksums || !m->ntensors)
    return false;
  for (int r = 0; r < m->nranks; r++) {
    int rank = -1, file_rank = -1;
    used = 0;
    if (sscanf(p, "rank %d rank_%d.ckpt size %" SCNu64 " fnv64 %" SCNx64 " tensors %d\n%n", &rank,
               &file_rank, &m->sizes[r], &m->checksums[r], &m->ntensors[r], &used) != 5 ||
        !used || rank != r || file_rank != r)
      return false;
    p += used;
    if (!parse_index(&p, m->ntensors[r], m))
      return false;
  }
  return p == end;
}

/* "\r\n" -> "\n" in place; returns the new length. */
static size_t strip_crlf(char *text, size_t len) {
  size_t out = 0;
  for (size_t i = 0; i < len; i++)
    if (!(text[i] == '\r' && i + 1 < len && text[i + 1] == '\n'))
      text[out++] = text[i];
  text[out] = '\0';
  return out;
}

/* Reads and checks dir/step_N/MANIFEST; on success m holds it (free it). */
static bool load_manifest(const char *dir, int64_t step, struct manifest *m, char *err,
                          size_t err_size) {
  memset(m, 0, sizeof *m);
  char path[PATH_SIZE];
  hx_rt_ckpt_manifest_path(path, sizeof path, dir, step);
  size_t len = 0;
  char *text = read_small_file(path, 1 << 26, &len);
  if (!text) {
    set_error(err, err_size, "no readable MANIFEST (incomplete checkpoint)");
    return false;
  }
  const char *sum_line = manifest_sum_ok(text, len);
  if (!sum_line && strstr(text, "\r\n")) {
    /* line ends turned to CRLF on the way (a copy through another system):
     * read as written when the checksum holds over the LF text */
    len = strip_crlf(text, len);
    sum_line = manifest_sum_ok(text, len);
  }
  int old_format = !strncmp(text, "hexic-checkpoint 1\n", 19)   ? 1
                   : !strncmp(text, "hexic-checkpoint 2\n", 19) ? 2
                                                                : 0;
  bool ok = sum_line && !old_format && parse_manifest_body(text, sum_line, m) && m->step == step;
  free(text);
  if (!ok) {
    if (old_format)
      set_error(err, err_size,
                "MANIFEST has checkpoint format %d (an older hexic, without %s); this runtime "
                "reads format 3",
                old_format,
                old_format == 1 ? "the schedule's steps" : "the tensors' canonical layout");
    else
      set_error(err, err_size, "MANIFEST is damaged (checksum or syntax)");
    manifest_free(m);
  }
  return ok;
}

static bool file_checksum(const char *path, uint64_t *size_out, uint64_t *hash_out) {
  FILE *f = fopen(path, "rb");
  if (!f)
    return false;
  unsigned char buf[1 << 16];
  uint64_t size = 0, h = HX_FNV64_INIT;
  size_t got;
  while ((got = fread(buf, 1, sizeof buf, f)) > 0) {
    h = hx_rt_fnv64(h, buf, got);
    size += got;
    hx_rt_progress(); /* large files take a while: not a hang */
  }
  bool ok = !ferror(f);
  fclose(f);
  *size_out = size;
  *hash_out = h;
  return ok;
}

static bool manifest_matches(const struct manifest *m, int nranks, const char *fingerprint,
                             char *err, size_t err_size) {
  if (m->nranks != nranks) {
    set_error(err, err_size, "written by %d ranks, this world has %d", m->nranks, nranks);
    return false;
  }
  if (strcmp(m->fingerprint, fingerprint) != 0) {
    set_error(err, err_size, "written by another plan (fingerprint '%s', this plan '%s')",
              m->fingerprint, fingerprint);
    return false;
  }
  return true;
}

static bool rank_file_ok(const char *dir, int64_t step, int r, const struct manifest *m, char *err,
                         size_t err_size) {
  char path[PATH_SIZE];
  hx_rt_ckpt_rank_path(path, sizeof path, dir, step, r);
  uint64_t size = 0, hash = 0;
  if (!file_checksum(path, &size, &hash)) {
    set_error(err, err_size, "rank_%04d.ckpt is missing or unreadable", r);
    return false;
  }
  if (size != m->sizes[r] || hash != m->checksums[r]) {
    set_error(err, err_size,
              "rank_%04d.ckpt is corrupt (%" PRIu64 " bytes, fnv64 %016" PRIx64
              "; the manifest says %" PRIu64 " bytes, %016" PRIx64 ")",
              r, size, hash, m->sizes[r], m->checksums[r]);
    return false;
  }
  return true;
}

static bool pread_full(int fd, void *buf, size_t n, int64_t at) {
  char *p = buf;
  while (n > 0) {
    ssize_t got = pread(fd, p, n, (off_t)at);
    if (got <= 0)
      return false;
    p += got, n -= (size_t)got, at += got;
  }
  return true;
}

static bool index_in_range(const struct manifest *m, char *err, size_t err_size);

/* A rank file's bytes before its first tensor (magic, version, rank, step,
 * data position, fingerprint, tensor count, reserved), and before each
 * tensor's data (elements, then the identity: id, rows, cols, r0, r1, c0, c1). */
enum { RANK_HEADER_BYTES = 104, TENSOR_HEADER_INTS = 8 };

/* The rank file's header is that of rank k of the MANIFEST's step and plan,
 * holding as many tensors as its index lists. */
static bool rank_header_is(const unsigned char *head, int k, const struct manifest *m) {
  uint32_t version, rank, ntensors;
  int64_t step;
  char want_fp[FINGERPRINT_FIELD] = {0}; /* as written: cut to the field, NUL-padded */
  memcpy(want_fp, m->fingerprint, strnlen(m->fingerprint, sizeof want_fp - 1));
  memcpy(&version, head + 8, 4);
  memcpy(&rank, head + 12, 4);
  memcpy(&step, head + 16, 8);
  memcpy(&ntensors, head + 96, 4);
  return !memcmp(head, RANK_MAGIC, sizeof RANK_MAGIC) && version == FORMAT_VERSION &&
         rank == (uint32_t)k && step == m->step && !memcmp(head + 32, want_fp, sizeof want_fp) &&
         ntensors == (uint32_t)m->ntensors[k];
}

/* Record i of rank_k's index against the file's tensor i, whose header is
 * at byte `at` (the file's own walk): the same identity, an element count
 * that is its slice's and fits the file, and the data where the index puts
 * it. On success *next is where tensor i + 1's header starts. */
static bool record_is_file_tensor(int fd, int k, int i, const int64_t *rec, int64_t at,
                                  uint64_t file_size, int64_t *next, char *err, size_t err_size) {
  int64_t head[TENSOR_HEADER_INTS]; /* elements, then the identity */
  char name[64], found[64];
  hx_rt_ckpt_tensor_name((uint64_t)rec[0], name, sizeof name);
  int64_t room = (int64_t)file_size - at - (int64_t)sizeof head;
  if (room < 0 || !pread_full(fd, head, sizeof head, at)) {
    set_error(err, err_size,
              "rank_%04d.ckpt ends before its tensor %d, which the MANIFEST's index lists as %s", k,
              i, name);
    return false;
  }
  if (memcmp(head + 1, rec, 7 * sizeof *rec) != 0) {
    hx_rt_ckpt_tensor_name((uint64_t)head[1], found, sizeof found);
    set_error(
        err, err_size,
        "the MANIFEST's index lists %s rows [%" PRId64 ", %" PRId64 ") cols [%" PRId64 ", %" PRId64
        ") as tensor %d of rank_%04d.ckpt, where the file holds %s rows [%" PRId64 ", %" PRId64
        ") cols [%" PRId64 ", %" PRId64 "] (the index was edited or damaged)",
        name, rec[3], rec[4], rec[5], rec[6], i, k, found, head[4], head[5], head[6], head[7]);
    return false;
  }
  if (head[0] != (rec[4] - rec[3]) * (rec[6] - rec[5]) || head[0] > room / 12) {
    set_error(err, err_size,
              "rank_%04d.ckpt: tensor %d (%s) records %" PRId64
              " elements, not its slice's, or more than the file holds",
              k, i, name, head[0]);
    return false;
  }
  int64_t data_at = at + (int64_t)sizeof head;
  if (rec[7] != data_at) {
    set_error(err, err_size,
              "the MANIFEST's index puts %s at byte %" PRId64 " of rank_%04d.ckpt, where the file "
              "holds it at byte %" PRId64 " (the index was edited or damaged)",
              name, rec[7], k, data_at);
    return false;
  }
  *next = data_at + 12 * head[0];
  return true;
}

/* Rank file k as the MANIFEST's index describes it: its header (rank, step,
 * plan, tensor count) and, tensor by tensor in file order, the identity the
 * file records in front of each tensor's data and where that data starts,
 * to the file's last byte. The file's checksum shows it is the file that
 * was written; this shows the index (signed with the MANIFEST, apart from
 * the file) names what the file holds where it says, so a read under
 * another plan or an export cannot take one tensor's rows for another's. */
static bool index_matches_file(const char *dir, const struct manifest *m, int k,
                               const int64_t *recs, char *err, size_t err_size) {
  if (m->ntensors[k] == 0)
    return true; /* no index: nothing is read through it */
  char path[PATH_SIZE];
  hx_rt_ckpt_rank_path(path, sizeof path, dir, m->step, k);
  int fd = open(path, O_RDONLY);
  if (fd < 0) {
    set_error(err, err_size, "rank_%04d.ckpt: cannot open: %s", k, strerror(errno));
    return false;
  }
  unsigned char head[RANK_HEADER_BYTES];
  bool ok = pread_full(fd, head, sizeof head, 0) && rank_header_is(head, k, m);
  if (!ok)
    set_error(err, err_size,
              "rank_%04d.ckpt: its header is not that of rank %d of step %" PRId64
              ", plan %s, %d tensors, as the MANIFEST says",
              k, k, m->step, m->fingerprint, m->ntensors[k]);
  int64_t at = RANK_HEADER_BYTES;
  for (int i = 0; ok && i < m->ntensors[k]; i++)
    ok = record_is_file_tensor(fd, k, i, recs + (size_t)i * HX_RT_CKPT_INDEX_INTS, at, m->sizes[k],
                               &at, err, err_size);
  if (ok && (uint64_t)at != m->sizes[k]) {
    set_error(err, err_size,
              "rank_%04d.ckpt: its %d tensors end at byte %" PRId64 ", the file has %" PRIu64
              " bytes",
              k, m->ntensors[k], at, m->sizes[k]);
    ok = false;
  }
  close(fd);
  return ok;
}

/* Checkpoint `step` complete: its manifest intact, every rank file it names
 * present with the recorded size and checksum, and holding every tensor
 * where the index says; with a fingerprint, also written by nranks ranks
 * under that plan. */
static bool verify_step(const char *dir, int64_t step, int nranks, const char *fingerprint,
                        char *err, size_t err_size) {
  if (!path_fits(dir, err, err_size))
    return false;
  struct manifest m;
  if (!load_manifest(dir, step, &m, err, err_size))
    return false;
  bool ok = !fingerprint || manifest_matches(&m, nranks, fingerprint, err, err_size);
  for (int r = 0; ok && r < m.nranks; r++)
    ok = rank_file_ok(dir, step, r, &m, err, err_size);
  ok = ok && index_in_range(&m, err, err_size);
  const int64_t *recs = m.index;
  for (int r = 0; ok && r < m.nranks; recs += (size_t)m.ntensors[r++] * HX_RT_CKPT_INDEX_INTS)
    ok = index_matches_file(dir, &m, r, recs, err, err_size);
  manifest_free(&m);
  return ok;
}

bool hx_rt_ckpt_verify(const char *dir, int64_t step, int nranks, const char *fingerprint,
                       char *err, size_t err_size) {
  return verify_step(dir, step, nranks, fingerprint, err, err_size);
}

bool hx_rt_ckpt_verify_complete(const char *dir, int64_t step, char *err, size_t err_size) {
  return verify_step(dir, step, 0, NULL, err, err_size);
}

/* ---- finding and pruning ---- */

/* "step_" then digits only: the step number, else -1. */
static int64_t step_of_name(const char *name) {
  if (strncmp(name, "step_", 5) != 0 || !name[5])
    return -1;
  int64_t v = 0;
  for (const char *p = name + 5; *p; p++) {
    if (*p < '0' || *p > '9' || v > (INT64_MAX - 9) / 10)
      return -1;
    v = v * 10 + (*p - '0');
  }
  return v;
}

static int compare_desc(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return (x < y) - (x > y);
}

/* Step numbers of dir's step directories, newest first; NULL/0 if none. */
static int64_t *list_steps(const char *dir, int *count) {
  *count = 0;
  DIR *d = opendir(dir);
  if (!d)
    return NULL;
  int cap = 16;
  int64_t *steps = malloc(sizeof *steps * (size_t)cap);
  struct dirent *e;
  while (steps && (e = readdir(d)) != NULL) {
    int64_t s = step_of_name(e->d_name);
    if (s < 0)
      continue;
    if (*count == cap) {
      cap *= 2;
      int64_t *grown = realloc(steps, sizeof *steps * (size_t)cap);
      if (!grown)
        break;
      steps = grown;
    }
    steps[(*count)++] = s;
  }
  closedir(d);
  if (steps)
    qsort(steps, (size_t)*count, sizeof *steps, compare_desc);
  return steps;
}

/* The newest step verify_step accepts (-1: none); the others on skipped. */
static int64_t find_newest(const char *dir, int nranks, const char *fingerprint, FILE *skipped) {
  int n = 0;
  int64_t *steps = list_steps(dir, &n);
  int64_t found = -1;
  for (int i = 0; i < n && found < 0; i++) {
    char why[512];
    if (verify_step(dir, steps[i], nranks, fingerprint, why, sizeof why))
      found = steps[i];
    else if (skipped)
      fprintf(skipped, "hexic-rt: skipping checkpoint %s/step_%08" PRId64 ": %s\n", dir, steps[i],
              why);
  }
  free(steps);
  return found;
}

int64_t hx_rt_ckpt_find_newest(const char *dir, int nranks, const char *fingerprint,
                               FILE *skipped) {
  return find_newest(dir, nranks, fingerprint, skipped);
}

int64_t hx_rt_ckpt_find_newest_any(const char *dir, FILE *skipped) {
  return find_newest(dir, 0, NULL, skipped);
}

/* dir/step_N has a MANIFEST: a checkpoint once complete (one without is an
 * interrupted write). */
static bool manifest_present(const char *dir, int64_t step) {
  char path[PATH_SIZE];
  struct stat sb;
  hx_rt_ckpt_manifest_path(path, sizeof path, dir, step);
  return lstat(path, &sb) == 0;
}

/* Removes a step directory and the files in it (no subdirectories there). */
static void remove_step_dir(const char *dir, int64_t step) {
  char path[PATH_SIZE], file[PATH_SIZE + 300];
  hx_rt_ckpt_step_dir(path, sizeof path, dir, step);
  DIR *d = opendir(path);
  if (!d)
    return;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
      continue;
    snprintf(file, sizeof file, "%s/%s", path, e->d_name);
    unlink(file);
  }
  closedir(d);
  rmdir(path);
}

/* Keeps `step` and the newest complete checkpoint before it (of any plan:
 * a run resumed under another plan keeps the checkpoint it came from);
 * older and incomplete ones before it go, except the damaged ones (a
 * MANIFEST that does not verify) after the checkpoint this run resumed
 * from: resume skipped them, and they are left for their owner to repair.
 * Newer directories are left alone. */
static void prune_older(const char *dir, const struct hx_rt_ckpt_state *st) {
  int64_t step = st->step;
  char why[512];
  int n = 0;
  int64_t *steps = list_steps(dir, &n);
  bool kept_one = false;
  for (int i = 0; i < n; i++) {
    if (steps[i] >= step)
      continue;
    bool complete = hx_rt_ckpt_verify_complete(dir, steps[i], why, sizeof why);
    if (complete && !kept_one)
      kept_one = true;
    else if (complete || !st->resumed || steps[i] <= st->resumed_step ||
             !manifest_present(dir, steps[i]))
      remove_step_dir(dir, steps[i]);
  }
  free(steps);
}

/* ---- loading ---- */

/* A file being read: bytes checksummed on the way in. */
struct source {
  FILE *f;
  uint64_t size, hash;
  bool ok;
};

static void source_get(struct source *s, void *p, size_t n) {
  if (!s->ok)
    return;
  s->ok = fread(p, 1, n, s->f) == n;
  if (s->ok) {
    s->hash = hx_rt_fnv64(s->hash, p, n);
    s->size += n;
  }
}

static uint32_t source_u32(struct source *s) {
  uint32_t v = 0;
  source_get(s, &v, sizeof v);
  return v;
}

static uint64_t source_u64(struct source *s) {
  uint64_t v = 0;
  source_get(s, &v, sizeof v);
  return v;
}

static bool read_rank_header(struct source *s, int rank, int64_t step, const char *fingerprint,
                             struct hx_rt_ckpt_state *st, char *err, size_t err_size) {
  char magic[sizeof RANK_MAGIC], fp[FINGERPRINT_FIELD], want_fp[FINGERPRINT_FIELD] = {0};
  source_get(s, magic, sizeof magic);
  uint32_t version = source_u32(s), file_rank = source_u32(s);
  int64_t file_step = (int64_t)source_u64(s);
  uint64_t data_pos = source_u64(s);
  source_get(s, fp, sizeof fp);
  uint32_t ntensors = source_u32(s);
  (void)source_u32(s);
  snprintf(want_fp, sizeof want_fp, "%s", fingerprint);
  if (!s->ok || memcmp(magic, RANK_MAGIC, sizeof magic) || version != FORMAT_VERSION ||
      file_rank != (uint32_t)rank || file_step != step || memcmp(fp, want_fp, sizeof fp)) {
    set_error(err, err_size, "header is not that of rank %d, step %" PRId64 " of this plan", rank,
              step);
    return false;
  }
  if (ntensors != (uint32_t)st->ntensors) {
    set_error(err, err_size, "holds %" PRIu32 " tensors, this rank has %d", ntensors, st->ntensors);
    return false;
  }
  st->data_pos = data_pos;
  return true;
}

static bool read_rank_tensors(struct source *s, struct hx_rt_ckpt_state *st, char *err,
                              size_t err_size) {
  for (int i = 0; i < st->ntensors && s->ok; i++) {
    struct hx_rt_ckpt_tensor *t = &st->tensors[i];
    uint64_t n = source_u64(s);
    int64_t ident[7], want[7];
    source_get(s, ident, sizeof ident);
    identity_of(st, i, want);
    if (s->ok && n != (uint64_t)t->n) {
      set_error(err, err_size, "tensor %d has %" PRIu64 " elements, this rank's has %" PRId64, i, n,
                t->n);
      return false;
    }
    if (s->ok && memcmp(ident, want, sizeof ident) != 0) {
      set_error(err, err_size, "tensor %d is not the slice of the model this rank holds", i);
      return false;
    }
    size_t bytes = (size_t)t->n * sizeof(float);
    source_get(s, t->param, bytes);
    source_get(s, t->adam_m, bytes);
    source_get(s, t->adam_v, bytes);
    hx_rt_progress();
  }
  if (!s->ok)
    set_error(err, err_size, "truncated");
  return s->ok;
}

bool hx_rt_ckpt_load_rank(const char *dir, int64_t step, int rank, const char *fingerprint,
                          struct hx_rt_ckpt_state *st, char *err, size_t err_size) {
  char path[PATH_SIZE], why[512] = "";
  if (!path_fits(dir, err, err_size))
    return false;
  struct manifest m;
  if (!load_manifest(dir, step, &m, why, sizeof why)) {
    set_error(err, err_size, "checkpoint step %" PRId64 ": %s", step, why);
    return false;
  }
  bool in_manifest = rank >= 0 && rank < m.nranks;
  hx_rt_ckpt_rank_path(path, sizeof path, dir, step, rank);
  struct source s = {fopen(path, "rb"), 0, HX_FNV64_INIT, true};
  bool ok = in_manifest && s.f &&
            read_rank_header(&s, rank, step, fingerprint, st, why, sizeof why) &&
            read_rank_tensors(&s, st, why, sizeof why);
  if (ok && (fgetc(s.f) != EOF || s.size != m.sizes[rank] || s.hash != m.checksums[rank])) {
    snprintf(why, sizeof why, "does not match the manifest's size and checksum");
    ok = false;
  }
  if (s.f)
    fclose(s.f);
  else
    snprintf(why, sizeof why, "cannot open: %s", strerror(errno));
  if (!in_manifest)
    snprintf(why, sizeof why, "rank %d is not in the manifest", rank);
  int64_t schedule_steps = m.schedule_steps;
  manifest_free(&m);
  if (!ok) {
    set_error(err, err_size, "%s: %s", path, why);
    return false;
  }
  st->step = step;
  st->schedule_steps = schedule_steps;
  return true;
}

/* ---- loading under another plan ---- */

void hx_rt_ckpt_tensor_name(uint64_t id, char *buf, size_t size) {
  static const char *const layer_names[] = {"attn_norm", "wq",     "wk",   "wv",    "wo",
                                            "mlp_norm",  "w_gate", "w_up", "w_down"};
  static const char *const global_names[] = {"tok_emb", "final_norm", "lm_head"};
  if (id < 3)
    snprintf(buf, size, "%s", global_names[id]);
  else if (id >= 16 && (id - 16) % 16 < 9)
    snprintf(buf, size, "layers.%" PRIu64 ".%s", (id - 16) / 16, layer_names[(id - 16) % 16]);
  else
    snprintf(buf, size, "tensor id %" PRIu64, id);
}

/* How a recorded model line (a MANIFEST's, or the one hexic-ckpt import
 * wrote into a safetensors file) compares with the program's. */
enum model_match {
  MODEL_SAME,
  /* An older hexic's line, written before the line carried rope_theta and
   * norm_eps: the program's line up to those fields. The shape is checked;
   * RoPE's base and the norm epsilon were not recorded and cannot be. */
  MODEL_SAME_SHAPE_UNRECORDED,
  MODEL_OTHER
};

static const char ROPE_FIELD[] = " rope_theta ";

static enum model_match match_model_line(const char *recorded, const char *program) {
  if (!strcmp(recorded, program))
    return MODEL_SAME;
  const char *tail = strstr(program, ROPE_FIELD);
  size_t shape_len = tail ? (size_t)(tail - program) : 0;
  if (tail && !strstr(recorded, ROPE_FIELD) && strlen(recorded) == shape_len &&
      !strncmp(recorded, program, shape_len))
    return MODEL_SAME_SHAPE_UNRECORDED;
  return MODEL_OTHER;
}

/* The model and data lines must be the checkpoint's: another model's
 * parameters, or another data order, cannot continue this run. */
static bool same_run(const struct manifest *m, const struct hx_rt_ckpt_state *st, char *err,
                     size_t err_size) {
  const char *model = st->model ? st->model : "", *data = st->data ? st->data : "";
  if (match_model_line(m->model, model) == MODEL_OTHER) {
    set_error(err, err_size, "the checkpoint is of another model (%s); this program trains %s",
              m->model, model);
    return false;
  }
  if (strcmp(m->data, data) != 0) {
    set_error(err, err_size,
              "the checkpoint's data order (%s) is not this run's (%s): its batches would not "
              "continue",
              m->data, data);
    return false;
  }
  return true;
}

/* Index record r names a slice of its tensor whose parameters, m and v (12
 * bytes an element) lie inside a file of file_size bytes; a forged record
 * cannot overflow the arithmetic. */
static bool record_in_file(const int64_t *r, uint64_t file_size) {
  if (!(r[1] > 0 && r[2] > 0 && r[3] >= 0 && r[3] < r[4] && r[4] <= r[1] && r[5] >= 0 &&
        r[5] < r[6] && r[6] <= r[2] && r[7] >= 0))
    return false;
  int64_t rows = r[4] - r[3], cols = r[6] - r[5];
  return rows <= (INT64_MAX - r[7]) / 12 / cols && (uint64_t)(r[7] + 12 * rows * cols) <= file_size;
}

/* Every index record inside its rank file and its tensor. */
static bool index_in_range(const struct manifest *m, char *err, size_t err_size) {
  const int64_t *r = m->index;
  for (int k = 0; k < m->nranks; k++)
    for (int i = 0; i < m->ntensors[k]; i++, r += HX_RT_CKPT_INDEX_INTS)
      if (!record_in_file(r, m->sizes[k])) {
        set_error(err, err_size, "MANIFEST: tensor %d of rank_%04d.ckpt lies outside the file", i,
                  k);
        return false;
      }
  return true;
}

/* A rectangle of a source tensor copied into the destination's slice. */
struct copy_job {
  const int64_t *src;     /* index record: id, rows, cols, r0, r1, c0, c1, offset */
  const int64_t *dst;     /* identity: id, rows, cols, r0, r1, c0, c1 */
  int64_t i0, i1, j0, j1; /* the intersection, full-tensor coordinates */
};

/* Whether the intersection still has an element not yet read. */
static bool job_needed(const struct copy_job *j, const unsigned char *have) {
  int64_t width = j->dst[6] - j->dst[5];
  for (int64_t r = j->i0; r < j->i1; r++)
    for (int64_t c = j->j0; c < j->j1; c++)
      if (!have[(r - j->dst[3]) * width + (c - j->dst[5])])
        return true;
  return false;
}

/* Reads the intersection's rows of parameters, m and v; marks them read. */
static bool job_run(const struct copy_job *j, int fd, struct hx_rt_ckpt_tensor *t,
                    unsigned char *have) {
  int64_t dwidth = j->dst[6] - j->dst[5], swidth = j->src[6] - j->src[5];
  int64_t sn = (j->src[4] - j->src[3]) * swidth, len = j->j1 - j->j0;
  float *dest[3] = {t->param, t->adam_m, t->adam_v};
  for (int64_t r = j->i0; r < j->i1; r++) {
    int64_t d = (r - j->dst[3]) * dwidth + (j->j0 - j->dst[5]);
    int64_t s = (r - j->src[3]) * swidth + (j->j0 - j->src[5]);
    for (int k = 0; k < 3; k++)
      if (dest[k] && !pread_full(fd, dest[k] + d, (size_t)len * sizeof(float),
                                 j->src[7] + (int64_t)sizeof(float) * (k * sn + s)))
        return false;
    memset(have + d, 1, (size_t)len);
  }
  hx_rt_progress();
  return true;
}

/* A checkpoint's index as the readers take it (a MANIFEST's, or an info's),
 * with the rank files they opened (-1: not yet). */
struct index_view {
  const char *dir;
  int64_t step;
  int nranks;
  const int *ntensors;
  const int64_t *index;
  int *fds;
};

static int open_rank_file(const struct index_view *v, int r) {
  if (v->fds[r] < 0) {
    char path[PATH_SIZE];
    hx_rt_ckpt_rank_path(path, sizeof path, v->dir, v->step, r);
    v->fds[r] = open(path, O_RDONLY);
  }
  return v->fds[r];
}

/* Just before reading through index record rec: the file holds that
 * tensor, that slice, right before where the record puts its data (a
 * checkpoint verified before holds; this covers the files read by ranks
 * that did not verify them, and any change since). */
static bool file_holds_record(int fd, const int64_t *rec) {
  int64_t head[TENSOR_HEADER_INTS]; /* elements, then the identity */
  int64_t at = rec[7] - (int64_t)sizeof head;
  return at >= 0 && pread_full(fd, head, sizeof head, at) &&
         !memcmp(head + 1, rec, 7 * sizeof *rec) &&
         head[0] == (rec[4] - rec[3]) * (rec[6] - rec[5]);
}

/* Fills this rank's tensor `want` (identity) from every record holding part
 * of it; an element no record holds is an error naming the tensor. The
 * records must be in range (index_in_range). */
static bool fill_tensor(const struct index_view *v, const int64_t want[7],
                        struct hx_rt_ckpt_tensor *t, char *err, size_t err_size) {
  char name[64];
  hx_rt_ckpt_tensor_name((uint64_t)want[0], name, sizeof name);
  unsigned char *have = calloc((size_t)t->n + 1, 1);
  if (!have) {
    set_error(err, err_size, "out of memory reading %s", name);
    return false;
  }
  const int64_t *rec = v->index;
  bool ok = true;
  for (int k = 0; ok && k < v->nranks; k++)
    for (int i = 0; ok && i < v->ntensors[k]; i++, rec += HX_RT_CKPT_INDEX_INTS) {
      if (rec[0] != want[0])
        continue;
      if (rec[1] != want[1] || rec[2] != want[2]) {
        set_error(err, err_size,
                  "%s is [%" PRId64 ", %" PRId64 "] in the checkpoint, [%" PRId64 ", %" PRId64
                  "] in this model",
                  name, rec[1], rec[2], want[1], want[2]);
        ok = false;
        break;
      }
      struct copy_job j = {rec,
                           want,
                           rec[3] > want[3] ? rec[3] : want[3],
                           rec[4] < want[4] ? rec[4] : want[4],
                           rec[5] > want[5] ? rec[5] : want[5],
                           rec[6] < want[6] ? rec[6] : want[6]};
      if (j.i0 >= j.i1 || j.j0 >= j.j1 || !job_needed(&j, have))
        continue;
      int fd = open_rank_file(v, k);
      if (fd < 0) {
        set_error(err, err_size, "rank_%04d.ckpt: cannot read %s: %s", k, name, strerror(errno));
        ok = false;
      } else if (!file_holds_record(fd, rec)) {
        set_error(err, err_size,
                  "rank_%04d.ckpt does not hold %s at byte %" PRId64
                  ", where the MANIFEST's index puts it (the index was edited or damaged)",
                  k, name, rec[7]);
        ok = false;
      } else if (!job_run(&j, fd, t, have)) {
        set_error(err, err_size, "rank_%04d.ckpt: cannot read %s: short file", k, name);
        ok = false;
      }
    }
  for (int64_t e = 0; ok && e < t->n; e++)
    if (!have[e]) {
      int64_t width = want[6] - want[5];
      set_error(err, err_size,
                "no rank file of the checkpoint holds row %" PRId64 ", column %" PRId64 " of %s",
                want[3] + e / width, want[5] + e % width, name);
      ok = false;
    }
  free(have);
  return ok;
}

static int *closed_fds(int n) {
  int *fds = malloc(sizeof *fds * (size_t)(n > 0 ? n : 1));
  for (int r = 0; fds && r < n; r++)
    fds[r] = -1;
  return fds;
}

static void close_fds(int *fds, int n) {
  for (int r = 0; fds && r < n; r++)
    if (fds[r] >= 0)
      close(fds[r]);
  free(fds);
}

bool hx_rt_ckpt_load_resharded(const char *dir, int64_t step, struct hx_rt_ckpt_state *st,
                               char *err, size_t err_size) {
  if (!path_fits(dir, err, err_size))
    return false;
  struct manifest m;
  char why[512] = "";
  if (!load_manifest(dir, step, &m, why, sizeof why)) {
    set_error(err, err_size, "checkpoint step %" PRId64 ": %s", step, why);
    return false;
  }
  struct index_view v = {dir, step, m.nranks, m.ntensors, m.index, closed_fds(m.nranks)};
  bool ok = v.fds && same_run(&m, st, err, err_size) && index_in_range(&m, err, err_size);
  for (int i = 0; ok && i < st->ntensors; i++) {
    int64_t want[7];
    identity_of(st, i, want);
    ok = fill_tensor(&v, want, &st->tensors[i], err, err_size);
  }
  close_fds(v.fds, m.nranks);
  if (ok) {
    st->step = step;
    st->data_pos = 0;
    st->schedule_steps = m.schedule_steps;
    st->source_ranks = m.nranks;
    st->resharded = true;
    snprintf(st->source_fingerprint, sizeof st->source_fingerprint, "%s", m.fingerprint);
  }
  manifest_free(&m);
  return ok;
}

/* The newest step directory of dir holding a MANIFEST (a checkpoint, intact
 * or not), or -1. */
static int64_t newest_checkpoint(const char *dir) {
  int n = 0;
  int64_t *steps = list_steps(dir, &n), found = -1;
  for (int i = 0; i < n && found < 0; i++)
    if (manifest_present(dir, steps[i]))
      found = steps[i];
  free(steps);
  return found;
}

/* Why checkpoint `step` of dir is not taken (it does not verify: why):
 * asked for by number, or the newest, which is never passed over for an
 * older one without a word (an export of the older weights would look like
 * the newest's). */
static void not_taken(const char *dir, int64_t step, bool asked, const char *why, char *err,
                      size_t err_size) {
  if (asked) {
    set_error(err, err_size, "%s/step_%08" PRId64 " does not verify: %s", dir, step, why);
    return;
  }
  int64_t older = find_newest(dir, 0, NULL, NULL);
  if (older >= 0)
    set_error(err, err_size,
              "%s: the newest checkpoint, step_%08" PRId64 ", does not verify (%s); not taking an "
              "older one in its place unasked: the newest that verifies is step_%08" PRId64
              " (--step %" PRId64 ")",
              dir, step, why, older, older);
  else
    set_error(err, err_size,
              "%s: the newest checkpoint, step_%08" PRId64 ", does not verify (%s), nor does any "
              "older one",
              dir, step, why);
}

bool hx_rt_ckpt_info_load(const char *dir, int64_t step, struct hx_rt_ckpt_info *info, char *err,
                          size_t err_size) {
  memset(info, 0, sizeof *info);
  if (!path_fits(dir, err, err_size))
    return false;
  bool asked = step >= 0;
  if (!asked && (step = newest_checkpoint(dir)) < 0) {
    set_error(err, err_size, "%s: no checkpoint there (no step_N folder with a MANIFEST)", dir);
    return false;
  }
  /* every rank file's size and checksum, and every tensor where the index
   * says: what info shows and export reads is the checkpoint written */
  struct manifest m;
  char why[512];
  if (!verify_step(dir, step, 0, NULL, why, sizeof why)) {
    not_taken(dir, step, asked, why, err, err_size);
    return false;
  }
  if (!load_manifest(dir, step, &m, why, sizeof why)) { /* changed since: a copy under way */
    set_error(err, err_size, "%s/step_%08" PRId64 ": %s", dir, step, why);
    return false;
  }
  *info = (struct hx_rt_ckpt_info){.step = m.step,
                                   .schedule_steps = m.schedule_steps,
                                   .nranks = m.nranks,
                                   .ntensors = m.ntensors,
                                   .index = m.index,
                                   .fds = closed_fds(m.nranks)};
  snprintf(info->fingerprint, sizeof info->fingerprint, "%s", m.fingerprint);
  snprintf(info->model, sizeof info->model, "%s", m.model);
  snprintf(info->data, sizeof info->data, "%s", m.data);
  m.ntensors = NULL, m.index = NULL;
  manifest_free(&m);
  if (!info->fds) {
    hx_rt_ckpt_info_free(info);
    set_error(err, err_size, "out of memory");
    return false;
  }
  return true;
}

bool hx_rt_ckpt_info_read(const char *dir, struct hx_rt_ckpt_info *info,
                          struct hx_rt_ckpt_tensor *t, char *err, size_t err_size) {
  struct index_view v = {dir, info->step, info->nranks, info->ntensors, info->index, info->fds};
  int64_t want[7] = {(int64_t)t->id, t->rows, t->cols, t->r0, t->r1, t->c0, t->c1};
  return fill_tensor(&v, want, t, err, err_size);
}

void hx_rt_ckpt_info_free(struct hx_rt_ckpt_info *info) {
  close_fds(info->fds, info->nranks);
  free(info->ntensors);
  free(info->index);
  info->ntensors = NULL, info->index = NULL, info->fds = NULL;
}

/* ---- initial weights from a safetensors file ---- */

/* A note said once per job: by rank 0 of MPI_COMM_WORLD (every rank reads
 * the same file and comes to the same note), or by the process when MPI is
 * not running (the tools, the unit tests). */
__attribute__((format(printf, 1, 2))) static void note_once(const char *fmt, ...) {
  int running = 0, finished = 0, rank = 0;
  MPI_Initialized(&running);
  MPI_Finalized(&finished);
  if (running && !finished)
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank != 0)
    return;
  va_list ap;
  va_start(ap, fmt);
  fputs("hexic-rt: note: ", stderr);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
}

int64_t hx_rt_first_nonfinite(const float *v, int64_t n) {
  for (int64_t i = 0; i < n; i++)
    if (!isfinite(v[i]))
      return i;
  return -1;
}

/* The first non-finite element of a slice [r0, r1) x [c0, c1) just read,
 * named in full-tensor coordinates (false, with the message, when there is
 * one): NaN or Inf weights would train to a NaN loss. */
static bool slice_finite(const float *v, const int64_t ident[7], const char *path, const char *name,
                         char *err, size_t err_size) {
  int64_t width = ident[6] - ident[5];
  int64_t bad = hx_rt_first_nonfinite(v, (ident[4] - ident[3]) * width);
  if (bad < 0)
    return true;
  int64_t row = ident[3] + bad / width, col = ident[5] + bad % width;
  set_error(err, err_size,
            "%s: tensor '%s' holds %s at element %" PRId64 " (row %" PRId64 ", column %" PRId64
            "): non-finite weights are refused",
            path, name, isnan(v[bad]) ? "NaN" : "an infinity", row * ident[2] + col, row, col);
  return false;
}

/* The file's tensor has the shape of ident (a [1, n] vector may be [n]). */
static bool shape_is(const struct hx_st_tensor *t, const int64_t ident[7]) {
  if (t->ndim == 2)
    return t->shape[0] == ident[1] && t->shape[1] == ident[2];
  return t->ndim == 1 && ident[1] == 1 && t->shape[0] == ident[2];
}

/* ---- --init-from a Hugging Face model folder ---- */

/* FOLDER/config.json against the program's model line: the first field
 * that differs named as config.json names it (another model's weights of
 * the same shapes, another rope_theta, Llama 3's scaling or not). */
static bool hf_config_matches(const char *config, const struct hx_rt_ckpt_state *st,
                              struct hx_hf_model *program, char *err, size_t err_size) {
  struct hx_hf_model have;
  if (!hx_hf_config_read(config, &have, err, err_size))
    return false;
  if (!st->model || !hx_hf_parse_model_line(st->model, program)) {
    set_error(err, err_size, "%s: this program's model line '%s' is not one hexic writes",
              config, st->model ? st->model : "(none)");
    return false;
  }
  char why[256];
  if (!hx_hf_model_differs(&have, program, why, sizeof why))
    return true;
  set_error(err, err_size, "%s describes another model: %s", config, why);
  return false;
}

/* Tensors of the folder's weights, the buffer older exports carry aside. */
static int hf_tensor_count(const struct hx_st_set *set) {
  int n = 0;
  for (int f = 0; f < set->n; f++)
    for (int i = 0; i < set->files[f].ntensors; i++) {
      const char *name = set->files[f].tensors[i].name;
      size_t len = strlen(name), tail = strlen(".rotary_emb.inv_freq");
      n += !(len >= tail && !strcmp(name + len - tail, ".rotary_emb.inv_freq"));
    }
  return n;
}

/* This rank's slice of one tensor from Hugging Face's layout: q_proj and
 * k_proj rows are in rotate_half's order within each head, so those are read
 * row by row at their Hugging Face places (hf_llama.h). */
static bool hf_read_slice(const struct hx_st_file *f, const struct hx_st_tensor *t,
                          const int64_t id[7], int rope_heads, int64_t head_dim, float *dst,
                          char *err, size_t err_size) {
  if (!rope_heads)
    return hx_st_read_f32(f, t, id[3], id[4], id[5], id[6], dst, err, err_size);
  int64_t half = head_dim / 2, width = id[6] - id[5];
  for (int64_t r = id[3]; r < id[4]; r++) {
    int64_t within = r % head_dim; /* hexic's row in its head: pair within / 2 */
    int64_t hf = r - within + (within % 2 ? half + within / 2 : within / 2);
    if (!hx_st_read_f32(f, t, hf, hf + 1, id[5], id[6], dst + (r - id[3]) * width, err,
                        err_size))
      return false;
  }
  return true;
}

static bool init_from_hf_folder(const char *dir, int model_tensors, struct hx_rt_ckpt_state *st,
                                char *err, size_t err_size) {
  char config[PATH_MAX + 32], weights[PATH_MAX + 32];
  struct hx_hf_model program;
  snprintf(config, sizeof config, "%s/config.json", dir);
  if (!hf_config_matches(config, st, &program, err, err_size))
    return false;
  struct stat sb;
  snprintf(weights, sizeof weights, "%s/model.safetensors.index.json", dir);
  if (stat(weights, &sb) != 0)
    snprintf(weights, sizeof weights, "%s/model.safetensors", dir);
  struct hx_st_set *set = calloc(1, sizeof *set);
  if (!set) {
    set_error(err, err_size, "out of memory");
    return false;
  }
  bool ok = hx_st_set_open(set, weights, err, err_size);
  int held = ok ? hf_tensor_count(set) : 0;
  if (ok && held != model_tensors) {
    set_error(err, err_size, "%s holds %d tensors where this model (%s) has %d", weights, held,
              config, model_tensors);
    ok = false;
  }
  for (int i = 0; ok && i < st->ntensors; i++) {
    int64_t id[7];
    identity_of(st, i, id);
    char name[96];
    hx_hf_name((uint64_t)id[0], name, sizeof name);
    const struct hx_st_file *f = NULL;
    const struct hx_st_tensor *t = hx_st_set_find(set, name, &f);
    if (!t)
      set_error(err, err_size, "%s: no tensor '%s'", weights, name);
    else if (!shape_is(t, id))
      set_error(err, err_size, "%s: tensor '%s' is not [%" PRId64 ", %" PRId64 "], its shape in "
                "this model", f->path, name, id[1], id[2]);
    ok = t && shape_is(t, id) &&
         hf_read_slice(f, t, id, hx_hf_rope_heads(&program, (uint64_t)id[0]),
                       program.hidden / program.heads, st->tensors[i].param, err, err_size) &&
         slice_finite(st->tensors[i].param, id, f->path, name, err, err_size);
    hx_rt_progress();
  }
  hx_st_set_close(set);
  free(set);
  return ok;
}

bool hx_rt_ckpt_init_from(const char *path, int model_tensors, struct hx_rt_ckpt_state *st,
                          char *err, size_t err_size) {
  struct stat sb;
  if (stat(path, &sb) == 0 && S_ISDIR(sb.st_mode))
    return init_from_hf_folder(path, model_tensors, st, err, err_size);
  struct hx_st_file f;
  if (!hx_st_open(&f, path, err, err_size))
    return false;
  bool ok = true;
  /* the model line import recorded, whole, as resume compares it: shapes
   * alone do not tell heads 4 / kv_heads 2 from heads 2 / kv_heads 1 */
  enum model_match match =
      f.hexic_model && st->model ? match_model_line(f.hexic_model, st->model) : MODEL_SAME;
  if (match == MODEL_OTHER) {
    set_error(err, err_size, "%s holds the weights of another model (%s); this program trains %s",
              path, f.hexic_model, st->model);
    ok = false;
  } else if (match == MODEL_SAME_SHAPE_UNRECORDED) {
    note_once("--init-from: %s records the model as '%s' (an older hexic-ckpt import's line): "
              "the shape is this model's; that its weights are for%s cannot be checked",
              path, f.hexic_model, strstr(st->model, ROPE_FIELD));
  }
  for (int i = 0; ok && i < st->ntensors; i++) {
    int64_t id[7];
    identity_of(st, i, id);
    char name[64];
    hx_rt_ckpt_tensor_name((uint64_t)id[0], name, sizeof name);
    const struct hx_st_tensor *t = hx_st_find(&f, name);
    if (!t) {
      set_error(err, err_size,
                "%s: no tensor '%s' (a file of hexic's initial weights, from hexic-ckpt import, "
                "names every tensor of the model)",
                path, name);
      ok = false;
    } else if (!shape_is(t, id)) {
      set_error(err, err_size,
                "%s: tensor '%s' is not [%" PRId64 ", %" PRId64 "], its shape in this model", path,
                name, id[1], id[2]);
      ok = false;
    } else {
      ok = hx_st_read_f32(&f, t, id[3], id[4], id[5], id[6], st->tensors[i].param, err, err_size) &&
           slice_finite(st->tensors[i].param, id, path, name, err, err_size);
    }
    hx_rt_progress();
  }
  /* after the names, which say more about a file of the wrong kind */
  if (ok && f.ntensors != model_tensors) {
    set_error(err, err_size,
              "%s holds %d tensors where this model has %d: the weights of another model "
              "(another layer count, or tied embeddings where this model has an lm_head)",
              path, f.ntensors, model_tensors);
    ok = false;
  }
  hx_st_close(&f);
  return ok;
}

/* ---- collective ---- */

/* Completes a collective of the checkpoint protocol as every wait of the
 * runtime does (hx_rt_wait_all: a stalled peer is traced and named). */
static void wait_collective(int rc, MPI_Request *req, const char *what) {
  hx_rt_mpi_check(rc, what);
  hx_rt_wait_all(1, req, &(struct hx_rt_wait){what, -1, -1, 0, NULL});
}

static bool all_agree(MPI_Comm comm, bool mine) {
  int in = mine, out = 0;
  MPI_Request req;
  wait_collective(MPI_Iallreduce(&in, &out, 1, MPI_INT, MPI_MIN, comm, &req), &req,
                  "MPI_Allreduce (checkpoint)");
  return out != 0;
}

/* What rank 0 gathers for the manifest (NULLs elsewhere). */
struct gathered {
  uint64_t *sizes, *sums;
  int *ntensors;
  int64_t *index;
};

static void gathered_free(struct gathered *g) {
  free(g->sizes);
  free(g->sums);
  free(g->ntensors);
  free(g->index);
}

static struct gathered gather_files(MPI_Comm comm, uint64_t size, uint64_t sum, int ntensors,
                                    const int64_t *index) {
  int rank = 0, nranks = 1;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &nranks);
  struct gathered g = {NULL, NULL, NULL, NULL};
  size_t n = rank == 0 ? (size_t)nranks : 1;
  g.sizes = hx_rt_calloc(n, sizeof *g.sizes);
  g.sums = hx_rt_calloc(n, sizeof *g.sums);
  g.ntensors = hx_rt_calloc(n, sizeof *g.ntensors);
  MPI_Request req;
  wait_collective(MPI_Igather(&size, 1, MPI_UINT64_T, g.sizes, 1, MPI_UINT64_T, 0, comm, &req),
                  &req, "MPI_Gather (checkpoint sizes)");
  wait_collective(MPI_Igather(&sum, 1, MPI_UINT64_T, g.sums, 1, MPI_UINT64_T, 0, comm, &req), &req,
                  "MPI_Gather (checkpoint checksums)");
  wait_collective(MPI_Igather(&ntensors, 1, MPI_INT, g.ntensors, 1, MPI_INT, 0, comm, &req), &req,
                  "MPI_Gather (checkpoint tensor counts)");
  int *counts = hx_rt_calloc(n, sizeof *counts), *displs = hx_rt_calloc(n, sizeof *displs);
  long total = 0;
  for (int r = 0; rank == 0 && r < nranks; r++) {
    counts[r] = g.ntensors[r] * HX_RT_CKPT_INDEX_INTS;
    displs[r] = (int)total;
    total += counts[r];
    if (total > INT_MAX)
      hx_rt_fatal(HX_RT_EXIT_ERROR, "checkpoint: the tensor index is too large to gather");
  }
  g.index = hx_rt_calloc((size_t)total + 1, sizeof *g.index);
  wait_collective(MPI_Igatherv(index, ntensors * HX_RT_CKPT_INDEX_INTS, MPI_INT64_T, g.index,
                               counts, displs, MPI_INT64_T, 0, comm, &req),
                  &req, "MPI_Gatherv (checkpoint tensor index)");
  free(counts);
  free(displs);
  return g;
}

bool hx_rt_ckpt_save(MPI_Comm comm, const char *dir, const char *fingerprint,
                     const struct hx_rt_ckpt_state *st) {
  int rank = 0, nranks = 1;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &nranks);
  char err[1024] = "";
  bool ok = rank != 0 || hx_rt_ckpt_prepare(dir, st->step, err, sizeof err);
  if (!ok)
    fprintf(stderr, "hexic-rt: rank %d: error: checkpoint: %s\n", rank, err);
  if (!all_agree(comm, ok))
    return false;
  uint64_t size = 0, sum = 0;
  int64_t *index = hx_rt_calloc((size_t)st->ntensors * HX_RT_CKPT_INDEX_INTS + 1, sizeof *index);
  ok = hx_rt_ckpt_write_rank(dir, rank, fingerprint, st, &size, &sum, index, err, sizeof err);
  hx_rt_progress();
  if (!ok)
    fprintf(stderr, "hexic-rt: rank %d: error: checkpoint: %s\n", rank, err);
  struct gathered g = gather_files(comm, size, sum, st->ntensors, index);
  free(index);
  /* The manifest is written only once every rank file is durable. */
  bool written = all_agree(comm, ok);
  if (written && rank == 0) {
    struct hx_rt_ckpt_files files = {nranks, g.sizes, g.sums, g.ntensors, g.index};
    written = hx_rt_ckpt_write_manifest(dir, st, fingerprint, &files, err, sizeof err);
    if (!written)
      fprintf(stderr, "hexic-rt: rank 0: error: checkpoint manifest: %s\n", err);
  }
  gathered_free(&g);
  MPI_Request req;
  int flag = written;
  wait_collective(MPI_Ibcast(&flag, 1, MPI_INT, 0, comm, &req), &req, "MPI_Bcast (checkpoint)");
  hx_rt_progress();
  return flag != 0;
}

bool hx_rt_ckpt_check_dir(MPI_Comm comm, const char *dir) {
  int rank = 0;
  MPI_Comm_rank(comm, &rank);
  char err[1024] = "";
  /* rank 0 creates the directory first: the others must not race it */
  bool ok = rank != 0 || hx_rt_ckpt_probe_dir(dir, 0, true, err, sizeof err);
  if (all_agree(comm, ok)) {
    ok = rank == 0 || hx_rt_ckpt_probe_dir(dir, rank, false, err, sizeof err);
    if (all_agree(comm, ok))
      return true;
  }
  if (!ok)
    fprintf(stderr, "hexic-rt: rank %d: error: checkpoint directory: %s\n", rank, err);
  return false;
}

/* Newest first, the first checkpoint in dir whose MANIFEST records another
 * run than st's (another model or data order: what resume compares). */
bool hx_rt_ckpt_check_owner(const char *dir, const struct hx_rt_ckpt_state *st, char *err,
                            size_t err_size) {
  int n = 0;
  int64_t *steps = list_steps(dir, &n);
  bool ok = true;
  for (int i = 0; ok && i < n; i++) {
    struct manifest m;
    char why[512];
    if (!load_manifest(dir, steps[i], &m, why, sizeof why))
      continue; /* not a checkpoint whose run can be told */
    if (!same_run(&m, st, why, sizeof why)) {
      set_error(err, err_size,
                "--checkpoint-dir '%s' holds the checkpoints of another run (step_%08" PRId64
                ": %s); writing this run's there would replace them. Give this run a fresh "
                "--checkpoint-dir, or add --checkpoint-overwrite to write over them",
                dir, steps[i], why);
      ok = false;
    }
    manifest_free(&m);
  }
  free(steps);
  return ok;
}

bool hx_rt_ckpt_check_damaged(const char *dir, int64_t from, int64_t to, int64_t every, char *err,
                              size_t err_size) {
  int n = 0;
  int64_t *steps = list_steps(dir, &n);
  bool ok = true;
  for (int i = 0; ok && every > 0 && i < n; i++) {
    char why[512];
    int64_t s = steps[i];
    if (s <= from || s > to || s % every != 0 || !manifest_present(dir, s) ||
        hx_rt_ckpt_verify_complete(dir, s, why, sizeof why))
      continue;
    set_error(err, err_size,
              "--checkpoint-dir '%s': checkpoint step_%08" PRId64 " does not verify (%s), and "
              "this run would write its step %" PRId64 " checkpoint over it. Repair it or move "
              "it away, or add --checkpoint-overwrite to write over it",
              dir, s, why, s);
    ok = false;
  }
  free(steps);
  return ok;
}

/* The step directories with a MANIFEST (checkpoints, complete or not). */
static int count_checkpoints(const char *dir) {
  int n = 0, found = 0;
  int64_t *steps = list_steps(dir, &n);
  for (int i = 0; i < n; i++)
    found += manifest_present(dir, steps[i]);
  free(steps);
  return found;
}

enum { RESUME_SAME_PLAN, RESUME_RESHARDED, RESUME_REFUSED };

/* Rank 0: whether checkpoint `step` is this plan's (each rank reads its own
 * file), another plan's of the same run (each reads its ranges), or refused. */
static int resume_mode(const char *dir, int64_t step, int nranks, const char *fingerprint,
                       const struct hx_rt_ckpt_state *st, char *err, size_t err_size) {
  struct manifest m;
  if (!load_manifest(dir, step, &m, err, err_size))
    return RESUME_REFUSED;
  if (st->model && match_model_line(m.model, st->model) == MODEL_SAME_SHAPE_UNRECORDED)
    fprintf(stderr,
            "hexic-rt: rank 0: note: %s/step_%08" PRId64 " records the model as '%s' (an older "
            "hexic's MANIFEST): the shape is this model's and it is resumed; that it was "
            "trained with%s cannot be checked\n",
            dir, step, m.model, strstr(st->model, ROPE_FIELD));
  int mode = !same_run(&m, st, err, err_size)                            ? RESUME_REFUSED
             : !index_in_range(&m, err, err_size)                        ? RESUME_REFUSED
             : m.nranks == nranks && !strcmp(m.fingerprint, fingerprint) ? RESUME_SAME_PLAN
                                                                         : RESUME_RESHARDED;
  manifest_free(&m);
  return mode;
}

int64_t hx_rt_ckpt_resume(MPI_Comm comm, const char *dir, const char *fingerprint,
                          struct hx_rt_ckpt_state *st) {
  int rank = 0, nranks = 1;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &nranks);
  /* rank 0: the newest complete checkpoint, and how to read it */
  int64_t plan[2] = {-1, RESUME_SAME_PLAN}; /* step, mode */
  char err[1024] = "";
  if (rank == 0) {
    plan[0] = hx_rt_ckpt_find_newest_any(dir, stderr);
    int found = plan[0] < 0 ? count_checkpoints(dir) : 0;
    plan[1] = plan[0] >= 0 ? resume_mode(dir, plan[0], nranks, fingerprint, st, err, sizeof err)
              : found > 0  ? RESUME_REFUSED
                           : RESUME_SAME_PLAN;
    if (plan[1] == RESUME_REFUSED && plan[0] >= 0)
      fprintf(stderr, "hexic-rt: rank 0: error: resume from %s/step_%08" PRId64 ": %s\n", dir,
              plan[0], err);
    else if (plan[1] == RESUME_REFUSED)
      fprintf(stderr,
              "hexic-rt: rank 0: error: --resume: none of the %d checkpoint%s in '%s' verifies "
              "(each named above); nothing was trained or written. Repair %s, or move %s away "
              "to start from scratch\n",
              found, found == 1 ? "" : "s", dir, found == 1 ? "it" : "them",
              found == 1 ? "it" : "them");
  }
  MPI_Request req;
  wait_collective(MPI_Ibcast(plan, 2, MPI_INT64_T, 0, comm, &req), &req, "MPI_Bcast (resume)");
  hx_rt_progress();
  int64_t step = plan[0];
  if (plan[1] == RESUME_REFUSED)
    return -1;
  if (step < 0)
    return 0;
  bool ok = plan[1] == RESUME_SAME_PLAN
                ? hx_rt_ckpt_load_rank(dir, step, rank, fingerprint, st, err, sizeof err)
                : hx_rt_ckpt_load_resharded(dir, step, st, err, sizeof err);
  if (ok && plan[1] == RESUME_SAME_PLAN) {
    st->source_ranks = nranks;
    st->resharded = false;
    snprintf(st->source_fingerprint, sizeof st->source_fingerprint, "%s", fingerprint);
  }
  if (!ok)
    fprintf(stderr, "hexic-rt: rank %d: error: resume: %s\n", rank, err);
  return all_agree(comm, ok) ? step : -1;
}
