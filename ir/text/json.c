#include "json.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ir/diag.h"
#include "utf8.h"

enum { MAX_DEPTH = 64 };

struct reader {
  struct hx_arena *a;
  const struct hx_source *src;
  const char *p, *end;
  int line;
  const char *line_start;
  bool failed;
};

static struct location here(const struct reader *r) {
  struct location l = {r->src, r->line, (int)(r->p - r->line_start) + 1};
  return l;
}

static void fail(struct reader *r, const char *what) {
  if (!r->failed)
    hx_error(here(r), "%s", what);
  r->failed = true;
}

static void skip_space(struct reader *r) {
  while (r->p < r->end && (*r->p == ' ' || *r->p == '\t' || *r->p == '\n' || *r->p == '\r')) {
    if (*r->p == '\n') {
      r->line++;
      r->line_start = r->p + 1;
    }
    r->p++;
  }
}

static bool literal(struct reader *r, const char *word) {
  size_t n = strlen(word);
  if ((size_t)(r->end - r->p) < n || memcmp(r->p, word, n))
    return false;
  r->p += n;
  return true;
}

static void parse_value(struct reader *r, struct hx_json *v, int depth);

/* Fails with the error pointed at p (a byte of the current line). */
static void fail_at(struct reader *r, const char *p, const char *what) {
  r->p = p;
  fail(r, what);
}

static int hex_digit(char c) {
  if (c >= '0' && c <= '9')
    return c - '0';
  if (c >= 'a' && c <= 'f')
    return c - 'a' + 10;
  if (c >= 'A' && c <= 'F')
    return c - 'A' + 10;
  return -1;
}

/* Four hex digits at p (before end) into *out; false if they are not. */
static bool hex4(const char *p, const char *end, uint32_t *out) {
  if (end - p < 4)
    return false;
  uint32_t v = 0;
  for (int i = 0; i < 4; i++) {
    int d = hex_digit(p[i]);
    if (d < 0)
      return false;
    v = v << 4 | (uint32_t)d;
  }
  *out = v;
  return true;
}

/* A \u escape at r->p (on the backslash), a surrogate pair taken whole, as
 * UTF-8 into *o. NUL is refused: a name is a C string. */
static bool unicode_escape(struct reader *r, char **o) {
  const char *at = r->p;
  uint32_t cp, low;
  if (!hex4(at + 2, r->end, &cp)) {
    fail_at(r, at, "\\u wants four hex digits");
    return false;
  }
  r->p = at + 6;
  if (cp >= 0xdc00 && cp <= 0xdfff) {
    fail_at(r, at, "a lone low surrogate in a \\u escape");
    return false;
  }
  if (cp >= 0xd800 && cp <= 0xdbff) {
    if (r->end - r->p < 6 || r->p[0] != '\\' || r->p[1] != 'u' || !hex4(r->p + 2, r->end, &low) ||
        low < 0xdc00 || low > 0xdfff) {
      fail_at(r, at, "a high surrogate in a \\u escape without the low one after it");
      return false;
    }
    cp = 0x10000 + ((cp - 0xd800) << 10) + (low - 0xdc00);
    r->p += 6;
  }
  if (cp == 0) {
    fail_at(r, at, "\\u0000 (NUL) in a string");
    return false;
  }
  *o += hx_utf8_encode(cp, *o);
  return true;
}

/* One escape at r->p (on the backslash) into *o. */
static bool escape(struct reader *r, char **o) {
  if (r->p + 1 >= r->end) {
    fail(r, "unterminated string");
    return false;
  }
  if (r->p[1] == 'u')
    return unicode_escape(r, o);
  const char *esc = r->p[1] ? strchr("\"\\/bfnrt", r->p[1]) : NULL;
  if (!esc) {
    fail(r, "unknown escape in a string");
    return false;
  }
  *(*o)++ = "\"\\/\b\f\n\r\t"[esc - "\"\\/bfnrt"];
  r->p += 2;
  return true;
}

