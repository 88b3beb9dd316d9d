/* UTF-8 as RFC 3629 defines it: what hexic accepts in names (passes/sema.c)
 * and in plan.json (json.c), and how the JSON writer and reader encode it. */
#ifndef HX_UTF8_H
#define HX_UTF8_H

#include <stddef.h>
#include <stdint.h>

/* The length (1 to 4) of the well-formed sequence at p, which has avail
 * bytes, and its code point in *cp; 0 when the bytes there are not UTF-8
 * (a stray continuation byte, a truncated sequence, an overlong form, a
 * surrogate, or a code point above U+10FFFF). */
int hx_utf8_decode(const char *p, size_t avail, uint32_t *cp);

/* The length (1 to 4) of the printable character at p: well-formed UTF-8
 * that is not a control character (below U+0020, or DEL); 0 otherwise.
 * Diagnostics, short names and sema's name check all draw this line. */
int hx_utf8_printable(const char *p, size_t avail);

/* Writes code point cp (at most U+10FFFF, not a surrogate) as UTF-8 into
 * out, which has room for 4 bytes; returns the number of bytes. */
int hx_utf8_encode(uint32_t cp, char *out);

#endif
