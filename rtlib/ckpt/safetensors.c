/* safetensors reader and writer (see safetensors.h). */
#include "safetensors.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ckpt_json.h"
#include "user_file.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "safetensors are little-endian; this host is not"
#endif

/* safetensors' own bound on the header (100 MB): its reader refuses more too. */
static const uint64_t MAX_HEADER = HX_ST_MAX_HEADER;

/* A tensor's name as messages show it (hx_rt_printable: no terminal escapes). */
struct shown {
  char text[512];
};
static struct shown show(const char *name) {
  struct shown s;
  hx_rt_printable(name, s.text, sizeof s.text);
  return s;
}

__attribute__((format(printf, 3, 4))) static bool fail(char *err, size_t err_size, const char *fmt,
                                                       ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err, err_size, fmt, ap);
  va_end(ap);
  return false;
}

static int dtype_bytes(const char *dtype) {
  static const struct {
    const char *name;
    int bytes;
  } table[] = {{"F64", 8}, {"F32", 4}, {"F16", 2},  {"BF16", 2},    {"I64", 8},
               {"I32", 4}, {"I16", 2}, {"I8", 1},   {"U64", 8},     {"U32", 4},
               {"U16", 2}, {"U8", 1},  {"BOOL", 1}, {"F8_E4M3", 1}, {"F8_E5M2", 1}};
  for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
    if (!strcmp(dtype, table[i].name))
      return table[i].bytes;
  return 0;
}

int64_t hx_st_numel(const struct hx_st_tensor *t) {
  int64_t n = 1;
  for (int d = 0; d < t->ndim; d++)
    n *= t->shape[d];
  return n;
}

static bool pread_all(int fd, void *buf, size_t n, uint64_t at) {
  char *p = buf;
  while (n > 0) {
    ssize_t got = pread(fd, p, n, (off_t)at);
    if (got <= 0)
      return false;
    p += got, n -= (size_t)got, at += (uint64_t)got;
  }
  return true;
}

/* One member of the header: a tensor's dtype, shape and offsets; path is
 * the file's name as messages show it. */
static bool parse_tensor(const struct hx_json *m, struct hx_st_tensor *t, uint64_t data_bytes,
                         const char *path, char *err, size_t err_size) {
  struct shown name = show(m->key);
  const struct hx_json *dtype = hx_json_get(m, "dtype"), *shape = hx_json_get(m, "shape"),
                       *offs = hx_json_get(m, "data_offsets");
  if (m->kind != HX_JSON_OBJECT || !dtype || dtype->kind != HX_JSON_STRING || !shape ||
      shape->kind != HX_JSON_ARRAY || !offs || offs->kind != HX_JSON_ARRAY || offs->count != 2)
    return fail(err, err_size, "%s: tensor '%s': needs \"dtype\", \"shape\" and \"data_offsets\"",
                path, name.text);
  snprintf(t->dtype, sizeof t->dtype, "%s", dtype->text);
  t->elem_bytes = dtype_bytes(dtype->text);
  if (!t->elem_bytes || strlen(dtype->text) >= sizeof t->dtype)
    return fail(err, err_size, "%s: tensor '%s': unknown dtype '%.20s'", path, name.text,
                show(dtype->text).text);
  if (shape->count > HX_ST_MAX_DIMS)
    return fail(err, err_size, "%s: tensor '%s': %d dimensions (at most %d)", path, name.text,
                shape->count, HX_ST_MAX_DIMS);
  t->ndim = 0;
  uint64_t bytes = (uint64_t)t->elem_bytes;
  for (const struct hx_json *d = shape->child; d; d = d->next) {
    int64_t v;
    if (!hx_json_int(d, 0, INT64_C(1) << 40, &v))
      return fail(err, err_size, "%s: tensor '%s': a dimension is not an integer in [0, 2^40]",
                  path, name.text);
    t->shape[t->ndim++] = v;
    bytes = v && bytes > UINT64_MAX / (uint64_t)v ? UINT64_MAX : bytes * (uint64_t)v;
  }
  int64_t b, e;
  if (!hx_json_int(offs->child, 0, INT64_MAX, &b) ||
      !hx_json_int(offs->child->next, 0, INT64_MAX, &e) || b > e)
    return fail(err, err_size,
                "%s: tensor '%s': data_offsets are not [begin, end] with begin <= end", path,
                name.text);
  t->begin = (uint64_t)b, t->end = (uint64_t)e;
  if (t->end - t->begin != bytes)
    return fail(err, err_size,
                "%s: tensor '%s': data_offsets [%" PRIu64 ", %" PRIu64 ") hold %" PRIu64
                " bytes; a %s tensor of this shape needs %" PRIu64,
                path, name.text, t->begin, t->end, t->end - t->begin, t->dtype, bytes);
  if (t->end > data_bytes)
    return fail(err, err_size,
                "%s: tensor '%s': its data ends at byte %" PRIu64
                " of the data, which holds %" PRIu64
                " bytes (the file is truncated or the offsets are wrong)",
                path, name.text, t->end, data_bytes);
  return true;
}

