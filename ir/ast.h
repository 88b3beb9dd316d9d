/* The parse tree of .hx files: a list of blocks, each a list of `name = value`
 * fields. It knows nothing of what the fields mean; passes/sema.c checks them
 * and builds the model, train and cluster IR from it. */
#ifndef HX_AST_H
#define HX_AST_H

#include <stdbool.h>
#include <stdint.h>

#include "loc.h"

enum hx_value_kind {
  HX_V_NUMBER, /* 12, 3.5, 3e-4, 80 GiB, 10 Gbps, 2 us */
  HX_V_STRING, /* "A800" */
  HX_V_IDENT,  /* bf16, full, true */
  HX_V_LIST,   /* [a, b] */
};

enum hx_unit_kind {
  HX_UNIT_NONE,
  HX_UNIT_BYTES,     /* value in bytes */
  HX_UNIT_BANDWIDTH, /* value in bytes per second */
  HX_UNIT_TIME,      /* value in seconds */
};

struct hx_value {
  enum hx_value_kind kind;
  struct location loc;
  /* HX_V_NUMBER */
  bool is_integer;   /* written without '.' or exponent, and fits int64 */
  int64_t integer;   /* the literal as written, when is_integer */
  double number;     /* the value scaled by its unit (bytes, bytes/s, s) */
  bool overflow;     /* the literal does not fit a double or int64 when due */
  enum hx_unit_kind unit;
  const char *unit_text; /* "GiB", NULL when no unit */
  /* HX_V_STRING, HX_V_IDENT */
  const char *text;
  /* HX_V_LIST */
  struct hx_value *items;
  int nitems;
};

struct hx_field {
  const char *name;
  struct location loc; /* of the field name */
  struct hx_value value;
  struct hx_field *next;
};

enum hx_block_kind {
  HX_B_MODEL,   /* model "name" { ... } */
  HX_B_TRAIN,   /* train { ... } */
  HX_B_GPU,     /* gpu "name" { ... } */
  HX_B_NODE,    /* node "name" { ... } */
  HX_B_LINK,    /* link "a" "b" { ... } */
  HX_B_NETWORK, /* network { ... } */
  HX_B_PLANNER, /* planner { ... }: reserved, rejected by sema */
  HX_B_PROFILE, /* profile "gpu" { ... }: measured layer times (issue 18) */
  HX_B_EMULATION, /* emulation { host = "gpu" }: the machine --emulate runs on */
  HX_B_COUNT
};
/* The keyword of each block kind, indexed by enum hx_block_kind (the parser
 * recognises blocks by this table; defined in grammar/parse_util.c). */
extern const char *const hx_block_keywords[HX_B_COUNT];

struct hx_block {
  enum hx_block_kind kind;
  struct location loc; /* of the keyword */
  const char *name;    /* NULL for train/network/planner/emulation */
  struct location name_loc;
  const char *name2; /* second name of a link */
  struct location name2_loc;
  struct hx_field *fields;
  struct hx_block *next;
};

struct hx_ast {
  struct hx_block *first, *last;
};

#endif
