/* A small JSON reader (see ckpt_json.h). */
#include "ckpt_json.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "user_file.h"

struct parser {
  const char *s;
  size_t len, pos;
  char *err;
  size_t err_size;
  bool failed;
};

__attribute__((format(printf, 2, 3))) static void fail(struct parser *p, const char *fmt, ...) {
  if (p->failed)
    return;
  p->failed = true;
  char why[256];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(why, sizeof why, fmt, ap);
  va_end(ap);
  snprintf(p->err, p->err_size, "byte %zu: %s", p->pos, why);
}

static void skip_space(struct parser *p) {
  while (p->pos < p->len && strchr(" \t\r\n", p->s[p->pos]) && p->s[p->pos])
    p->pos++;
}

static int peek(const struct parser *p) {
  return p->pos < p->len ? (unsigned char)p->s[p->pos] : -1;
}

static struct hx_json *node(struct parser *p, enum hx_json_kind kind) {
  struct hx_json *v = calloc(1, sizeof *v);
  if (!v)
    fail(p, "out of memory");
  else
    v->kind = kind;
  return v;
}

static void put_utf8(char *out, size_t *n, uint32_t c) {
  if (c < 0x80) {
    out[(*n)++] = (char)c;
  } else if (c < 0x800) {
    out[(*n)++] = (char)(0xC0 | c >> 6);
    out[(*n)++] = (char)(0x80 | (c & 0x3F));
  } else if (c < 0x10000) {
    out[(*n)++] = (char)(0xE0 | c >> 12);
    out[(*n)++] = (char)(0x80 | ((c >> 6) & 0x3F));
    out[(*n)++] = (char)(0x80 | (c & 0x3F));
  } else {
    out[(*n)++] = (char)(0xF0 | c >> 18);
    out[(*n)++] = (char)(0x80 | ((c >> 12) & 0x3F));
    out[(*n)++] = (char)(0x80 | ((c >> 6) & 0x3F));
    out[(*n)++] = (char)(0x80 | (c & 0x3F));
  }
}

static bool hex4(struct parser *p, uint32_t *out) {
  uint32_t v = 0;
  for (int i = 0; i < 4; i++) {
    int c = peek(p);
    int d = c >= '0' && c <= '9'   ? c - '0'
            : c >= 'a' && c <= 'f' ? c - 'a' + 10
            : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                   : -1;
    if (d < 0) {
      fail(p, "bad \\u escape");
      return false;
    }
    v = v * 16 + (uint32_t)d;
    p->pos++;
  }
  *out = v;
  return true;
}

/* \uXXXX, with a surrogate pair's second half; no lone surrogates, no NUL. */
static bool unicode_escape(struct parser *p, uint32_t *out) {
  uint32_t c;
  if (!hex4(p, &c))
    return false;
  if (c >= 0xD800 && c < 0xDC00) {
    uint32_t lo;
    if (peek(p) != '\\' || p->pos + 1 >= p->len || p->s[p->pos + 1] != 'u') {
      fail(p, "lone surrogate in a \\u escape");
      return false;
    }
    p->pos += 2;
    if (!hex4(p, &lo) || lo < 0xDC00 || lo > 0xDFFF) {
      fail(p, "lone surrogate in a \\u escape");
      return false;
    }
    c = 0x10000 + ((c - 0xD800) << 10) + (lo - 0xDC00);
  } else if ((c >= 0xDC00 && c < 0xE000) || c == 0) {
    fail(p, c ? "lone surrogate in a \\u escape" : "\\u0000 in a string");
    return false;
  }
  *out = c;
  return true;
}

/* The bytes from the opening quote's next byte to the closing quote, or
 * to the end of the text when the string is unterminated: the unescaped
 * string is never longer (an escape is longer than what it stands for). */
static size_t raw_string_length(const struct parser *p) {
  size_t i = p->pos;
  while (i < p->len && p->s[i] != '"')
    i += p->s[i] == '\\' ? 2 : 1;
  return (i < p->len ? i : p->len) - p->pos;
}

