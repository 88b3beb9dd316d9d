/* Token streams and deterministic batching (see rt_data.h and
 * docs/model-spec.md, "Data"). */
#include "rt_data.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kernels/cpu/llama.h"

/* Files are little-endian whatever the host: decode byte by byte. */
static uint32_t le16_at(const unsigned char *p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8; }
static uint32_t le32_at(const unsigned char *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static int token_width(enum hx_rt_data_kind kind) { return kind == HX_DATA_KIND_SHARD_U32 ? 4 : 2; }

uint32_t hx_rt_data_token(const struct hx_rt_data *d, int64_t k) {
  if (d->kind == HX_DATA_KIND_SYNTHETIC)
    /* The spec writes splitmix64(seed ^ 0x5EED + k); read as C (+ binds
     * tighter than ^) that is seed ^ (0x5EED + k), as the reference reads it. */
    return (uint32_t)(hxk_splitmix64(d->seed ^ (UINT64_C(0x5EED) + (uint64_t)k)) %
                      (uint64_t)d->vocab);
  const unsigned char *p = d->tokens;
  return d->kind == HX_DATA_KIND_SHARD_U32 ? le32_at(p + 4 * k) : le16_at(p + 2 * k);
}

void hx_rt_data_close(struct hx_rt_data *d) {
  if (d->map)
    munmap(d->map, d->map_size);
  memset(d, 0, sizeof *d);
}

/* What the first bytes of a file say it is. */
struct header_view {
  bool has_header; /* at least 256 int32 */
  int32_t magic, version, count;
};

static struct header_view read_header(const unsigned char *p, size_t size) {
  struct header_view h = {0};
  if (size < 4 * HX_SHARD_HEADER_INTS)
    return h;
  h.has_header = true;
  h.magic = (int32_t)le32_at(p);
  h.version = (int32_t)le32_at(p + 4);
  h.count = (int32_t)le32_at(p + 8);
  return h;
}

/* An llm.c-shaped header whose magic is unknown: version 1 or 7 and a token
 * count that explains the file size exactly. Raw uint16 data matching all
 * three by chance is not a practical concern; a damaged shard is. */
static bool looks_like_shard(struct header_view h, size_t size) {
  if (!h.has_header || h.count <= 0)
    return false;
  uint64_t body = size - 4 * HX_SHARD_HEADER_INTS;
  return (h.version == HX_SHARD_VERSION_U16 && body == 2 * (uint64_t)h.count) ||
         (h.version == HX_SHARD_VERSION_U32 && body == 4 * (uint64_t)h.count);
}

/* Sets d->kind, d->tokens and d->ntokens from the mapped file, or explains. */
static bool classify_shard(struct hx_rt_data *d, struct header_view h, size_t size,
                           const char *path, char *err, size_t err_size) {
  int expected_version =
      h.magic == HX_SHARD_MAGIC_U16 ? HX_SHARD_VERSION_U16 : HX_SHARD_VERSION_U32;
  if (h.version != expected_version) {
    snprintf(err, err_size, "%s: llm.c shard with magic %d has version %d (expected %d)", path,
             h.magic, h.version, expected_version);
    return false;
  }
  d->kind = h.magic == HX_SHARD_MAGIC_U16 ? HX_DATA_KIND_SHARD_U16 : HX_DATA_KIND_SHARD_U32;
  int width = token_width(d->kind);
  uint64_t body = size - 4 * HX_SHARD_HEADER_INTS;
  if (h.count <= 0) {
    snprintf(err, err_size, "%s: llm.c shard header announces %d tokens", path, h.count);
    return false;
  }
  if (body != (uint64_t)h.count * (uint64_t)width) {
    snprintf(err, err_size,
             "%s: %s: the header announces %d tokens (%" PRIu64
             " bytes) but the file holds %" PRIu64 " bytes after the header",
             path,
             body < (uint64_t)h.count * (uint64_t)width ? "truncated shard" : "trailing bytes",
             h.count, (uint64_t)h.count * (uint64_t)width, body);
    return false;
  }
  d->tokens = (const unsigned char *)d->map + 4 * HX_SHARD_HEADER_INTS;
  d->ntokens = h.count;
  return true;
}

static bool classify(struct hx_rt_data *d, enum hx_rt_data_format format, const char *path,
                     char *err, size_t err_size) {
  size_t size = d->map_size;
  struct header_view h = read_header(d->map, size);
  bool known_magic =
      h.has_header && (h.magic == HX_SHARD_MAGIC_U16 || h.magic == HX_SHARD_MAGIC_U32);
  if (format != HX_DATA_RAW16 && known_magic)
    return classify_shard(d, h, size, path, err, err_size);
  if (format == HX_DATA_SHARD || (format == HX_DATA_AUTO && looks_like_shard(h, size))) {
    if (!h.has_header)
      snprintf(err, err_size, "%s: truncated: %zu bytes, shorter than the 1024-byte llm.c header",
               path, size);
    else
      snprintf(err, err_size, "%s: bad magic %d (an llm.c shard starts with %d or %d)", path,
               h.magic, HX_SHARD_MAGIC_U16, HX_SHARD_MAGIC_U32);
    return false;
  }
  if (size % 2) {
    snprintf(err, err_size, "%s: %zu bytes: an odd size cannot hold raw uint16 tokens", path, size);
    return false;
  }
  d->kind = HX_DATA_KIND_RAW_U16;
  d->tokens = d->map;
  d->ntokens = (int64_t)(size / 2);
  return true;
}

static bool check_tokens(const struct hx_rt_data *d, const char *path, char *err, size_t err_size) {
  for (int64_t k = 0; k < d->ntokens; k++) {
    uint32_t t = hx_rt_data_token(d, k);
    if ((int64_t)t >= d->vocab) {
      snprintf(err, err_size, "%s: token %" PRIu32 " at position %" PRId64 " is >= vocab %" PRId64,
               path, t, k, d->vocab);
      return false;
    }
  }
  return true;
}

static bool map_file(struct hx_rt_data *d, const char *path, char *err, size_t err_size) {
  int fd = open(path, O_RDONLY);
  if (fd < 0) {
    snprintf(err, err_size, "%s: cannot open: %s", path, strerror(errno));
    return false;
  }
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size == 0) {
    snprintf(err, err_size, "%s: not a non-empty regular file", path);
    close(fd);
    return false;
  }
  void *p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
  close(fd);
  if (p == MAP_FAILED) {
    snprintf(err, err_size, "%s: cannot map: %s", path, strerror(errno));
    return false;
  }
  d->map = p;
  d->map_size = (size_t)st.st_size;
  return true;
}