static int by_begin(const void *a, const void *b) {
  const struct hx_st_tensor *x = a, *y = b;
  return (x->begin > y->begin) - (x->begin < y->begin);
}

/* No two tensors share a byte (empty tensors share nothing). */
static bool no_overlap(const struct hx_st_file *f, char *err, size_t err_size) {
  struct hx_st_tensor *sorted = malloc(sizeof *sorted * (size_t)(f->ntensors + 1));
  if (!sorted)
    return fail(err, err_size, "%s: out of memory", show(f->path).text);
  memcpy(sorted, f->tensors, sizeof *sorted * (size_t)f->ntensors);
  qsort(sorted, (size_t)f->ntensors, sizeof *sorted, by_begin);
  const struct hx_st_tensor *prev = NULL;
  bool ok = true;
  for (int i = 0; ok && i < f->ntensors; i++) {
    const struct hx_st_tensor *t = &sorted[i];
    if (t->begin == t->end)
      continue;
    if (prev && t->begin < prev->end)
      ok = fail(err, err_size,
                "%s: tensors '%s' and '%s' overlap (bytes [%" PRIu64 ", %" PRIu64 ") and [%" PRIu64
                ", %" PRIu64 ") of the data)",
                show(f->path).text, show(prev->name).text, show(t->name).text, prev->begin,
                prev->end, t->begin, t->end);
    prev = t;
  }
  free(sorted);
  return ok;
}

static int by_name(const void *a, const void *b) {
  const struct hx_st_tensor *const *x = a, *const *y = b;
  return strcmp((*x)->name, (*y)->name);
}

/* f->by_name: the tensors in the order of their names, for
 * hx_st_find's binary search (a linear one made import and --init-from
 * quadratic in the tensor count). */
static bool index_names(struct hx_st_file *f, char *err, size_t err_size) {
  f->by_name = malloc(sizeof *f->by_name * (size_t)(f->ntensors + 1));
  if (!f->by_name)
    return fail(err, err_size, "%s: out of memory", show(f->path).text);
  for (int i = 0; i < f->ntensors; i++)
    f->by_name[i] = &f->tensors[i];
  qsort(f->by_name, (size_t)f->ntensors, sizeof *f->by_name, by_name);
  return true;
}

/* A string member of __metadata__ as messages may show it (printable) in
 * *out; absent or not a string leaves it NULL. */
static bool keep_string(const struct hx_json *m, const char *key, char **out, const char *path,
                        char *err, size_t err_size) {
  const struct hx_json *line = hx_json_get(m, key);
  if (!line || line->kind != HX_JSON_STRING)
    return true;
  *out = malloc(4 * strlen(line->text) + 1);
  if (!*out)
    return fail(err, err_size, "%s: out of memory", path);
  hx_rt_printable(line->text, *out, 4 * strlen(line->text) + 1);
  return true;
}

/* __metadata__: import's hexic_model and export's hexic lines kept. */
static bool read_metadata(struct hx_st_file *f, const struct hx_json *m, const char *path,
                          char *err, size_t err_size) {
  if (m->kind != HX_JSON_OBJECT)
    return fail(err, err_size, "%s: __metadata__ is not an object", path);
  return keep_string(m, "hexic_model", &f->hexic_model, path, err, err_size) &&
         keep_string(m, "hexic", &f->hexic_export, path, err, err_size);
}

