/* A small JSON reader (for plan.json) and writer helpers with deterministic
 * number formatting (for every JSON file hexic writes). */
#ifndef HX_JSON_H
#define HX_JSON_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "ir/arena.h"
#include "ir/loc.h"

enum hx_json_kind { HX_JSON_NULL, HX_JSON_BOOL, HX_JSON_NUMBER, HX_JSON_STRING, HX_JSON_ARRAY,
                    HX_JSON_OBJECT };

struct hx_json {
  enum hx_json_kind kind;
  struct location loc; /* where the value starts, for errors */
  bool boolean;
  double number;
  const char *string;
  int nitems;
  struct hx_json *items; /* array elements, or object values */
  const char **keys;     /* object keys, parallel to items */
};

/* Parses src->text as RFC 8259 JSON: strings take every escape, \uXXXX
 * and surrogate pairs included (decoded to UTF-8; \u0000 is refused, as
 * names are C strings), and their raw bytes must be UTF-8. On an error
 * reports "name:line:col: error: ..." through hx_error and returns NULL.
 * Nesting deeper than 64 is an error. */
struct hx_json *hx_json_parse(struct hx_arena *a, const struct hx_source *src);
/* The value of `key` in an object, NULL when absent or not an object. */
const struct hx_json *hx_json_get(const struct hx_json *obj, const char *key);
/* True when v is a number with an integer value in [lo, hi]; *out gets it. */
bool hx_json_int(const struct hx_json *v, int64_t lo, int64_t hi, int64_t *out);

/* Writers. Strings per RFC 8259: '"' and '\\' escaped, control characters
 * (and DEL) as short escapes or \u00XX, UTF-8 as it is, and a byte that is
 * not UTF-8 (which JSON text cannot hold) as \ufffd; hx_json_parse reads
 * every string back that is valid UTF-8. Numbers: integers that a double
 * holds exactly print as integers, others as the shortest decimal that reads
 * back as the same double (hx_shortest_double), non-finite ones as null. */
void hx_json_string(FILE *f, const char *s);
void hx_json_number(FILE *f, double v);
/* The shortest decimal in %g form that strtod reads back as v exactly:
 * "2e-05", "0.1", "0.4687500000000001" (where %.17g writes
 * "2.0000000000000002e-05", "0.10000000000000001"). size >= 32. */
void hx_shortest_double(char *buf, size_t size, double v);

#endif