static bool check_length(const struct hx_rt_data *d, const char *what, int64_t seq_len, char *err,
                         size_t err_size) {
  /* off ranges over [0, N-T-1): N >= T+2 leaves at least one start. */
  if (d->ntokens >= seq_len + 2)
    return true;
  snprintf(err, err_size, "%s: %" PRId64 " tokens; seq_len %" PRId64 " needs at least %" PRId64,
           what, d->ntokens, seq_len, seq_len + 2);
  return false;
}

bool hx_rt_data_open(struct hx_rt_data *d, const char *path, enum hx_rt_data_format format,
                     int64_t vocab, int64_t seq_len, int64_t seed, char *err, size_t err_size) {
  memset(d, 0, sizeof *d);
  d->vocab = vocab;
  d->seed = (uint64_t)seed;
  if (vocab <= 0 || seq_len <= 0) {
    snprintf(err, err_size, "vocab (%" PRId64 ") and seq_len (%" PRId64 ") must be positive", vocab,
             seq_len);
    return false;
  }
  if (!path || !*path) {
    d->kind = HX_DATA_KIND_SYNTHETIC;
    d->ntokens = HX_SYNTHETIC_TOKENS;
    return check_length(d, "synthetic data", seq_len, err, err_size);
  }
  bool ok = map_file(d, path, err, err_size) && classify(d, format, path, err, err_size) &&
            check_length(d, path, seq_len, err, err_size) && check_tokens(d, path, err, err_size);
  if (!ok)
    hx_rt_data_close(d);
  return ok;
}

/* a*b mod m without overflow for any m < 2^63. */
static uint64_t mulmod(uint64_t a, uint64_t b, uint64_t m) {
  uint64_t r = 0;
  a %= m;
  for (; b; b >>= 1) {
    if (b & 1)
      r = (r + a) % m;
    a = (a + a) % m;
  }
  return r;
}

