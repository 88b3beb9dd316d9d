#include "diag.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "arena.h"
#include "ir/text/utf8.h"

static FILE *diag_stream;
static int errors;
static int last_printed = 1; /* whether the last error/warning was printed, for notes */

void hx_diag_set_stream(FILE *f) { diag_stream = f; }

void hx_diag_reset(void) {
  errors = 0;
  last_printed = 1;
}

static FILE *out(void) { return diag_stream ? diag_stream : stderr; }

/* Where every line starts, so hx_source_line is a lookup: a file with
 * thousands of diagnostics must not be rescanned from its start for each. */
static void index_lines(struct hx_arena *a, struct hx_source *src) {
  long n = 1;
  for (long i = 0; i < src->len; i++)
    n += src->text[i] == '\n';
  long *starts = HX_NEW_ARRAY(a, long, n);
  long k = 0;
  starts[k++] = 0;
  for (long i = 0; i < src->len; i++)
    if (src->text[i] == '\n')
      starts[k++] = i + 1;
  src->line_starts = starts;
  src->nlines = n;
}

void hx_source_init(struct hx_arena *a, struct hx_source *src, const char *name, const char *data,
                    size_t len) {
  src->name = hx_strdup(a, name);
  src->text = hx_strndup(a, data, len);
  src->len = (long)len;
  index_lines(a, src);
}

const char *hx_source_line(const struct hx_source *src, int line) {
  if (!src || !src->text || line < 1)
    return NULL;
  if (src->line_starts)
    return line <= src->nlines ? src->text + src->line_starts[line - 1] : NULL;
  /* A source built by hand (a test) has no index: scan. */
  const char *p = src->text, *end = src->text + src->len;
  for (int l = 1; l < line; p++) {
    if (p >= end)
      return NULL;
    if (*p == '\n')
      l++;
  }
  return p;
}

/* The byte length of the printable character at p[i] (p[to] excluded): 1
 * for printable ASCII, 2-4 for a UTF-8 sequence, 0 for a control byte or a
 * byte that is not UTF-8, which print as '?' so a diagnostic never sends
 * the terminal an escape sequence or bytes it cannot show. */
static long char_at(const char *p, long i, long to) { return hx_utf8_printable(p + i, (size_t)(to - i)); }

/* Prints the line that loc points into, and a caret under its column. Tabs in
 * the prefix are kept so the caret lines up in a terminal; other control bytes
 * (a NUL in a fuzzed file) and bytes that are not UTF-8 print as '?', the
 * caret counts one column per character, and very long lines are cut around
 * the caret so a 10 MB line does not become a 10 MB diagnostic. */
static void print_source_line(struct location loc) {
  const struct hx_source *src = loc.src;
  if (!src || !src->text || loc.line < 1)
    return;
  const char *end = src->text + src->len;
  const char *p = hx_source_line(src, loc.line); /* indexed: no rescan per diagnostic */
  if (!p)
    p = end;
  const char *eol = p;
  while (eol < end && *eol != '\n')
    eol++;
  long width = eol - p;
  long col = loc.col > 0 ? loc.col - 1 : 0;
  if (col > width)
    col = width;
  enum { WINDOW = 160 };
  long from = 0, to = width;
  if (width > WINDOW) {
    from = col > WINDOW / 2 ? col - WINDOW / 2 : 0;
    to = from + WINDOW < width ? from + WINDOW : width;
  }
  FILE *f = out();
  fputs("  ", f);
  if (from > 0)
    fputs("...", f);
  for (long i = from; i < to;) {
    long n = char_at(p, i, to);
    if (n > 1)
      fwrite(p + i, 1, (size_t)n, f);
    else
      fputc(p[i] == '\t' || n == 1 ? p[i] : '?', f);
    i += n > 1 ? n : 1;
  }
  if (to < width)
    fputs("...", f);
  fputs("\n  ", f);
  if (from > 0)
    fputs("   ", f);
  for (long i = from; i < col;) { /* one column per character shown above */
    long n = char_at(p, i, to);
    fputc(p[i] == '\t' ? '\t' : ' ', f);
    i += n > 1 ? n : 1;
  }
  fputs("^\n", f);
}

static void vreport(const char *kind, struct location loc, const char *fmt, va_list ap) {
  FILE *f = out();
  if (loc.src)
    fprintf(f, "%s:%d:%d: %s: ", loc.src->name, loc.line, loc.col, kind);
  else
    fprintf(f, "hexic: %s: ", kind);
  vfprintf(f, fmt, ap);
  fputc('\n', f);
  print_source_line(loc);
}

/* Counts an error and prints it unless the limit was reached; the error that
 * reaches the limit is followed by the "too many errors" line. */
static void verror(struct location loc, const char *fmt, va_list ap) {
  errors++;
  last_printed = errors <= HX_MAX_ERRORS;
  if (!last_printed)
    return;
  vreport("error", loc, fmt, ap);
  if (errors == HX_MAX_ERRORS)
    fprintf(out(), "hexic: fatal error: too many errors (%d), stopping\n", HX_MAX_ERRORS);
}

void hx_error(struct location loc, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  verror(loc, fmt, ap);
  va_end(ap);
}

void hx_warning(struct location loc, const char *fmt, ...) {
  last_printed = errors < HX_MAX_ERRORS;
  if (!last_printed)
    return;
  va_list ap;
  va_start(ap, fmt);
  vreport("warning", loc, fmt, ap);
  va_end(ap);
}

void hx_note(struct location loc, const char *fmt, ...) {
  if (!last_printed)
    return;
  va_list ap;
  va_start(ap, fmt);
  vreport("note", loc, fmt, ap);
  va_end(ap);
}

void hx_error_plain(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  verror((struct location){0}, fmt, ap);
  va_end(ap);
}

void hx_internal_error(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fputs("hexic: internal error: ", out());
  vfprintf(out(), fmt, ap);
  fputc('\n', out());
  va_end(ap);
  exit(HX_EXIT_INTERNAL);
}

int hx_error_count(void) { return errors; }
int hx_too_many_errors(void) { return errors >= HX_MAX_ERRORS; }

/* Levenshtein distance, capped: names are short identifiers. */
static int edit_distance(const char *a, const char *b) {
  size_t la = strlen(a), lb = strlen(b);
  if (la > 63 || lb > 63)
    return 99;
  int row[64];
  for (size_t j = 0; j <= lb; j++)
    row[j] = (int)j;
  for (size_t i = 1; i <= la; i++) {
    int diag = row[0];
    row[0] = (int)i;
    for (size_t j = 1; j <= lb; j++) {
      int up = row[j];
      int cost = a[i - 1] == b[j - 1] ? 0 : 1;
      int best = diag + cost;
      if (row[j] + 1 < best)
        best = row[j] + 1;
      if (row[j - 1] + 1 < best)
        best = row[j - 1] + 1;
      row[j] = best;
      diag = up;
    }
  }
  return row[lb];
}

const char *hx_nearest_name(const char *name, const char *const *candidates, int n) {
  const char *best = NULL;
  int best_d = 99;
  for (int i = 0; i < n; i++) {
    int d = edit_distance(name, candidates[i]);
    if (d < best_d) {
      best_d = d;
      best = candidates[i];
    }
  }
  /* A plausible typo: at most a third of the name's letters changed. */
  int limit = (int)strlen(name) / 3 + 1;
  return best_d <= limit ? best : NULL;
}
