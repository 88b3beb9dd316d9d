/* State shared by the flex scanner and the bison parser of one source file.
 * Both are reentrant: everything lives here or in the compilation's arena, so
 * several files (or fuzzer inputs) are parsed one after another with no
 * global state left behind. */
#ifndef HX_PARSE_STATE_H
#define HX_PARSE_STATE_H

#include "ir/arena.h"
#include "ir/ast.h"
#include "ir/loc.h"
#include "ir/units.h"

struct hx_parse_state {
  struct hx_arena *arena;
  const struct hx_source *src;
  struct hx_ast *ast;
  /* Scanner position of the next byte (1-based). */
  int line, col;
  int brace_depth, bracket_depth; /* newlines separate fields only inside braces */
  const char *stray_end;          /* just past the last run of stray bytes reported */
  struct location open_brace;     /* of the block being parsed, for "to match this '{'" */
  /* Context for clang-like syntax messages. */
  const char *block_keyword;   /* keyword of the block being parsed */
  const char *last_field;      /* name of the field being parsed */
  const char *last_token_text; /* text of the last identifier or string scanned */
  const char *prev_token_text; /* ... of the token before it (NULL if another kind) */
};

struct location hx_loc_at(const struct hx_parse_state *ps, int line, int col);
/* Shortens a user-written name for a message so a 10 MB identifier does not
 * become a 10 MB diagnostic. */
const char *hx_short_text(struct hx_arena *a, const char *s);

/* Parses one file into ps->ast (appending). Errors go through ir/diag.h. */
void hx_parse_file(struct hx_arena *arena, const struct hx_source *src, struct hx_ast *ast);

#endif
