/* The parse pass: reads every input file into the arena, registers it as a
 * source (so diagnostics can show the line), and parses it into ctx->ast.
 * Blocks from all files land in one AST, in command-line order. */
#include <errno.h>
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
  src->name = hx_strdup(&ctx->arena, name);
  src->text = hx_strndup(&ctx->arena, data, len);
  src->len = (long)len;
  ctx->sources = arr;
  return src;
}

/* Reads a whole file (any size, pipes too) into a malloc'd buffer; NULL with
 * errno set on failure. */
static char *read_file(const char *path, size_t *len_out) {
  FILE *f = fopen(path, "rb");
  if (!f)
    return NULL;
  char *buf = NULL;
  size_t cap = 0, len = 0;
  int err = 0;
  for (;;) {
    if (len == cap) {
      size_t bigger_cap = cap ? cap * 2 : 1 << 16;
      char *bigger = realloc(buf, bigger_cap);
      if (!bigger) {
        err = ENOMEM;
        break;
      }
      buf = bigger;
      cap = bigger_cap;
    }
    errno = 0;
    size_t got = fread(buf + len, 1, cap - len, f);
    len += got;
    if (got == 0) {
      if (ferror(f)) /* a directory: EISDIR */
        err = errno ? errno : EIO;
      break;
    }
  }
  fclose(f);
  if (err) {
    free(buf);
    errno = err;
    return NULL;
  }
  *len_out = len;
  return buf;
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
    char *data = read_file(path, &len);
    if (!data) {
      hx_error_plain("cannot read '%s': %s", path, strerror(errno));
      continue;
    }
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