/* At the opening quote: the unescaped string, malloc'ed (its raw length,
 * not the rest of the text: the parse stays linear in the input). */
static char *parse_string(struct parser *p) {
  p->pos++; /* the quote */
  size_t raw = raw_string_length(p);
  if (raw > HX_JSON_MAX_STRING) {
    fail(p, "a string of more than %d bytes (the limit)", HX_JSON_MAX_STRING);
    return NULL;
  }
  char *out = malloc(raw + 1);
  size_t n = 0;
  if (!out) {
    fail(p, "out of memory");
    return NULL;
  }
  for (;;) {
    int c = peek(p);
    if (c < 0) {
      fail(p, "unterminated string");
      break;
    }
    p->pos++;
    if (c == '"') {
      out[n] = '\0';
      return out;
    }
    if (c < 0x20) {
      fail(p, "control character in a string");
      break;
    }
    if (c != '\\') {
      out[n++] = (char)c;
      continue;
    }
    int e = peek(p);
    p->pos++;
    const char *plain = strchr("\"\\/bfnrt", e > 0 ? e : 'x');
    if (e == 'u') {
      uint32_t cp;
      if (!unicode_escape(p, &cp))
        break;
      put_utf8(out, &n, cp);
    } else if (plain && e > 0) {
      out[n++] = "\"\\/\b\f\n\r\t"[plain - "\"\\/bfnrt"];
    } else {
      fail(p, "bad escape in a string");
      break;
    }
  }
  free(out);
  return NULL;
}

static struct hx_json *parse_value(struct parser *p, int depth);

static struct hx_json *parse_number(struct parser *p) {
  size_t start = p->pos;
  if (peek(p) == '-')
    p->pos++;
  int digits = 0;
  while (peek(p) >= '0' && peek(p) <= '9')
    p->pos++, digits++;
  if (!digits || (p->s[start + (p->s[start] == '-')] == '0' && digits > 1)) {
    fail(p, "bad number");
    return NULL;
  }
  if (peek(p) == '.') {
    p->pos++;
    if (!(peek(p) >= '0' && peek(p) <= '9')) {
      fail(p, "bad number");
      return NULL;
    }
    while (peek(p) >= '0' && peek(p) <= '9')
      p->pos++;
  }
  if (peek(p) == 'e' || peek(p) == 'E') {
    p->pos++;
    if (peek(p) == '+' || peek(p) == '-')
      p->pos++;
    if (!(peek(p) >= '0' && peek(p) <= '9')) {
      fail(p, "bad number");
      return NULL;
    }
    while (peek(p) >= '0' && peek(p) <= '9')
      p->pos++;
  }
  struct hx_json *v = node(p, HX_JSON_NUMBER);
  if (!v)
    return NULL;
  v->text = malloc(p->pos - start + 1);
  if (!v->text) {
    free(v);
    fail(p, "out of memory");
    return NULL;
  }
  memcpy(v->text, p->s + start, p->pos - start);
  v->text[p->pos - start] = '\0';
  v->number = strtod(v->text, NULL);
  return v;
}

static bool literal(struct parser *p, const char *word) {
  size_t n = strlen(word);
  if (p->len - p->pos >= n && !memcmp(p->s + p->pos, word, n)) {
    p->pos += n;
    return true;
  }
  return false;
}

/* A member of an object in the order of the text. */
struct member_at {
  struct hx_json *node;
  int position;
};

static int by_key_then_position(const void *a, const void *b) {
  const struct member_at *x = a, *y = b;
  int c = strcmp(x->node->key, y->node->key);
  return c ? c : (x->position > y->position) - (x->position < y->position);
}

/* Exchanges what two members hold, each keeping its name and place. */
static void swap_values(struct hx_json *a, struct hx_json *b) {
  struct hx_json t = *a;
  *a = *b;
  *b = t;
  b->key = a->key, a->key = t.key;
  b->next = a->next, a->next = t.next;
}

