/* Source locations. Every token, AST node and IR node carries one so that any
 * pass can point a diagnostic at the text the user wrote. Input files are
 * read by ir/source.c and indexed by ir/diag.c, which prints their lines
 * (declared here: a source is what a location points into). */
#ifndef HX_LOC_H
#define HX_LOC_H

#include <stddef.h>

struct hx_source {
  const char *name; /* path as given on the command line */
  const char *text; /* whole file, NUL-terminated copy (may contain NULs) */
  long len;         /* bytes in text, excluding the terminating NUL */
  /* Offset in text of the start of each line, line_starts[0] == 0; NULL for
   * a source built by hand (then lines are found by scanning). */
  const long *line_starts;
  long nlines;
};

struct location {
  const struct hx_source *src; /* NULL for built-in or synthesised nodes */
  int line;                    /* 1-based */
  int col;                     /* 1-based, in bytes */
};

struct hx_arena;

/* The most bytes hexic reads from one input file (a .hx source or a
 * plan.json): far above any real input, small enough that no read is
 * unbounded. */
#define HX_INPUT_LIMIT (64L << 20)

/* Reads the regular file at path whole into a malloc'd buffer (the caller
 * frees it) and sets *len. A missing or unreadable file, a directory, a
 * device, a pipe, or a file over HX_INPUT_LIMIT bytes is reported through
 * hx_error_plain ("cannot read 'PATH': ...") and gives NULL. */
char *hx_read_input(const char *path, size_t *len);

/* Fills src with a NUL-terminated arena copy of data, named name, and its
 * line index. */
void hx_source_init(struct hx_arena *a, struct hx_source *src, const char *name, const char *data,
                    size_t len);

/* The first byte of line (1-based) of src, NULL when src has fewer lines. */
const char *hx_source_line(const struct hx_source *src, int line);

#endif
