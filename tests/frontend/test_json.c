/* JSON strings (ir/text/json.c, issue 10 item 4): what hx_json_string
 * writes is RFC 8259 JSON that hx_json_parse reads back byte for byte, for
 * every escape class; the reader takes \u escapes (surrogate pairs too) and
 * refuses lone surrogates, \u0000, bad hex digits and bytes that are not
 * UTF-8 with a located error. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir/diag.h"
#include "ir/text/json.h"

#include "tests/check.h"

/* What hx_json_string writes for s. */
static char *written(const char *s) {
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  if (!f)
    abort();
  hx_json_string(f, s);
  fclose(f);
  return buf;
}

/* Parses text as one JSON document; *diag gets the diagnostics. NULL when
 * it is not a string; else the string, copied (the arena is freed). */
static char *parsed(const char *text, char **diag) {
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  if (!f)
    abort();
  hx_diag_set_stream(f);
  hx_diag_reset();
  struct hx_arena a;
  hx_arena_init(&a);
  struct hx_source src = {.name = "t.json", .text = text, .len = (long)strlen(text)};
  struct hx_json *v = hx_json_parse(&a, &src);
  char *out = v && v->kind == HX_JSON_STRING ? strdup(v->string) : NULL;
  hx_arena_free(&a);
  hx_diag_set_stream(NULL);
  fclose(f);
  *diag = buf;
  return out;
}

static void check_round_trip(const char *s) {
  char *json = written(s), *diag;
  char *back = parsed(json, &diag);
  if (!back || strcmp(back, s)) {
    fprintf(stderr, "round trip of %s gave %s: %s\n", json, back ? back : "(null)", diag);
    failures++;
  }
  free(json);
  free(back);
  free(diag);
}

static void test_round_trips(void) {
  const char *strings[] = {
      "",
      "plain a800:0",
      "quote \" backslash \\ slash /",                       /* the escaped printables */
      "\b\f\n\r\t",                                           /* the short escapes */
      "\x01\x02\x1b[31m\x1f\x7f",                             /* \u00XX */
      "caf\xc3\xa9 \xe5\x8c\x97\xe4\xba\xac \xf0\x9f\x98\x80", /* 2-, 3- and 4-byte UTF-8 */
      "$(touch pwned) `x` */ %s%n # ?\?/ \\u0041",             /* nothing special to JSON */
      "mixed \"\xe5\x8c\x97\"\n\x01\\/",
  };
  for (size_t i = 0; i < sizeof strings / sizeof strings[0]; i++)
    check_round_trip(strings[i]);
}

static void check_written(const char *s, const char *want) {
  char *got = written(s);
  if (strcmp(got, want)) {
    fprintf(stderr, "hx_json_string wrote %s, want %s\n", got, want);
    failures++;
  }
  free(got);
}

static void test_writer(void) {
  check_written("a\"b\\c/d", "\"a\\\"b\\\\c/d\"");
  check_written("\b\f\n\r\t", "\"\\b\\f\\n\\r\\t\"");
  check_written("\x01\x1f\x7f", "\"\\u0001\\u001f\\u007f\"");
  check_written("\xe5\x8c\x97", "\"\xe5\x8c\x97\""); /* UTF-8 as it is */
  /* Not UTF-8: a stray byte, an overlong '/', a surrogate, a cut sequence. */
  check_written("a\xff" "b", "\"a\\ufffdb\"");
  check_written("\xc0\xaf", "\"\\ufffd\\ufffd\"");
  check_written("\xed\xa0\x80", "\"\\ufffd\\ufffd\\ufffd\"");
  check_written("\xe5\x8c", "\"\\ufffd\\ufffd\"");
  check_written(NULL, "\"\"");
}

static void check_read(const char *json, const char *want) {
  char *diag;
  char *got = parsed(json, &diag);
  if (!got || strcmp(got, want)) {
    fprintf(stderr, "%s read as %s, want %s: %s\n", json, got ? got : "(null)", want, diag);
    failures++;
  }
  free(got);
  free(diag);
}