static bool parse_header(struct hx_st_file *f, const char *text, size_t len, char *err,
                         size_t err_size) {
  char why[320];
  struct shown path = show(f->path);
  struct hx_json *root = hx_json_parse(text, len, why, sizeof why);
  if (!root || root->kind != HX_JSON_OBJECT) {
    hx_json_free(root);
    return fail(err, err_size, "%s: the header is not a JSON object%s%s", path.text,
                root ? "" : ": ", root ? "" : why);
  }
  /* Refused, not read as Python's json would (the last copy): readers of
   * the format disagree on which copy is the tensor (hexic's took the
   * first), and a file written by a safetensors writer never has two. */
  if (root->duplicate) {
    fail(err, err_size, "%s: '%s' is in the header twice (each tensor once)", path.text,
         show(root->duplicate).text);
    hx_json_free(root);
    return false;
  }
  f->tensors = calloc((size_t)root->count + 1, sizeof *f->tensors);
  bool ok = f->tensors != NULL || fail(err, err_size, "%s: out of memory", path.text);
  for (const struct hx_json *m = root->child; ok && m; m = m->next) {
    if (!strcmp(m->key, "__metadata__")) {
      ok = read_metadata(f, m, path.text, err, err_size);
      continue;
    }
    struct hx_st_tensor *t = &f->tensors[f->ntensors];
    t->name = strdup(m->key);
    f->ntensors++;
    ok = (t->name || fail(err, err_size, "%s: out of memory", path.text)) &&
         parse_tensor(m, t, f->size - f->data_start, path.text, err, err_size);
  }
  hx_json_free(root);
  return ok && no_overlap(f, err, err_size) && index_names(f, err, err_size);
}

/* The header's length, after checking it against the file and the bound. */
static bool header_length(const struct hx_st_file *f, uint64_t *n, char *err, size_t err_size) {
  struct shown shown_path = show(f->path);
  const char *path = shown_path.text;
  if (f->size < 8)
    return fail(err, err_size, "%s: truncated: %" PRIu64 " bytes, less than the header length's 8",
                path, f->size);
  if (!pread_all(f->fd, n, 8, 0))
    return fail(err, err_size, "%s: cannot read the header length", path);
  if (*n > f->size - 8)
    return fail(err, err_size,
                "%s: the header length %" PRIu64 " goes beyond the file (%" PRIu64 " bytes)", path,
                *n, f->size);
  if (*n > MAX_HEADER)
    return fail(err, err_size,
                "%s: the header length %" PRIu64 " is over the %" PRIu64
                "-byte limit (safetensors' own)",
                path, *n, MAX_HEADER);
  return true;
}

bool hx_st_open(struct hx_st_file *f, const char *path, char *err, size_t err_size) {
  memset(f, 0, sizeof *f);
  f->fd = hx_rt_open_regular(path, err, err_size);
  f->path = strdup(path);
  struct stat st;
  if (f->fd < 0 || !f->path || fstat(f->fd, &st) != 0) {
    if (f->fd >= 0)
      fail(err, err_size, "%s: cannot open: %s", show(path).text,
           f->path ? strerror(errno) : "out of memory");
    hx_st_close(f);
    return false;
  }
  f->size = (uint64_t)st.st_size;
  uint64_t n = 0;
  bool ok = header_length(f, &n, err, err_size);
  char *text = ok ? malloc((size_t)n + 1) : NULL;
  if (ok && (!text || !pread_all(f->fd, text, (size_t)n, 8)))
    ok = fail(err, err_size, "%s: cannot read the %" PRIu64 "-byte header", show(path).text, n);
  f->data_start = 8 + n;
  ok = ok && parse_header(f, text, (size_t)n, err, err_size);
  free(text);
  if (!ok)
    hx_st_close(f);
  return ok;
}

void hx_st_close(struct hx_st_file *f) {
  if (f->fd >= 0)
    close(f->fd);
  for (int i = 0; i < f->ntensors; i++)
    free(f->tensors[i].name);
  free(f->tensors);
  free(f->by_name);
  free(f->path);
  free(f->hexic_model);
  free(f->hexic_export);
  memset(f, 0, sizeof *f);
  f->fd = -1;
}

