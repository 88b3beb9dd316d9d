/* The IR's stable text forms: the dumps behind --print-ir / --print-after
 * and the golden tests (dump.c, dump_plan.c), and the names enumerations are
 * written with in .hx files, dumps and plan.json. JSON lives beside them in
 * json.h. */
#ifndef HX_DUMP_H
#define HX_DUMP_H

#include <stdio.h>

#include "ir/hexic.h"

/* Stable textual dumps used by --print-ir / --print-after and golden tests. */
void hx_dump_ast(const struct hx_ctx *ctx, FILE *f);
void hx_dump_model(const struct hx_ctx *ctx, FILE *f);
void hx_dump_cluster(const struct hx_ctx *ctx, FILE *f);
void hx_dump_plan(const struct hx_ctx *ctx, const struct hx_plan *plan, FILE *f);

/* The names the train block's enumerations are written with, indexed by the
 * enums of ir/model.h, NULL-terminated (defined in ir/text/dump.c, which prints them; sema reads them). */
extern const char *const hx_precision_names[];
extern const char *const hx_recompute_names[];
extern const char *const hx_optimizer_names[];
extern const char *const hx_schedule_names[];
extern const char *const hx_sharding_names[];

#endif
