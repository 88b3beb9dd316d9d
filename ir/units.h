/* Units of the .hx language. Numbers are stored scaled to one base unit per
 * kind — bytes, bytes per second, seconds — so no later pass ever sees "GiB"
 * or "Gbps". Bit rates are divided by 8 (1 Gbps = 1.25e8 bytes/s). */
#ifndef HX_UNITS_H
#define HX_UNITS_H

#include <stdbool.h>

#include "arena.h"
#include "ast.h"

/* False when word is not a unit; otherwise its kind and scale (one unit in
 * bytes, bytes/s or seconds). Case-sensitive: "Mb" is not "MB". */
bool hx_unit_lookup(const char *word, enum hx_unit_kind *kind, double *scale);
/* The known unit nearest to word (for "did you mean"), or NULL. */
const char *hx_unit_nearest(const char *word);
/* Human name of a unit kind: "size", "bandwidth", "time", "plain number". */
const char *hx_unit_kind_name(enum hx_unit_kind kind);
/* Example units of a kind for messages: "B, KB, MB, GB, TB, KiB, MiB, GiB, TiB". */
const char *hx_unit_examples(enum hx_unit_kind kind);
/* Parses a numeric literal as the scanner matched it ("-3e-4", "80", ".5")
 * into v: number, is_integer, integer, overflow. Does not touch the unit. */
void hx_number_literal(const char *text, struct hx_value *v);
/* Applies a unit to a parsed literal: scales number, sets unit, unit_text. */
void hx_apply_unit(struct hx_value *v, const char *unit_text, enum hx_unit_kind kind, double scale);
/* A size for a message, magnitude only: "1.2 GiB", or MiB below a GiB (a
 * shortfall of a few MiB printed as "0.0 GiB more" said nothing). */
const char *hx_bytes_text(struct hx_arena *a, double bytes);

#endif
