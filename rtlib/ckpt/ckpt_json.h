/* A small JSON reader for the checkpoint formats (safetensors headers,
 * model.safetensors.index.json, Hugging Face config.json). The runtime stack
 * may not include the compiler's ir/text/json.h, so this is its own: RFC 8259
 * values into a tree of nodes; strings are unescaped to UTF-8 (\uXXXX and
 * surrogate pairs included); numbers keep their text. An object's member
 * given twice keeps its first place and its last value, as Python's json
 * reads it (the object's `duplicate` names it, for a reader that refuses).
 *
 * Bounded so hostile input fails with a message naming the limit, never a
 * crash or a hang: nesting depth, string length, the file's size (the
 * caller's limit); time and memory are linear in the input (strings take
 * their own length; duplicates are found by sorting, O(n log n)). */
#ifndef HX_CKPT_JSON_H
#define HX_CKPT_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum {
  HX_JSON_MAX_DEPTH = 64,         /* arrays and objects inside each other */
  HX_JSON_MAX_STRING = 1 << 20,   /* bytes of one string or member name, as written */
  HX_JSON_CONFIG_LIMIT = 1 << 20, /* bytes of a config.json */
};

enum hx_json_kind {
  HX_JSON_NULL,
  HX_JSON_BOOL,
  HX_JSON_NUMBER,
  HX_JSON_STRING,
  HX_JSON_ARRAY,
  HX_JSON_OBJECT
};

struct hx_json {
  enum hx_json_kind kind;
  bool boolean;
  double number;
  char *text;            /* a string's value; a number's text */
  char *key;             /* the member name when in an object */
  struct hx_json *child; /* first element or member */
  struct hx_json *next;  /* next sibling */
  int count;             /* elements or members */
  char *duplicate;       /* an object's member name given more than once, or NULL */
};

/* Parses text[0..len) (one value, whitespace around it). NULL on an error,
 * with the byte offset and the reason in err. Free with hx_json_free. */
struct hx_json *hx_json_parse(const char *text, size_t len, char *err, size_t err_size);
void hx_json_free(struct hx_json *v);

/* The member `key` of an object (NULL when absent or v is not an object). */
const struct hx_json *hx_json_get(const struct hx_json *v, const char *key);

/* A number that is an integer in [lo, hi] (no fraction, no exponent). */
bool hx_json_int(const struct hx_json *v, int64_t lo, int64_t hi, int64_t *out);

/* Reads a whole file, a regular file of at most limit bytes (a larger one
 * is refused naming the limit; a FIFO or device by its kind), and parses
 * it; err names the file. */
struct hx_json *hx_json_parse_file(const char *path, size_t limit, char *err, size_t err_size);

#endif