const struct hx_st_tensor *hx_st_find(const struct hx_st_file *f, const char *name) {
  for (int lo = 0, hi = f->ntensors; lo < hi;) {
    int mid = lo + (hi - lo) / 2, c = strcmp(f->by_name[mid]->name, name);
    if (!c)
      return f->by_name[mid];
    if (c < 0)
      lo = mid + 1;
    else
      hi = mid;
  }
  return NULL;
}

uint16_t hx_st_to_bf16(float x) {
  uint32_t u;
  memcpy(&u, &x, sizeof u);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u)
    return (uint16_t)((u >> 16) | 0x40); /* a quiet NaN */
  return (uint16_t)((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}

float hx_st_from_bf16(uint16_t b) {
  uint32_t u = (uint32_t)b << 16;
  float x;
  memcpy(&x, &u, sizeof x);
  return x;
}

static float from_f16(uint16_t h) {
  uint32_t sign = (uint32_t)(h >> 15) << 31, exp = (h >> 10) & 0x1F, mant = h & 0x3FF, u;
  if (exp == 0x1F) {
    u = sign | 0x7F800000u | (mant << 13);
  } else if (exp != 0) {
    u = sign | ((exp + 112) << 23) | (mant << 13);
  } else if (mant == 0) {
    u = sign;
  } else { /* subnormal: normalise */
    int e = -1;
    do {
      e++;
      mant <<= 1;
    } while (!(mant & 0x400));
    u = sign | ((uint32_t)(112 - e) << 23) | ((mant & 0x3FF) << 13);
  }
  float x;
  memcpy(&x, &u, sizeof x);
  return x;
}

static void convert(const char *dtype, const unsigned char *src, float *dst, int64_t n) {
  for (int64_t i = 0; i < n; i++) {
    if (!strcmp(dtype, "F32")) {
      memcpy(&dst[i], src + 4 * i, 4);
    } else {
      uint16_t h;
      memcpy(&h, src + 2 * i, 2);
      dst[i] = !strcmp(dtype, "BF16") ? hx_st_from_bf16(h) : from_f16(h);
    }
  }
}

bool hx_st_read_f32(const struct hx_st_file *f, const struct hx_st_tensor *t, int64_t r0,
                    int64_t r1, int64_t c0, int64_t c1, float *dst, char *err, size_t err_size) {
  if (strcmp(t->dtype, "F32") && strcmp(t->dtype, "BF16") && strcmp(t->dtype, "F16"))
    return fail(err, err_size, "%s: tensor '%s' has dtype %s; hexic reads F32, BF16 and F16",
                show(f->path).text, show(t->name).text, t->dtype);
  int64_t rows = t->ndim ? t->shape[0] : 1, n = hx_st_numel(t);
  int64_t cols = t->ndim <= 1 ? (t->ndim ? t->shape[0] : 1) : (rows ? n / rows : 0);
  if (t->ndim <= 1)
    rows = 1;
  if (r0 < 0 || r1 > rows || c0 < 0 || c1 > cols || r0 > r1 || c0 > c1)
    return fail(err, err_size,
                "%s: tensor '%s': rows [%" PRId64 ", %" PRId64 ") x columns [%" PRId64 ", %" PRId64
                ") are outside it",
                show(f->path).text, show(t->name).text, r0, r1, c0, c1);
  size_t width = (size_t)(c1 - c0) * (size_t)t->elem_bytes;
  unsigned char *row = malloc(width + 1);
  bool ok = row != NULL;
  for (int64_t r = r0; ok && r < r1; r++) {
    uint64_t at = f->data_start + t->begin + (uint64_t)(r * cols + c0) * (uint64_t)t->elem_bytes;
    ok = pread_all(f->fd, row, width, at);
    if (ok)
      convert(t->dtype, row, dst + (r - r0) * (c1 - c0), c1 - c0);
  }
  free(row);
  return ok || fail(err, err_size, "%s: tensor '%s': cannot read its data", show(f->path).text,
                    show(t->name).text);
}

/* ---- writing ---- */

struct text {
  char *s;
  size_t n, cap;
  bool ok;
};

__attribute__((format(printf, 2, 3))) static void put(struct text *t, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int need = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  if (!t->ok || need < 0)
    return;
  if (t->n + (size_t)need + 16 > t->cap) {
    t->cap = 2 * (t->n + (size_t)need + 16);
    char *grown = realloc(t->s, t->cap);
    if (!grown) {
      t->ok = false;
      return;
    }
    t->s = grown;
  }
  va_start(ap, fmt);
  vsnprintf(t->s + t->n, t->cap - t->n, fmt, ap);
  va_end(ap);
  t->n += (size_t)need;
}

/* A JSON string of s (names here are printable ASCII; others escaped). */
static void put_string(struct text *t, const char *s) {
  put(t, "\"");
  for (const unsigned char *p = (const unsigned char *)s; *p; p++)
    if (*p == '"' || *p == '\\')
      put(t, "\\%c", *p);
    else if (*p < 0x20)
      put(t, "\\u%04x", *p);
    else
      put(t, "%c", *p);
  put(t, "\"");
}

static int64_t out_numel(const struct hx_st_out *t) {
  int64_t n = 1;
  for (int d = 0; d < t->ndim; d++)
    n *= t->shape[d];
  return n;
}

/* The header, padded with spaces to a multiple of 8 bytes. */
static struct text make_header(const struct hx_st_out *t, int n, bool bf16, const char *key,
                               const char *value) {
  struct text h = {NULL, 0, 0, true};
  put(&h, "{\"__metadata__\":{\"format\":\"pt\"");
  if (key) {
    put(&h, ",");
    put_string(&h, key);
    put(&h, ":");
    put_string(&h, value);
  }
  put(&h, "}");
  uint64_t off = 0, bytes = bf16 ? 2 : 4;
  for (int i = 0; i < n; i++) {
    uint64_t size = (uint64_t)out_numel(&t[i]) * bytes;
    put(&h, ",");
    put_string(&h, t[i].name);
    put(&h, ":{\"dtype\":\"%s\",\"shape\":[", bf16 ? "BF16" : "F32");
    for (int d = 0; d < t[i].ndim; d++)
      put(&h, "%s%" PRId64, d ? "," : "", t[i].shape[d]);
    put(&h, "],\"data_offsets\":[%" PRIu64 ",%" PRIu64 "]}", off, off + size);
    off += size;
  }
  put(&h, "}");
  while (h.ok && h.n % 8)
    put(&h, " ");
  return h;
}

static bool write_tensor(FILE *out, const struct hx_st_out *t, int index, bool bf16, char *err,
                         size_t err_size) {
  int64_t n = out_numel(t);
  float *buf = malloc(sizeof(float) * (size_t)(n + 1));
  if (!buf)
    return fail(err, err_size, "out of memory for tensor '%s'", t->name);
  bool ok = t->fill(t->arg, index, buf, err, err_size);
  if (ok && bf16) /* in place: element i is read before bytes [2i, 2i+2) are overwritten */
    for (int64_t i = 0; i < n; i++) {
      uint16_t half = hx_st_to_bf16(buf[i]);
      memcpy((char *)buf + 2 * i, &half, sizeof half);
    }
  if (ok && fwrite(buf, bf16 ? 2 : 4, (size_t)n, out) != (size_t)n)
    ok = fail(err, err_size, "cannot write tensor '%s': %s", t->name, strerror(errno));
  free(buf);
  return ok;
}

bool hx_st_write(const char *path, const struct hx_st_out *t, int n, bool bf16,
                 const char *metadata_key, const char *metadata_value, char *err, size_t err_size) {
  struct text h = make_header(t, n, bf16, metadata_key, metadata_value);
  char tmp[4200];
  snprintf(tmp, sizeof tmp, "%s.tmp", path);
  FILE *out = h.ok ? fopen(tmp, "wb") : NULL;
  bool ok = out != NULL;
  if (!ok)
    fail(err, err_size, "%s: cannot create: %s", tmp, h.ok ? strerror(errno) : "out of memory");
  uint64_t len = h.n;
  if (ok && (fwrite(&len, 8, 1, out) != 1 || fwrite(h.s, 1, h.n, out) != h.n))
    ok = fail(err, err_size, "%s: cannot write: %s", tmp, strerror(errno));
  for (int i = 0; ok && i < n; i++)
    ok = write_tensor(out, &t[i], i, bf16, err, err_size);
  /* durable before it takes the name: renamed unsynced, a crash could leave
   * an empty file where the user's export should be */
  if (ok && (fflush(out) != 0 || fsync(fileno(out)) != 0))
    ok = fail(err, err_size, "%s: cannot write: %s", tmp, strerror(errno));
  if (out && fclose(out) != 0 && ok)
    ok = fail(err, err_size, "%s: cannot write: %s", tmp, strerror(errno));
  if (ok && rename(tmp, path) != 0)
    ok = fail(err, err_size, "%s: cannot rename into place: %s", path, strerror(errno));
  if (ok)
    (void)hx_rt_fsync_folder_of(path); /* best effort: the file is complete either way */
  if (!ok && out)
    unlink(tmp);
  free(h.s);
  return ok;
}

/* ---- a set of files: one, or an index's shards ---- */

void hx_st_set_close(struct hx_st_set *s) {
  for (int i = 0; i < s->n; i++)
    hx_st_close(&s->files[i]);
  s->n = 0;
}

const struct hx_st_tensor *hx_st_set_find(const struct hx_st_set *s, const char *name,
                                          const struct hx_st_file **file) {
  for (int i = 0; i < s->n; i++) {
    const struct hx_st_tensor *t = hx_st_find(&s->files[i], name);
    if (t) {
      *file = &s->files[i];
      return t;
    }
  }
  return NULL;
}

void hx_st_folder_prefix(const char *path, char *buf, size_t size) {
  snprintf(buf, size, "%s", path);
  char *slash = strrchr(buf, '/');
  if (slash)
    slash[1] = '\0';
  else
    buf[0] = '\0';
}

/* Opens every distinct file of an index's weight_map (beside the index). */
static bool open_index(const char *path, struct hx_st_set *s, char *err, size_t err_size) {
  struct hx_json *root = hx_json_parse_file(path, 64 << 20, err, err_size);
  const struct hx_json *map = hx_json_get(root, "weight_map");
  char shown_path[512], shown_name[256];
  hx_rt_printable(path, shown_path, sizeof shown_path);
  bool ok = root != NULL;
  if (ok && (!map || map->kind != HX_JSON_OBJECT)) {
    snprintf(err, err_size, "%s: no \"weight_map\" object (not a safetensors index)", shown_path);
    ok = false;
  }
  char dir[4096];
  hx_st_folder_prefix(path, dir, sizeof dir);
  for (const struct hx_json *m = ok ? map->child : NULL; ok && m; m = m->next) {
    if (m->kind != HX_JSON_STRING || strchr(m->text, '/')) {
      snprintf(err, err_size, "%s: tensor '%s': its file is not a file name beside the index",
               shown_path, hx_rt_printable(m->key, shown_name, sizeof shown_name));
      ok = false;
      break;
    }
    char file[4096 + 256];
    snprintf(file, sizeof file, "%s%s", dir, m->text);
    bool seen = false;
    for (int i = 0; i < s->n && !seen; i++)
      seen = !strcmp(s->files[i].path, file);
    if (seen)
      continue;
    if (s->n == HX_ST_MAX_SHARDS) {
      snprintf(err, err_size, "%s: more than %d shard files", shown_path, HX_ST_MAX_SHARDS);
      ok = false;
    } else {
      ok = hx_st_open(&s->files[s->n], file, err, err_size);
      s->n += ok;
    }
  }
  /* every tensor the index names is in the file it names */
  for (const struct hx_json *m = ok ? map->child : NULL; ok && m; m = m->next) {
    char file[4096 + 256], shown_file[512];
    snprintf(file, sizeof file, "%s%s", dir, m->text);
    for (int i = 0; i < s->n; i++)
      if (!strcmp(s->files[i].path, file) && !hx_st_find(&s->files[i], m->key)) {
        snprintf(err, err_size, "%s: the index puts tensor '%s' there, but the file lacks it",
                 hx_rt_printable(file, shown_file, sizeof shown_file),
                 hx_rt_printable(m->key, shown_name, sizeof shown_name));
        ok = false;
      }
  }
  hx_json_free(root);
  return ok;
}

bool hx_st_set_open(struct hx_st_set *s, const char *path, char *err, size_t err_size) {
  size_t n = strlen(path);
  s->n = 0;
  if (n >= 5 && !strcmp(path + n - 5, ".json"))
    return open_index(path, s, err, err_size);
  s->n = hx_st_open(&s->files[0], path, err, err_size);
  return s->n == 1;
}
