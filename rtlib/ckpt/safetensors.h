/* safetensors files (Hugging Face's format): an 8-byte little-endian header
 * length N, N bytes of JSON — {"name": {"dtype": "F32", "shape": [r, c],
 * "data_offsets": [begin, end]}, ..., "__metadata__": {string: string}} —
 * then the tensors' bytes, offsets counted from the end of the header.
 *
 * The reader checks everything before anything is used: the header length
 * against the file, the JSON, every tensor's dtype, shape and offsets (inside
 * the file, the bytes its dtype and shape need, no two overlapping); each
 * error names the file and the tensor. The writer writes PATH.tmp and renames
 * it over PATH once complete, so a failed write leaves nothing behind. */
#ifndef HX_CKPT_SAFETENSORS_H
#define HX_CKPT_SAFETENSORS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "user_file.h" /* hx_rt_printable: how a tensor's name is shown */

enum { HX_ST_MAX_DIMS = 8 };
/* The longest header read: safetensors' own bound (its reader refuses
 * more), 100 MB; parsing it is linear in time and memory. */
#define HX_ST_MAX_HEADER UINT64_C(100000000)

struct hx_st_tensor {
  char *name;
  char dtype[16]; /* as the file spells it: F32, BF16, F16, I64, ... */
  int elem_bytes;
  int ndim;
  int64_t shape[HX_ST_MAX_DIMS];
  uint64_t begin, end; /* data_offsets, from the end of the header */
};

struct hx_st_file {
  char *path;
  int fd;
  uint64_t size, data_start;
  int ntensors;
  struct hx_st_tensor *tensors;
  struct hx_st_tensor **by_name; /* the tensors sorted by name (hx_st_find's binary search) */
  char *hexic_model;             /* __metadata__'s "hexic_model" (the model line hexic-ckpt import
                                    records) as hx_rt_printable shows it, or NULL */
  char *hexic_export;            /* __metadata__'s "hexic" ("step N; plan F; MODEL LINE", what
                                    hexic-ckpt export records), printable, or NULL */
};

/* Opens and checks path (a regular file: a FIFO or a device is refused
 * before it is read); false with "PATH: ..." in err. A name given twice in
 * the header is refused. Messages show names and paths printable
 * (hx_rt_printable): a file's names cannot write terminal escapes. */
bool hx_st_open(struct hx_st_file *f, const char *path, char *err, size_t err_size);
void hx_st_close(struct hx_st_file *f);

/* The tensor named `name`, or NULL. */
const struct hx_st_tensor *hx_st_find(const struct hx_st_file *f, const char *name);

/* Elements of t (the product of its shape; 1 for a scalar). */
int64_t hx_st_numel(const struct hx_st_tensor *t);

/* Rows [r0, r1) x columns [c0, c1) of t seen as a matrix [shape[0],
 * product of the rest] (a vector of n: [1, n]) into dst as float, packed
 * row-major. F32, BF16 and F16 are read; another dtype is an error naming
 * the tensor. */
bool hx_st_read_f32(const struct hx_st_file *f, const struct hx_st_tensor *t, int64_t r0,
                    int64_t r1, int64_t c0, int64_t c1, float *dst, char *err, size_t err_size);

/* One tensor to write: its name, shape, dtype (F32 or BF16) and a function
 * that fills its numel floats. */
struct hx_st_out {
  const char *name;
  int ndim;
  int64_t shape[2];
  bool (*fill)(void *arg, int index, float *dst, char *err, size_t err_size);
  void *arg;
};

/* Writes the tensors in order ("BF16": rounded to nearest even) with
 * metadata {"format": "pt"} plus metadata_key: metadata_value when given. */
bool hx_st_write(const char *path, const struct hx_st_out *t, int n, bool bf16,
                 const char *metadata_key, const char *metadata_value, char *err, size_t err_size);

/* A model's weights: one safetensors file, or the shards a
 * model.safetensors.index.json (a path ending in .json) names beside it. */
enum { HX_ST_MAX_SHARDS = 64 };
struct hx_st_set {
  int n;
  struct hx_st_file files[HX_ST_MAX_SHARDS];
};

/* Opens path into s (every distinct shard of an index's weight_map once;
 * each tensor the index names must be in the file it names); false with the
 * reason, naming the file and the tensor, in err. Close with hx_st_set_close
 * either way. */
bool hx_st_set_open(struct hx_st_set *s, const char *path, char *err, size_t err_size);
void hx_st_set_close(struct hx_st_set *s);
/* The first file of s holding `name` (in *file), or NULL. */
const struct hx_st_tensor *hx_st_set_find(const struct hx_st_set *s, const char *name,
                                          const struct hx_st_file **file);

/* float -> bf16 bits (round to nearest even; NaN stays NaN), and back. */
uint16_t hx_st_to_bf16(float x);
float hx_st_from_bf16(uint16_t b);

/* path's folder with its slash, to put before a name beside it ("" for a
 * bare name): an index's shards, an export's config.json. */
void hx_st_folder_prefix(const char *path, char *buf, size_t size);

#endif