int64_t hx_rt_data_offset(int64_t ntokens, int64_t seq_len, int64_t global_batch, int64_t step,
                          int64_t j) {
  uint64_t g = (uint64_t)step * (uint64_t)global_batch + (uint64_t)j;
  return (int64_t)mulmod(g, (uint64_t)seq_len, (uint64_t)(ntokens - seq_len - 1));
}

void hx_rt_data_sequence(const struct hx_rt_data *d, int64_t seq_len, int64_t global_batch,
                         int64_t step, int64_t j, int32_t *inputs, int32_t *targets) {
  int64_t off = hx_rt_data_offset(d->ntokens, seq_len, global_batch, step, j);
  for (int64_t t = 0; t < seq_len; t++) {
    if (inputs)
      inputs[t] = (int32_t)hx_rt_data_token(d, off + t);
    if (targets)
      targets[t] = (int32_t)hx_rt_data_token(d, off + t + 1);
  }
}

void hx_rt_data_batch(const struct hx_rt_data *d, int64_t seq_len, int64_t global_batch,
                      int64_t step, int64_t j0, int64_t count, int32_t *inputs, int32_t *targets) {
  for (int64_t i = 0; i < count; i++)
    hx_rt_data_sequence(d, seq_len, global_batch, step, j0 + i,
                        inputs ? inputs + i * seq_len : NULL,
                        targets ? targets + i * seq_len : NULL);
}

void hx_rt_data_describe(const struct hx_rt_data *d, const char *path, char *buf, size_t size) {
  switch (d->kind) {
  case HX_DATA_KIND_SYNTHETIC:
    snprintf(buf, size, "synthetic tokens: %" PRId64 " tokens, seed %" PRIu64, d->ntokens, d->seed);
    return;
  case HX_DATA_KIND_SHARD_U16:
  case HX_DATA_KIND_SHARD_U32:
    snprintf(buf, size, "llm.c shard (uint%d tokens) %s: %" PRId64 " tokens",
             8 * token_width(d->kind), path, d->ntokens);
    return;
  case HX_DATA_KIND_RAW_U16:
    snprintf(buf, size, "raw uint16 tokens %s: %" PRId64 " tokens", path, d->ntokens);
    return;
  }
}

static void put_le32(unsigned char *p, uint32_t v) {
  for (int i = 0; i < 4; i++)
    p[i] = (unsigned char)(v >> (8 * i));
}

static bool write_all(FILE *f, const void *p, size_t n) { return fwrite(p, 1, n, f) == n; }

/* Tokens go out in chunks so a large shard needs no second full-size buffer. */
static bool write_tokens(FILE *f, const uint32_t *tokens, int64_t n, int width) {
  unsigned char buf[4096];
  size_t used = 0;
  for (int64_t k = 0; k < n; k++) {
    for (int i = 0; i < width; i++)
      buf[used++] = (unsigned char)(tokens[k] >> (8 * i));
    if (used + 4 > sizeof buf) {
      if (!write_all(f, buf, used))
        return false;
      used = 0;
    }
  }
  return write_all(f, buf, used);
}

bool hx_rt_shard_write(const char *path, const uint32_t *tokens, int64_t n, bool force_u32,
                       char *err, size_t err_size) {
  if (n <= 0 || n > INT32_MAX) {
    snprintf(err, err_size, "%s: %" PRId64 " tokens: a shard holds 1 to %d tokens", path, n,
             INT32_MAX);
    return false;
  }
  bool wide = force_u32;
  for (int64_t k = 0; k < n && !wide; k++)
    wide = tokens[k] > UINT16_MAX;
  unsigned char header[4 * HX_SHARD_HEADER_INTS] = {0};
  put_le32(header, wide ? HX_SHARD_MAGIC_U32 : HX_SHARD_MAGIC_U16);
  put_le32(header + 4, wide ? HX_SHARD_VERSION_U32 : HX_SHARD_VERSION_U16);
  put_le32(header + 8, (uint32_t)n);
  FILE *f = fopen(path, "wb");
  if (!f) {
    snprintf(err, err_size, "%s: cannot create: %s", path, strerror(errno));
    return false;
  }
  bool ok = write_all(f, header, sizeof header) && write_tokens(f, tokens, n, wide ? 4 : 2);
  ok = (fclose(f) == 0) && ok;
  if (!ok)
    snprintf(err, err_size, "%s: write failed: %s", path, strerror(errno));
  return ok;
}
