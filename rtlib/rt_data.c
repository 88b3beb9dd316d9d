/* Token streams and deterministic batching (see rt_data.h and
 * docs/model-spec.md, "Data"). */
#include "rt_data.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kernels/cpu/llama.h"
#include "ckpt/user_file.h"

/* Tokens per read at open (the vocabulary scan); at least one sequence. */
enum { SCAN_TOKENS = 1 << 16 };

/* Files are little-endian whatever the host: decode byte by byte. */
static uint32_t le16_at(const unsigned char *p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8; }
static uint32_t le32_at(const unsigned char *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static int token_width(enum hx_rt_data_kind kind) { return kind == HX_DATA_KIND_SHARD_U32 ? 4 : 2; }

static uint32_t synthetic_token(const struct hx_rt_data *d, int64_t k) {
  /* The spec writes splitmix64(seed ^ 0x5EED + k); read as C (+ binds
   * tighter than ^) that is seed ^ (0x5EED + k), as the reference reads it. */
  return (uint32_t)(hxk_splitmix64(d->seed ^ (UINT64_C(0x5EED) + (uint64_t)k)) %
                    (uint64_t)d->vocab);
}

/* The file's size now, for the message of a read past its end. */
static long long size_now(int fd) {
  struct stat st;
  return fstat(fd, &st) == 0 ? (long long)st.st_size : -1;
}

/* bytes [offset, offset + n) of the file into buf, or a message. */
static bool pread_all(const struct hx_rt_data *d, int64_t offset, unsigned char *buf, size_t n,
                      char *err, size_t err_size) {
  for (size_t done = 0; done < n;) {
    ssize_t got = pread(d->fd, buf + done, n - done, (off_t)(offset + (int64_t)done));
    if (got < 0 && errno == EINTR)
      continue;
    if (got < 0) {
      snprintf(err, err_size, "%s: read failed at byte %" PRId64 ": %s", d->path,
               offset + (int64_t)done, strerror(errno));
      return false;
    }
    if (got == 0) {
      snprintf(err, err_size,
               "%s: the file ends at byte %lld but held %" PRId64 " bytes when training started "
               "(truncated or replaced while training?); reading bytes [%" PRId64 ", %" PRId64 ")",
               d->path, size_now(d->fd), d->file_size, offset, offset + (int64_t)n);
      return false;
    }
    done += (size_t)got;
  }
  return true;
}

/* tok[first .. first + count) into out (count <= d->window), each checked
 * against the vocabulary; `when` ends the message of a bad token. */
static bool read_tokens(const struct hx_rt_data *d, int64_t first, int64_t count, uint32_t *out,
                        const char *when, char *err, size_t err_size) {
  int width = token_width(d->kind);
  if (!pread_all(d, d->body + first * width, d->bytes, (size_t)(count * width), err, err_size))
    return false;
  for (int64_t i = 0; i < count; i++) {
    const unsigned char *p = d->bytes + i * width;
    out[i] = width == 4 ? le32_at(p) : le16_at(p);
    if ((int64_t)out[i] >= d->vocab) {
      snprintf(err, err_size,
               "%s: token %" PRIu32 " at position %" PRId64 " is >= vocab %" PRId64 "%s", d->path,
               out[i], first + i, d->vocab, when);
      return false;
    }
  }
  return true;
}

uint32_t hx_rt_data_token(const struct hx_rt_data *d, int64_t k) {
  if (d->kind == HX_DATA_KIND_SYNTHETIC)
    return synthetic_token(d, k);
  char err[512];
  uint32_t t = UINT32_MAX;
  return read_tokens(d, k, 1, &t, "", err, sizeof err) ? t : UINT32_MAX;
}

void hx_rt_data_close(struct hx_rt_data *d) {
  if (d->has_file)
    close(d->fd);
  free(d->path);
  free(d->bytes);
  free(d->tokens);
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

/* Sets d->kind, d->body and d->ntokens from a shard's header, or explains. */
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
  d->body = 4 * HX_SHARD_HEADER_INTS;
  d->ntokens = h.count;
  return true;
}

static bool classify(struct hx_rt_data *d, const unsigned char *head, enum hx_rt_data_format format,
                     const char *path, char *err, size_t err_size) {
  size_t size = (size_t)d->file_size;
  struct header_view h = read_header(head, size);
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
  d->body = 0;
  d->ntokens = (int64_t)(size / 2);
  return true;
}

/* Every token below the vocabulary, and not all the same token: a zeroed or
 * placeholder file (1 KiB of zeros reads as 512 raw tokens) is refused. */
static bool check_tokens(const struct hx_rt_data *d, char *err, size_t err_size) {
  uint32_t first = 0;
  bool varied = false;
  for (int64_t k = 0; k < d->ntokens; k += d->window) {
    int64_t n = d->ntokens - k < d->window ? d->ntokens - k : d->window;
    if (!read_tokens(d, k, n, d->tokens, "", err, err_size))
      return false;
    if (k == 0)
      first = d->tokens[0];
    for (int64_t i = 0; i < n && !varied; i++)
      varied = d->tokens[i] != first;
  }
  if (varied)
    return true;
  snprintf(err, err_size,
           "%s: all %" PRId64 " tokens are %" PRIu32 ": not training data (a zeroed or "
           "placeholder file?)",
           d->path, d->ntokens, first);
  return false;
}

static bool open_file(struct hx_rt_data *d, const char *path, int64_t seq_len, char *err,
                      size_t err_size) {
  /* a regular file only: a FIFO blocked the open forever, /dev/zero never ends */
  int fd = hx_rt_open_regular(path, err, err_size);
  if (fd < 0)
    return false;
  d->fd = fd;
  d->has_file = true;
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size == 0) {
    snprintf(err, err_size, "%s: not a non-empty regular file", path);
    return false;
  }
  d->file_size = (int64_t)st.st_size;
  d->path = strdup(path);
  d->window = seq_len + 1 > SCAN_TOKENS ? seq_len + 1 : SCAN_TOKENS;
  d->bytes = malloc((size_t)d->window * 4);
  d->tokens = malloc((size_t)d->window * sizeof *d->tokens);
  if (!d->path || !d->bytes || !d->tokens) {
    snprintf(err, err_size, "%s: out of memory", path);
    return false;
  }
  return true;
}

