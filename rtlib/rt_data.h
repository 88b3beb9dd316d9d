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
 * Every token is checked against the vocabulary when the stream is opened.
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

/* An open token stream. The file is mapped read-only; treat the fields as
 * read-only. */
struct hx_rt_data {
  enum hx_rt_data_kind kind;
  int64_t ntokens;    /* N */
  int64_t vocab;      /* V */
  uint64_t seed;      /* synthetic stream only */
  const void *tokens; /* first token (uint16 or uint32); NULL when synthetic */
  void *map;          /* the whole mapping; NULL when synthetic */
  size_t map_size;
};

/* Opens path (NULL or "": the synthetic stream of seed) and checks it: magic,
 * version, that the file holds the header's token count, that N > seq_len + 1
 * (at least one full sequence plus its last target), every token < vocab.
 * On failure returns false with a message naming the file in err; d is then
 * left closed. */
bool hx_rt_data_open(struct hx_rt_data *d, const char *path, enum hx_rt_data_format format,
                     int64_t vocab, int64_t seq_len, int64_t seed, char *err, size_t err_size);

/* Unmaps; safe on a closed or synthetic stream. */
void hx_rt_data_close(struct hx_rt_data *d);

/* tok[k], 0 <= k < ntokens. */
uint32_t hx_rt_data_token(const struct hx_rt_data *d, int64_t k);

/* Start offset of global sequence j of step s (global batch B, length T). */
int64_t hx_rt_data_offset(int64_t ntokens, int64_t seq_len, int64_t global_batch, int64_t step,
                          int64_t j);

/* Fills inputs[0..T) and targets[0..T) (either may be NULL) with global
 * sequence j of step s. */
void hx_rt_data_sequence(const struct hx_rt_data *d, int64_t seq_len, int64_t global_batch,
                         int64_t step, int64_t j, int32_t *inputs, int32_t *targets);

/* Fills count consecutive sequences j0, j0+1, ... (a micro-batch) into
 * inputs/targets laid out [count][T]. */
void hx_rt_data_batch(const struct hx_rt_data *d, int64_t seq_len, int64_t global_batch,
                      int64_t step, int64_t j0, int64_t count, int32_t *inputs, int32_t *targets);

/* A short description for the banner, e.g. "llm.c shard (uint16) x.bin:
 * 123456 tokens" or "synthetic: 1048576 tokens, seed 1". */
void hx_rt_data_describe(const struct hx_rt_data *d, const char *path, char *buf, size_t size);

/* Writes tokens[0..n) as an llm.c shard: magic 20240520/version 1 with uint16
 * tokens when every token fits (and force_u32 is false), else magic
 * 20240801/version 7 with uint32 tokens. Used by hexic-shard and the tests. */
bool hx_rt_shard_write(const char *path, const uint32_t *tokens, int64_t n, bool force_u32,
                       char *err, size_t err_size);

#endif
