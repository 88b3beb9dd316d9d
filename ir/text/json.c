#include "json.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ir/diag.h"

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

static const char *parse_string(struct reader *r) {
  r->p++; /* the opening quote */
  /* size the copy by this string, not by the rest of the file: every key is
   * a string, so that would make parsing quadratic in memory */
  const char *q = r->p;
  while (q < r->end && *q != '"')
    q += *q == '\\' && q + 1 < r->end ? 2 : 1;
  char *out = hx_alloc(r->a, (size_t)(q - r->p) + 1), *o = out;
  while (r->p < r->end && *r->p != '"') {
    unsigned char c = (unsigned char)*r->p;
    if (c < 0x20) {
      fail(r, "control character in a string");
      return NULL;
    }
    if (c == '\\') {
      r->p++;
      if (r->p >= r->end)
        break;
      const char *esc = strchr("\"\\/bfnrt", *r->p);
      if (!esc || !*r->p) {
        fail(r, *r->p == 'u' ? "\\u escapes are not supported in plan files"
                             : "unknown escape in a string");
        return NULL;
      }
      *o++ = "\"\\/\b\f\n\r\t"[esc - "\"\\/bfnrt"];
      r->p++;
      continue;
    }
    *o++ = (char)c;
    r->p++;
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
  for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p; p++) {
    const char *esc = strchr("\"\\\b\f\n\r\t", *p);
    if (esc) /* the short escapes, which hx_json_parse reads back */
      fprintf(f, "\\%c", "\"\\bfnrt"[esc - "\"\\\b\f\n\r\t"]);
    else if (*p < 0x20)
      fprintf(f, "\\u%04x", *p);
    else
      fputc(*p, f);
  }
  fputc('"', f);
}

void hx_json_number(FILE *f, double v) {
  if (!isfinite(v))
    fputs("null", f);
  else if (v == floor(v) && fabs(v) < 9007199254740992.0)
    fprintf(f, "%.0f", v);
  else
    fprintf(f, "%.17g", v);
}