/* A string (r->p on its opening quote) per RFC 8259: escapes including \u
 * with surrogate pairs, and UTF-8 text, which is checked byte by byte. */
static const char *parse_string(struct reader *r) {
  r->p++; /* the opening quote */
  /* size the copy by this string, not by the rest of the file: every key is
   * a string, so that would make parsing quadratic in memory; no escape
   * decodes to more bytes than it takes */
  const char *q = r->p;
  while (q < r->end && *q != '"')
    q += *q == '\\' && q + 1 < r->end ? 2 : 1;
  char *out = hx_alloc(r->a, (size_t)(q - r->p) + 1), *o = out;
  while (r->p < r->end && *r->p != '"') {
    unsigned char c = (unsigned char)*r->p;
    uint32_t cp;
    int n = c < 0x80 ? 1 : hx_utf8_decode(r->p, (size_t)(r->end - r->p), &cp);
    if (c < 0x20) {
      fail(r, "control character in a string");
      return NULL;
    }
    if (n == 0) {
      fail(r, hx_sprintf(r->a, "byte 0x%02x in a string is not valid UTF-8", c));
      return NULL;
    }
    if (c == '\\') {
      if (!escape(r, &o))
        return NULL;
      continue;
    }
    memcpy(o, r->p, (size_t)n);
    o += n;
    r->p += n;
  }
  if (r->p >= r->end) {
    fail(r, "unterminated string");
    return NULL;
  }
  r->p++;
  *o = 0;
  return out;
}

static void parse_number(struct reader *r, struct hx_json *v) {
  char buf[64];
  size_t n = 0;
  while (r->p + n < r->end && n < sizeof buf - 1 && strchr("+-0123456789.eE", r->p[n]) && r->p[n])
    n++;
  memcpy(buf, r->p, n);
  buf[n] = 0;
  char *endp;
  v->number = strtod(buf, &endp);
  if (n == 0 || *endp || !isfinite(v->number)) {
    fail(r, "expected a value");
    return;
  }
  v->kind = HX_JSON_NUMBER;
  r->p += n;
}

/* Elements of an array or members of an object, into a growing list. */
struct list {
  struct hx_json *items;
  const char **keys;
  int n, cap;
};

static struct hx_json *list_add(struct reader *r, struct list *l, const char *key) {
  if (l->n == l->cap) {
    int cap = l->cap ? 2 * l->cap : 8;
    struct hx_json *items = HX_NEW_ARRAY(r->a, struct hx_json, cap);
    const char **keys = HX_NEW_ARRAY(r->a, const char *, cap);
    if (l->n) {
      memcpy(items, l->items, sizeof *items * (size_t)l->n);
      memcpy(keys, l->keys, sizeof *keys * (size_t)l->n);
    }
    l->items = items;
    l->keys = keys;
    l->cap = cap;
  }
  l->keys[l->n] = key;
  return &l->items[l->n++];
}

static void parse_members(struct reader *r, struct hx_json *v, bool object, int depth) {
  char close = object ? '}' : ']';
  struct list l = {0};
  r->p++;
  skip_space(r);
  if (r->p < r->end && *r->p == close) {
    r->p++;
  } else {
    for (;;) {
      const char *key = NULL;
      skip_space(r);
      if (object) {
        if (r->p >= r->end || *r->p != '"') {
          fail(r, "expected a string key");
          return;
        }
        key = parse_string(r);
        skip_space(r);
        if (r->failed || r->p >= r->end || *r->p != ':') {
          fail(r, "expected ':'");
          return;
        }
        r->p++;
      }
      parse_value(r, list_add(r, &l, key), depth + 1);
      if (r->failed)
        return;
      skip_space(r);
      if (r->p < r->end && *r->p == ',') {
        r->p++;
        continue;
      }
      if (r->p < r->end && *r->p == close) {
        r->p++;
        break;
      }
      fail(r, object ? "expected ',' or '}'" : "expected ',' or ']'");
      return;
    }
  }
  v->kind = object ? HX_JSON_OBJECT : HX_JSON_ARRAY;
  v->items = l.items;
  v->keys = object ? l.keys : NULL;
  v->nitems = l.n;
}