static bool check_length(const struct hx_rt_data *d, const char *what, int64_t seq_len, char *err,
                         size_t err_size) {
  /* off ranges over [0, N-T-1): N >= T+2 leaves at least one start. */
  if (d->ntokens >= seq_len + 2)
    return true;
  snprintf(err, err_size,
           "%s: %" PRId64 " tokens; seq_len %" PRId64 " needs at least %" PRId64
           " (one sequence and its last target, plus one)",
           what, d->ntokens, seq_len, seq_len + 2);
  return false;
}

/* Reads the header (what there is of it), classifies, checks. */
static bool open_checked(struct hx_rt_data *d, const char *path, enum hx_rt_data_format format,
                         int64_t seq_len, char *err, size_t err_size) {
  if (!open_file(d, path, seq_len, err, err_size))
    return false;
  size_t head_bytes = 4 * HX_SHARD_HEADER_INTS;
  if ((int64_t)head_bytes > d->file_size)
    head_bytes = (size_t)d->file_size;
  unsigned char head[4 * HX_SHARD_HEADER_INTS];
  return pread_all(d, 0, head, head_bytes, err, err_size) &&
         classify(d, head, format, path, err, err_size) &&
         check_length(d, path, seq_len, err, err_size) && check_tokens(d, err, err_size);
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
  bool ok = open_checked(d, path, format, seq_len, err, err_size);
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

/* Sequence j of step s at positions pos[0..npos) (NULL: 0..T-1): inputs the
 * tokens there, targets the tokens one further. */
static bool sequence_at(const struct hx_rt_data *d, int64_t seq_len, int64_t global_batch,
                        int64_t step, int64_t j, const int *pos, int64_t npos, int32_t *inputs,
                        int32_t *targets, char *err, size_t err_size) {
  int64_t off = hx_rt_data_offset(d->ntokens, seq_len, global_batch, step, j);
  const uint32_t *tok = d->tokens;
  if (d->kind != HX_DATA_KIND_SYNTHETIC) {
    if (seq_len + 1 > d->window) {
      snprintf(err, err_size, "%s: sequences of %" PRId64 " tokens, opened for %" PRId64, d->path,
               seq_len, d->window - 1);
      return false;
    }
    if (!read_tokens(d, off, seq_len + 1, d->tokens, " (the file changed while training?)", err,
                     err_size))
      return false;
  }
  for (int64_t i = 0; i < npos; i++) {
    int64_t t = pos ? pos[i] : i;
    if (t < 0 || t >= seq_len) {
      snprintf(err, err_size, "token position %" PRId64 " outside a sequence of %" PRId64, t,
               seq_len);
      return false;
    }
    uint32_t in = tok ? tok[t] : synthetic_token(d, off + t);
    uint32_t next = tok ? tok[t + 1] : synthetic_token(d, off + t + 1);
    if (inputs)
      inputs[i] = (int32_t)in;
    if (targets)
      targets[i] = (int32_t)next;
  }
  return true;
}

bool hx_rt_data_sequence(const struct hx_rt_data *d, int64_t seq_len, int64_t global_batch,
                         int64_t step, int64_t j, int32_t *inputs, int32_t *targets, char *err,
                         size_t err_size) {
  return sequence_at(d, seq_len, global_batch, step, j, NULL, seq_len, inputs, targets, err,
                     err_size);
}

bool hx_rt_data_batch(const struct hx_rt_data *d, int64_t seq_len, int64_t global_batch,
                      int64_t step, int64_t j0, int64_t count, int32_t *inputs, int32_t *targets,
                      char *err, size_t err_size) {
  return hx_rt_data_batch_at(d, seq_len, global_batch, step, j0, count, NULL, seq_len, inputs,
                             targets, err, err_size);
}

bool hx_rt_data_batch_at(const struct hx_rt_data *d, int64_t seq_len, int64_t global_batch,
                         int64_t step, int64_t j0, int64_t count, const int *pos, int64_t npos,
                         int32_t *inputs, int32_t *targets, char *err, size_t err_size) {
  for (int64_t i = 0; i < count; i++)
    if (!sequence_at(d, seq_len, global_batch, step, j0 + i, pos, npos,
                     inputs ? inputs + i * npos : NULL, targets ? targets + i * npos : NULL, err,
                     err_size))
      return false;
  return true;
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