static void test_reader_escapes(void) {
  check_read("\"\\u0041\\u00e9\\u5317\"", "A\xc3\xa9\xe5\x8c\x97");
  check_read("\"\\u00E9\\u00e9\"", "\xc3\xa9\xc3\xa9");                    /* either case */
  check_read("\"\\ud83d\\ude00!\"", "\xf0\x9f\x98\x80!");                  /* a surrogate pair */
  check_read("\"\\uDBFF\\uDFFF\"", "\xf4\x8f\xbf\xbf");                    /* U+10FFFF */
  check_read("\"\\u005c\\u0022\\u002f\\u0001\"", "\\\"/\x01");
  check_read("\"\\/\\b\\f\\n\\r\\t\"", "/\b\f\n\r\t");
}

/* json must be refused with exactly want (one diagnostic, located). */
static void check_refused(const char *json, const char *want) {
  char *diag;
  char *got = parsed(json, &diag);
  if (got || !strstr(diag, want) || hx_error_count() != 1) {
    fprintf(stderr, "%s: got %s, diagnostics:\n%swant: %s\n", json, got ? got : "(null)", diag, want);
    failures++;
  }
  free(got);
  free(diag);
}

static void test_reader_refusals(void) {
  check_refused("[\"ok\",\n \"x\\ud800\"]", "t.json:2:4: error: a high surrogate in a \\u escape without the low one after it");
  check_refused("\"\\ud800\\u0041\"", "t.json:1:2: error: a high surrogate in a \\u escape without the low one");
  check_refused("\"ab\\udc00\"", "t.json:1:4: error: a lone low surrogate in a \\u escape");
  check_refused("\"\\u12g4\"", "t.json:1:2: error: \\u wants four hex digits");
  check_refused("\"\\u12\"", "t.json:1:2: error: \\u wants four hex digits");
  check_refused("\"a\\u0000b\"", "t.json:1:3: error: \\u0000 (NUL) in a string");
  check_refused("\"a\xff\"", "t.json:1:3: error: byte 0xff in a string is not valid UTF-8");
  check_refused("{\"k\": \"\xc0\xaf\"}", "t.json:1:8: error: byte 0xc0 in a string is not valid UTF-8");
  check_refused("\"\xed\xa0\x80\"", "t.json:1:2: error: byte 0xed in a string is not valid UTF-8");
  check_refused("\"\xe5\x8c\"", "t.json:1:2: error: byte 0xe5 in a string is not valid UTF-8");
  check_refused("\"tab\there\"", "t.json:1:5: error: control character in a string");
  check_refused("\"\\x41\"", "t.json:1:2: error: unknown escape in a string");
}

/* Numbers: the shortest decimal that reads back as the same double, not
 * %.17g's "2.0000000000000002e-05" for 2e-05; integers as integers. */
static void test_numbers(void) {
  const struct {
    double v;
    const char *text;
  } cases[] = {{2e-05, "2e-05"}, {0.1, "0.1"}, {0.1 + 0.2, "0.30000000000000004"},
               {1.0 / 3, "0.3333333333333333"}, {4229.5296000000008, "4229.529600000001"},
               {0.46875000000000011, "0.4687500000000001"}, {1e300, "1e+300"},
               {5e-324, "5e-324"}, {-2.5, "-2.5"}, {1000000, "1000000"}};
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f)
      abort();
    hx_json_number(f, cases[k].v);
    fclose(f);
    if (strcmp(buf, cases[k].text) || strtod(buf, NULL) != cases[k].v) {
      fprintf(stderr, "FAIL: hx_json_number(%.17g) wrote %s, not %s\n", cases[k].v, buf,
              cases[k].text);
      failures++;
    }
    free(buf);
  }
}

int main(void) {
  test_numbers();
  test_round_trips();
  test_writer();
  test_reader_escapes();
  test_reader_refusals();
  if (!failures)
    printf("json: strings of every escape class round-trip; bad escapes and bytes refused with a location\n");
  return failures != 0;
}