static void parse_value(struct reader *r, struct hx_json *v, int depth) {
  skip_space(r);
  v->loc = here(r);
  if (depth > MAX_DEPTH) {
    fail(r, "nesting too deep");
    return;
  }
  if (r->p >= r->end) {
    fail(r, "unexpected end of file");
    return;
  }
  char c = *r->p;
  if (c == '{' || c == '[') {
    parse_members(r, v, c == '{', depth);
  } else if (c == '"') {
    v->kind = HX_JSON_STRING;
    v->string = parse_string(r);
  } else if (literal(r, "true")) {
    v->kind = HX_JSON_BOOL;
    v->boolean = true;
  } else if (literal(r, "false")) {
    v->kind = HX_JSON_BOOL;
    v->boolean = false;
  } else if (literal(r, "null")) {
    v->kind = HX_JSON_NULL;
  } else {
    parse_number(r, v);
  }
}

struct hx_json *hx_json_parse(struct hx_arena *a, const struct hx_source *src) {
  struct reader r = {a, src, src->text, src->text + src->len, 1, src->text, false};
  struct hx_json *v = HX_NEW(a, struct hx_json);
  parse_value(&r, v, 0);
  skip_space(&r);
  if (!r.failed && r.p < r.end)
    fail(&r, "unexpected text after the JSON value");
  return r.failed ? NULL : v;
}

const struct hx_json *hx_json_get(const struct hx_json *obj, const char *key) {
  if (!obj || obj->kind != HX_JSON_OBJECT)
    return NULL;
  for (int i = 0; i < obj->nitems; i++)
    if (!strcmp(obj->keys[i], key))
      return &obj->items[i];
  return NULL;
}

bool hx_json_int(const struct hx_json *v, int64_t lo, int64_t hi, int64_t *out) {
  if (!v || v->kind != HX_JSON_NUMBER || v->number != floor(v->number) || v->number < (double)lo ||
      v->number > (double)hi)
    return false;
  *out = (int64_t)v->number;
  return true;
}

void hx_json_string(FILE *f, const char *s) {
  fputc('"', f);
  s = s ? s : "";
  size_t len = strlen(s);
  for (size_t i = 0; i < len;) {
    unsigned char c = (unsigned char)s[i];
    const char *esc = c ? strchr("\"\\\b\f\n\r\t", c) : NULL;
    uint32_t cp;
    int n = hx_utf8_decode(s + i, len - i, &cp);
    if (esc) /* the short escapes */
      fprintf(f, "\\%c", "\"\\bfnrt"[esc - "\"\\\b\f\n\r\t"]);
    else if (c < 0x20 || c == 0x7f)
      fprintf(f, "\\u%04x", c);
    else if (n == 0) /* not UTF-8: JSON text cannot hold it */
      fputs("\\ufffd", f);
    else
      fwrite(s + i, 1, (size_t)n, f);
    i += n > 1 ? (size_t)n : 1;
  }
  fputc('"', f);
}

/* %.15g, when it reads back as v, is the shortest such decimal: a shorter one
 * D that reads back lies within half an ulp (< 1.2e-16 relative) of v, far
 * nearer than half the spacing of 15-digit decimals (>= 5e-16), so %.15g
 * rounds v to D. Only 16 and 17 digits remain to try. Subnormals have wider
 * ulps: those try every length. */
void hx_shortest_double(char *buf, size_t size, double v) {
  for (int digits = fabs(v) < DBL_MIN ? 1 : 15; digits <= 17; digits++) {
    snprintf(buf, size, "%.*g", digits, v);
    if (strtod(buf, NULL) == v)
      return;
  }
}

void hx_json_number(FILE *f, double v) {
  char buf[32];
  if (!isfinite(v)) {
    fputs("null", f);
  } else if (v == floor(v) && fabs(v) < 9007199254740992.0) {
    fprintf(f, "%.0f", v);
  } else {
    hx_shortest_double(buf, sizeof buf, v);
    fputs(buf, f);
  }
}
