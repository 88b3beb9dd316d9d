/* One escaping function per language hexic writes: every user string (model,
 * GPU, node and device names, the data and checkpoint paths) and every path
 * that reaches a generated file goes through the one for that file's
 * language, so a name holding a newline, a comment end, "$(touch pwned)" or
 * a backtick can neither plant code nor break the file. Sema already
 * refuses control characters and bytes that are not UTF-8 in names; these
 * functions do not rely on it. JSON (plan.json, trace.json) goes through
 * hx_json_string of ir/text/json.h. Each returns a string in the arena; a
 * NULL string counts as "" (hx_esc_c_string writes NULL for it). */
#ifndef HX_CODEGEN_ESCAPE_H
#define HX_CODEGEN_ESCAPE_H

#include "ir/arena.h"

/* A C string literal, quotes included ("NULL" for s == NULL): '"' and '\\'
 * escaped, '?' as \? (no trigraph), every byte outside printable ASCII as a
 * three-digit octal escape. */
const char *hx_esc_c_string(struct hx_arena *a, const char *s);

/* Text for a C comment, block or line: '*', '\\' and '?' (which could close
 * a block comment, open one inside it, splice the next line into a line
 * comment, or form a trigraph that does), control bytes and bytes that are
 * not UTF-8 are written as the text \xNN; valid UTF-8 stays as it is. */
const char *hx_esc_c_comment(struct hx_arena *a, const char *s);

/* A Makefile variable value: '$' as $$, '#' as \#, a control byte as '?'
 * (make has no escape for a newline in a value), and a final '\\' kept off
 * the end of the line (it would continue it). */
const char *hx_esc_make(struct hx_arena *a, const char *s);

/* A word for bash (launch.sh, slurm.sbatch): s in single quotes, each ' in
 * it as '\'' (close, an escaped quote, reopen); every other byte, a newline
 * included, stays literal there. */
const char *hx_esc_shell(struct hx_arena *a, const char *s);

/* A value on an #SBATCH line, which sbatch splits at blanks and quotes by
 * its own rules: only [A-Za-z0-9._-] are kept, anything else becomes '_'. */
const char *hx_esc_slurm(struct hx_arena *a, const char *s);

/* Text in a Markdown heading or table cell: the punctuation that could
 * change its rendering there (\ ` * _ [ ] < > | # ~ &; '|' ends a cell)
 * backslash-escaped, control bytes and bytes that are not UTF-8 as '?'. */
const char *hx_esc_markdown(struct hx_arena *a, const char *s);

/* Text or an attribute value in XML (plan.svg): & < > " ' as entities,
 * control bytes and bytes that are not UTF-8 as '?'. */
const char *hx_esc_xml(struct hx_arena *a, const char *s);

#endif