/* Python's json: a name given twice keeps its first place and its last
 * value. The members sorted by name (then place) put each name's copies
 * side by side; the first copy takes the last's value, the others go. */
static bool keep_last_duplicates(struct parser *p, struct hx_json *obj) {
  int n = obj->count;
  struct member_at *sorted = malloc(sizeof *sorted * (size_t)(n + 1));
  bool *dropped = calloc((size_t)n + 1, sizeof *dropped);
  if (!sorted || !dropped) {
    free(sorted);
    free(dropped);
    fail(p, "out of memory");
    return false;
  }
  int i = 0;
  for (struct hx_json *m = obj->child; m; m = m->next, i++)
    sorted[i] = (struct member_at){m, i};
  qsort(sorted, (size_t)n, sizeof *sorted, by_key_then_position);
  for (int first = 0, end; first < n; first = end) {
    for (end = first + 1; end < n && !strcmp(sorted[end].node->key, sorted[first].node->key);)
      end++;
    if (end - first == 1)
      continue;
    if (!obj->duplicate)
      obj->duplicate = strdup(sorted[first].node->key);
    swap_values(sorted[first].node, sorted[end - 1].node);
    for (int k = first + 1; k < end; k++)
      dropped[sorted[k].position] = true;
  }
  struct hx_json **link = &obj->child;
  i = 0;
  for (struct hx_json *m = obj->child, *next; m; m = next, i++) {
    next = m->next;
    if (!dropped[i]) {
      *link = m;
      link = &m->next;
      continue;
    }
    m->next = NULL;
    hx_json_free(m);
    obj->count--;
  }
  *link = NULL;
  free(sorted);
  free(dropped);
  return true;
}

/* Elements or members up to `close`; objects read "key": value. */
static struct hx_json *parse_container(struct parser *p, int depth, bool object) {
  struct hx_json *v = node(p, object ? HX_JSON_OBJECT : HX_JSON_ARRAY);
  if (!v)
    return NULL;
  p->pos++;
  struct hx_json **tail = &v->child;
  skip_space(p);
  if (peek(p) == (object ? '}' : ']')) {
    p->pos++;
    return v;
  }
  for (;;) {
    char *key = NULL;
    skip_space(p);
    if (object) {
      if (peek(p) != '"') {
        fail(p, "expected a member name");
        break;
      }
      key = parse_string(p);
      skip_space(p);
      if (!key || peek(p) != ':') {
        free(key);
        fail(p, "expected ':'");
        break;
      }
      p->pos++;
    }
    struct hx_json *item = parse_value(p, depth + 1);
    if (!item) {
      free(key);
      break;
    }
    item->key = key;
    *tail = item;
    tail = &item->next;
    v->count++;
    skip_space(p);
    if (peek(p) == ',') {
      p->pos++;
      continue;
    }
    if (peek(p) == (object ? '}' : ']')) {
      p->pos++;
      if (!object || keep_last_duplicates(p, v))
        return v;
      break;
    }
    fail(p, object ? "expected ',' or '}'" : "expected ',' or ']'");
    break;
  }
  hx_json_free(v);
  return NULL;
}

static struct hx_json *parse_value(struct parser *p, int depth) {
  if (depth > HX_JSON_MAX_DEPTH) {
    fail(p, "nested deeper than %d", HX_JSON_MAX_DEPTH);
    return NULL;
  }
  skip_space(p);
  int c = peek(p);
  if (c == '{' || c == '[')
    return parse_container(p, depth, c == '{');
  if (c == '"') {
    char *s = parse_string(p);
    struct hx_json *v = s ? node(p, HX_JSON_STRING) : NULL;
    if (v)
      v->text = s;
    else
      free(s);
    return v;
  }
  if (c == '-' || (c >= '0' && c <= '9'))
    return parse_number(p);
  struct hx_json *v = NULL;
  if (literal(p, "true") || literal(p, "false")) {
    v = node(p, HX_JSON_BOOL);
    if (v)
      v->boolean = p->s[p->pos - 1] == 'e' && p->s[p->pos - 2] == 'u';
  } else if (literal(p, "null")) {
    v = node(p, HX_JSON_NULL);
  } else {
    fail(p, c < 0 ? "unexpected end" : "unexpected character");
  }
  return v;
}

