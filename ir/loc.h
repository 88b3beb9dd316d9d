/* Source locations. Every token, AST node and IR node carries one so that any
 * pass can point a diagnostic at the text the user wrote. */
#ifndef HX_LOC_H
#define HX_LOC_H

struct hx_source {
  const char *name; /* path as given on the command line */
  const char *text; /* whole file, NUL-terminated copy (may contain NULs) */
  long len;         /* bytes in text, excluding the terminating NUL */
};

struct location {
  const struct hx_source *src; /* NULL for built-in or synthesised nodes */
  int line;                    /* 1-based */
  int col;                     /* 1-based, in bytes */
};

#endif
