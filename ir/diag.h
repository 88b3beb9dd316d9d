/* Diagnostics in the GCC/Clang form:
 *   file:line:col: error: message
 *     source line
 *         ^
 * Errors are counted; after HX_MAX_ERRORS the run stops reporting (and the
 * driver stops) so a garbage file cannot flood the terminal. */
#ifndef HX_DIAG_H
#define HX_DIAG_H

#include <stdio.h>

#include "loc.h"

enum { HX_MAX_ERRORS = 20 };

/* Exit codes of the hexic command. */
enum hx_exit {
  HX_EXIT_OK = 0,
  HX_EXIT_INPUT = 1,      /* errors in the .hx input */
  HX_EXIT_USAGE = 2,      /* bad command line */
  HX_EXIT_INFEASIBLE = 3, /* no plan fits the cluster */
  HX_EXIT_INTERNAL = 70,  /* a bug in hexic (EX_SOFTWARE) */
};

/* Where diagnostics go; stderr unless a test redirects it. */
void hx_diag_set_stream(FILE *f);
void hx_diag_reset(void);

void hx_error(struct location loc, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void hx_warning(struct location loc, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A note attached to the previous error or warning ("note: did you mean ...").
 * Printed only if that diagnostic was printed. */
void hx_note(struct location loc, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* An error with no source position ("hexic: error: ..."). */
void hx_error_plain(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* An internal consistency failure: prints and exits 70. */
_Noreturn void hx_internal_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

int hx_error_count(void);
/* True once HX_MAX_ERRORS errors were reported: callers should stop early. */
int hx_too_many_errors(void);

/* Edit distance helper for "did you mean" suggestions: returns the candidate
 * closest to name, or NULL if none is close enough to be a plausible typo. */
const char *hx_nearest_name(const char *name, const char *const *candidates, int ncandidates);

#endif
