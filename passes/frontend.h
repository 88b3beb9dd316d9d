/* Entry points of the front end beyond the pass list: checking one in-memory
 * file (the fuzzer and the mutation test), and registering sources. */
#ifndef HX_FRONTEND_H
#define HX_FRONTEND_H

#include <stddef.h>

#include "ir/hexic.h"

/* Runs parse, sema and cluster-table on one in-memory file, named name in
 * diagnostics, with a fresh context and arena; resets the diagnostic counts
 * first. Returns the number of errors. Frees everything it allocated. */
int hx_check_buffer(const char *name, const char *data, size_t len);

/* Registers data (copied into the arena, NUL-terminated) as a source of ctx
 * and returns it; the parse pass parses every registered source. */
struct hx_source *hx_add_source(struct hx_ctx *ctx, const char *name, const char *data, size_t len);

/* Parses ctx->sources[i] into ctx->ast (no file reading). */
bool hx_parse_sources(struct hx_ctx *ctx);

#endif
