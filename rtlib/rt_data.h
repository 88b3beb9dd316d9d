/* Training tokens and deterministic batching (docs/model-spec.md, "Data").
 *
 * A token stream tok[0..N) comes from one of:
 * - an llm.c shard: a header of 256 little-endian int32 — header[0] magic,
 *   header[1] version, header[2] token count — then the tokens:
 *   magic 20240520 / version 1 with uint16 tokens, or
 *   magic 20240801 / version 7 with uint32 tokens;
 * - a raw file of little-endian uint16 tokens with no header;
 * - nothing (data absent): the synthetic stream
 *   tok[k] = splitmix64(seed ^ (0x5EED + k)) mod V (hxk_splitmix64, the one
 *   parameter initialisation uses) with N = 1<<20 (the spec's
 *   `seed ^ 0x5EED + k` with C precedence).
 * Every token is checked against the vocabulary when the stream is opened,
 * and a file must hold at least seq_len + 2 tokens (one sequence, its last
 * target, and a second start offset) that are not all the same token (a
 * zeroed or placeholder file is not training data).
 *
 * Files are read with pread, one sequence at a time, never mapped: a file
 * truncated (or rewritten) while training is reported with its name and
 * sizes, where a mapping would die of SIGBUS.
 *
 * In optimizer step s, sequence j of the global batch (0 <= j < B) is
 * g = s*B + j; it starts at off = (g*T) mod (N - T - 1); its inputs are
 * tok[off .. off+T) and its targets tok[off+1 .. off+T+1). So every plan,
 * whatever its pipelines and micro-batches, reads the same sequences in the
 * same step, and a resumed run reads what the uninterrupted one read. */
#ifndef HX_RT_DATA_H
#define HX_RT_DATA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define HX_SHARD_MAGIC_U16 20240520
#define HX_SHARD_VERSION_U16 1
#define HX_SHARD_MAGIC_U32 20240801
#define HX_SHARD_VERSION_U32 7
#define HX_SHARD_HEADER_INTS 256
#define HX_SYNTHETIC_TOKENS (INT64_C(1) << 20)

enum hx_rt_data_format {
  HX_DATA_AUTO,  /* a known magic: shard; an llm.c-shaped header with an
                    unknown magic: error; anything else: raw uint16 */
  HX_DATA_SHARD, /* must be an llm.c shard */
  HX_DATA_RAW16, /* raw uint16, no header */
};

enum hx_rt_data_kind {
  HX_DATA_KIND_SYNTHETIC,
  HX_DATA_KIND_SHARD_U16,
  HX_DATA_KIND_SHARD_U32,
  HX_DATA_KIND_RAW_U16,
};

/* An open token stream; treat the fields as read-only. */
struct hx_rt_data {
  enum hx_rt_data_kind kind;
  int64_t ntokens; /* N */
  int64_t vocab;   /* V */
  uint64_t seed;   /* synthetic stream only */
  bool has_file;   /* fd is open (false when synthetic or closed) */
  int fd;
  int64_t body;         /* byte offset of tok[0] in the file */
  int64_t file_size;    /* bytes when opened: the file must keep them */
  char *path;           /* for messages */
  unsigned char *bytes; /* one read's raw bytes: window tokens */
  uint32_t *tokens;     /* one read's decoded tokens: window tokens */
  int64_t window;
};

/* Opens path (NULL or "": the synthetic stream of seed) and checks it: magic,
 * version, that the file holds the header's token count, that N >= seq_len
 * + 2 (a full sequence plus its last target, and a second start), every
 * token < vocab, not every token the same. On failure returns false with a
 * message naming the file in err; d is then left closed. */
bool hx_rt_data_open(struct hx_rt_data *d, const char *path, enum hx_rt_data_format format,
                     int64_t vocab, int64_t seq_len, int64_t seed, char *err, size_t err_size);

/* Closes the file; safe on a closed, synthetic or zeroed stream. */
void hx_rt_data_close(struct hx_rt_data *d);

/* tok[k], 0 <= k < ntokens; UINT32_MAX when the file cannot be read there. */
uint32_t hx_rt_data_token(const struct hx_rt_data *d, int64_t k);

/* Start offset of global sequence j of step s (global batch B, length T). */
int64_t hx_rt_data_offset(int64_t ntokens, int64_t seq_len, int64_t global_batch, int64_t step,
                          int64_t j);

/* Fills inputs[0..T) and targets[0..T) (either may be NULL) with global
 * sequence j of step s. T must not exceed the seq_len the stream was opened
 * with. Returns false with a message in err when the file no longer holds
 * the sequence (truncated while training) or holds a token >= vocab there. */
bool hx_rt_data_sequence(const struct hx_rt_data *d, int64_t seq_len, int64_t global_batch,
                         int64_t step, int64_t j, int32_t *inputs, int32_t *targets, char *err,
                         size_t err_size);

/* Fills count consecutive sequences j0, j0+1, ... (a micro-batch) into
 * inputs/targets laid out [count][T]; false as hx_rt_data_sequence. */
bool hx_rt_data_batch(const struct hx_rt_data *d, int64_t seq_len, int64_t global_batch,
                      int64_t step, int64_t j0, int64_t count, int32_t *inputs, int32_t *targets,
                      char *err, size_t err_size);

/* A context-parallel rank's share of a micro-batch: of each of the count
 * sequences j0, j0+1, ..., the tokens at the npos global positions pos[]
 * (NULL: 0..npos-1), into inputs/targets laid out [count][npos]; the target
 * of position t is the token at t + 1 of the same sequence, so every split
 * of the sequence reads the single-rank run's inputs and targets. False as
 * hx_rt_data_sequence (also for a position outside the sequence). */
bool hx_rt_data_batch_at(const struct hx_rt_data *d, int64_t seq_len, int64_t global_batch,
                         int64_t step, int64_t j0, int64_t count, const int *pos, int64_t npos,
                         int32_t *inputs, int32_t *targets, char *err, size_t err_size);

/* A short description for the banner, e.g. "llm.c shard (uint16) x.bin:
 * 123456 tokens" or "synthetic: 1048576 tokens, seed 1". */
void hx_rt_data_describe(const struct hx_rt_data *d, const char *path, char *buf, size_t size);

/* Writes tokens[0..n) as an llm.c shard: magic 20240520/version 1 with uint16
 * tokens when every token fits (and force_u32 is false), else magic
 * 20240801/version 7 with uint32 tokens. Used by hexic-shard and the tests. */
bool hx_rt_shard_write(const char *path, const uint32_t *tokens, int64_t n, bool force_u32,
                       char *err, size_t err_size);

#endif
