/* The parse pass: reads every input file into the arena, registers it as a
 * source (so diagnostics can show the line), and parses it into ctx->ast.
 * Blocks from all files land in one AST, in command-line order. */
#include <stdlib.h>
#include <string.h>

#include "grammar/parse_state.h"
#include "frontend.h"
#include "passes.h"

struct hx_source *hx_add_source(struct hx_ctx *ctx, const char *name, const char *data, size_t len) {
  /* Sources are few and all are added before parsing starts (locations point
   * into ctx->sources), so growing by copying is fine. */
  struct hx_source *arr = HX_NEW_ARRAY(&ctx->arena, struct hx_source, ctx->nsources + 1);
  if (ctx->nsources)
    memcpy(arr, ctx->sources, sizeof *arr * (size_t)ctx->nsources);
  struct hx_source *src = &arr[ctx->nsources++];
  hx_source_init(&ctx->arena, src, name, data, len);
  ctx->sources = arr;
  return src;
}

bool hx_parse_sources(struct hx_ctx *ctx) {
  for (int i = 0; i < ctx->nsources && !hx_too_many_errors(); i++)
    hx_parse_file(&ctx->arena, &ctx->sources[i], &ctx->ast);
  return hx_error_count() == 0;
}

bool hx_pass_parse(struct hx_ctx *ctx) {
  for (int i = 0; i < ctx->opt.ninputs; i++) {
    const char *path = ctx->opt.inputs[i];
    size_t len = 0;
    char *data = hx_read_input(path, &len); /* reports why not */
    if (!data)
      continue;
    hx_add_source(ctx, path, data, len);
    free(data);
  }
  if (hx_error_count() > 0)
    return false;
  return hx_parse_sources(ctx);
}

int hx_check_buffer(const char *name, const char *data, size_t len) {
  struct hx_ctx ctx;
  memset(&ctx, 0, sizeof ctx);
  hx_arena_init(&ctx.arena);
  hx_diag_reset();
  hx_add_source(&ctx, name, data, len);
  if (hx_parse_sources(&ctx) && hx_pass_sema(&ctx) && hx_error_count() == 0) {
    hx_verify_model(&ctx);
    hx_verify_cluster(&ctx);
    if (hx_pass_cluster_table(&ctx))
      hx_verify_cluster(&ctx);
  }
  int errors = hx_error_count();
  hx_arena_free(&ctx.arena);
  return errors;
}
