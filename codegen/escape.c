#include "escape.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "ir/text/utf8.h"

/* The escapes grow a byte to at most 4 (\ooo, \xNN, a quote pair aside). */
static char *output_for(struct hx_arena *a, const char *s) { return hx_alloc(a, 4 * strlen(s) + 8); }

/* A missing name (a hand-built plan in a test) escapes as the empty one. */
static const char *or_empty(const char *s) { return s ? s : ""; }

/* Copies the valid UTF-8 character at s (of n bytes) that is not a control
 * character to *o, advancing it, and returns its length; returns 0 and
 * copies nothing for a control byte or a byte that is not UTF-8. */
static size_t copy_printable_char(char **o, const char *s, size_t n) {
  uint32_t cp;
  int len = hx_utf8_decode(s, n, &cp);
  if (len == 0 || cp < 0x20 || cp == 0x7f)
    return 0;
  memcpy(*o, s, (size_t)len);
  *o += len;
  return (size_t)len;
}

const char *hx_esc_c_string(struct hx_arena *a, const char *s) {
  if (!s)
    return "NULL";
  char *out = output_for(a, s), *o = out;
  *o++ = '"';
  for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
    if (*p == '"' || *p == '\\' || *p == '?')
      o += sprintf(o, "\\%c", *p);
    else if (*p < 0x20 || *p >= 0x7f) /* octal: always three digits, so a digit after it is safe */
      o += sprintf(o, "\\%03o", *p);
    else
      *o++ = (char)*p;
  }
  *o++ = '"';
  *o = '\0';
  return out;
}

const char *hx_esc_c_comment(struct hx_arena *a, const char *s) {
  s = or_empty(s);
  char *out = output_for(a, s), *o = out;
  size_t n = strlen(s);
  for (size_t i = 0; i < n;) {
    size_t len = strchr("*\\?", s[i]) ? 0 : copy_printable_char(&o, s + i, n - i);
    if (len == 0) {
      o += sprintf(o, "\\x%02x", (unsigned char)s[i]);
      len = 1;
    }
    i += len;
  }
  *o = '\0';
  return out;
}

const char *hx_esc_make(struct hx_arena *a, const char *s) {
  s = or_empty(s);
  char *out = output_for(a, s), *o = out;
  for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
    if (*p == '$')
      *o++ = '$', *o++ = '$';
    else if (*p == '#')
      *o++ = '\\', *o++ = '#';
    else
      *o++ = *p < 0x20 || *p == 0x7f ? '?' : (char)*p;
  }
  if (o > out && o[-1] == '\\') /* an empty expansion after it: the line ends in ')' */
    o += sprintf(o, "$()");
  *o = '\0';
  return out;
}

/* Inside single quotes bash gives no byte a meaning but the quote itself,
 * which is closed, written escaped and reopened. */
const char *hx_esc_shell(struct hx_arena *a, const char *s) {
  s = or_empty(s);
  char *out = output_for(a, s), *o = out;
  *o++ = '\'';
  for (const char *p = s; *p; p++) {
    if (*p == '\'') {
      memcpy(o, "'\\''", 4);
      o += 4;
    } else {
      *o++ = *p;
    }
  }
  *o++ = '\'';
  *o = '\0';
  return out;
}

const char *hx_esc_slurm(struct hx_arena *a, const char *s) {
  s = or_empty(s);
  char *out = output_for(a, s), *o = out;
  for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
    bool keep = (*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') ||
                strchr("._-", *p);
    *o++ = keep ? (char)*p : '_';
  }
  *o = '\0';
  return out;
}

const char *hx_esc_markdown(struct hx_arena *a, const char *s) {
  s = or_empty(s);
  char *out = output_for(a, s), *o = out;
  size_t n = strlen(s);
  for (size_t i = 0; i < n;) {
    size_t len = 1;
    if (strchr("\\`*_[]<>|#~&", s[i]))
      *o++ = '\\', *o++ = s[i];
    else if ((len = copy_printable_char(&o, s + i, n - i)) == 0)
      *o++ = '?', len = 1;
    i += len;
  }
  *o = '\0';
  return out;
}

/* XML has no escape for a control byte (XML 1.0 forbids them), so it is
 * replaced, like a byte that is not UTF-8; "&quot;" is the longest escape. */
const char *hx_esc_xml(struct hx_arena *a, const char *s) {
  s = or_empty(s);
  size_t n = strlen(s);
  char *out = hx_alloc(a, 6 * n + 1), *o = out;
  static const char *const special = "&<>\"'";
  static const char *const entity[] = {"&amp;", "&lt;", "&gt;", "&quot;", "&apos;"};
  for (size_t i = 0; i < n;) {
    size_t len = 1;
    const char *hit = s[i] ? strchr(special, s[i]) : NULL;
    if (hit)
      o += sprintf(o, "%s", entity[hit - special]);
    else if ((len = copy_printable_char(&o, s + i, n - i)) == 0)
      *o++ = '?', len = 1;
    i += len;
  }
  *o = '\0';
  return out;
}