struct hx_json *hx_json_parse(const char *text, size_t len, char *err, size_t err_size) {
  struct parser p = {text, len, 0, err, err_size, false};
  struct hx_json *v = parse_value(&p, 0);
  skip_space(&p);
  if (v && p.pos != len) {
    fail(&p, "text after the value");
    hx_json_free(v);
    v = NULL;
  }
  return v;
}

void hx_json_free(struct hx_json *v) {
  while (v) {
    struct hx_json *next = v->next;
    hx_json_free(v->child);
    free(v->text);
    free(v->key);
    free(v->duplicate);
    free(v);
    v = next;
  }
}

const struct hx_json *hx_json_get(const struct hx_json *v, const char *key) {
  if (!v || v->kind != HX_JSON_OBJECT)
    return NULL;
  for (const struct hx_json *m = v->child; m; m = m->next)
    if (!strcmp(m->key, key))
      return m;
  return NULL;
}

bool hx_json_int(const struct hx_json *v, int64_t lo, int64_t hi, int64_t *out) {
  if (!v || v->kind != HX_JSON_NUMBER || strpbrk(v->text, ".eE"))
    return false;
  errno = 0;
  char *end;
  long long x = strtoll(v->text, &end, 10);
  if (errno || *end || x < lo || x > hi)
    return false;
  *out = x;
  return true;
}

/* All of fd's bytes when there are at most limit, in *len; NULL with the
 * reason in err. Read to the end, not to the size at open: a file that
 * grows meanwhile is read up to limit + 1 bytes and refused. */
static char *read_bounded(int fd, size_t limit, size_t *len, const char *path, char *err,
                          size_t err_size) {
  struct stat st = {0};
  if (fstat(fd, &st) == 0 && (uint64_t)st.st_size > limit) {
    snprintf(err, err_size, "%s: %lld bytes, over the %zu-byte limit for this file", path,
             (long long)st.st_size, limit);
    return NULL;
  }
  size_t cap = (size_t)st.st_size + 1, n = 0;
  char *buf = malloc(cap);
  bool failed = !buf;
  while (!failed && n <= limit) {
    if (n == cap) {
      cap = cap > limit / 2 ? limit + 1 : 2 * cap;
      char *grown = realloc(buf, cap);
      failed = !grown;
      buf = grown ? grown : buf;
      continue;
    }
    ssize_t got = read(fd, buf + n, cap - n);
    if (got == 0)
      break;
    failed = got < 0 && errno != EINTR;
    n += got > 0 ? (size_t)got : 0;
  }
  if (failed || n > limit) {
    snprintf(err, err_size,
             n > limit ? "%s: over the %zu-byte limit for this file"
                       : "%s: cannot read (%zu-byte limit)",
             path, limit);
    free(buf);
    return NULL;
  }
  *len = n;
  return buf;
}

struct hx_json *hx_json_parse_file(const char *path, size_t limit, char *err, size_t err_size) {
  int fd = hx_rt_open_regular(path, err, err_size);
  if (fd < 0)
    return NULL;
  size_t len = 0;
  char *buf = read_bounded(fd, limit, &len, path, err, err_size);
  close(fd);
  if (!buf)
    return NULL;
  char why[320];
  struct hx_json *v = hx_json_parse(buf, len, why, sizeof why);
  if (!v)
    snprintf(err, err_size, "%s: not valid JSON: %s", path, why);
  free(buf);
  return v;
}
