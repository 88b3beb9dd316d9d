/* The escaping functions of codegen/escape.c (issue 10, item 2), one per
 * language: exact outputs for the characters each language gives meaning
 * to, and for the Makefile and bash the real test, make or bash reading the
 * escaped value back as the original (a $(shell ...) in it would run there). The files
 * they go into are tested end to end by hostile_names.sh. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "codegen/escape.h"

#include "tests/check.h"

static struct hx_arena arena;

static void check_eq(const char *what, const char *in, const char *got, const char *want) {
  if (strcmp(got, want)) {
    fprintf(stderr, "%s(%s) = %s, want %s\n", what, in ? in : "NULL", got, want);
    failures++;
  }
}

static void test_c_string(void) {
  check_eq("c_string", NULL, hx_esc_c_string(&arena, NULL), "NULL");
  check_eq("c_string", "", hx_esc_c_string(&arena, ""), "\"\"");
  check_eq("c_string", "q", hx_esc_c_string(&arena, "a\"b\\c"), "\"a\\\"b\\\\c\"");
  check_eq("c_string", "trigraph", hx_esc_c_string(&arena, "?\?/?\?="), "\"\\?\\?/\\?\\?=\"");
  /* octal escapes are three digits, so a digit after one stays a digit */
  check_eq("c_string", "ctl", hx_esc_c_string(&arena, "\n1\x7f" "2\xe5\x8c\x97"),
           "\"\\0121\\1772\\345\\214\\227\"");
  check_eq("c_string", "shell", hx_esc_c_string(&arena, "$(x) `y` %s%n #"), "\"$(x) `y` %s%n #\"");
}

static void test_c_comment(void) {
  check_eq("c_comment", "end", hx_esc_c_comment(&arena, "a*/b/*c"), "a\\x2a/b/\\x2ac");
  /* a trailing backslash would splice the next line into a // comment */
  check_eq("c_comment", "splice", hx_esc_c_comment(&arena, "a\\"), "a\\x5c");
  check_eq("c_comment", "trigraph", hx_esc_c_comment(&arena, "?\?/"), "\\x3f\\x3f/");
  check_eq("c_comment", "ctl", hx_esc_c_comment(&arena, "a\nb\r\x7f"), "a\\x0ab\\x0d\\x7f");
  check_eq("c_comment", "utf8", hx_esc_c_comment(&arena, "\xe5\x8c\x97 \xff"), "\xe5\x8c\x97 \\xff");
  check_eq("c_comment", NULL, hx_esc_c_comment(&arena, NULL), "");
}

static void test_slurm_markdown(void) {
  check_eq("slurm", "name", hx_esc_slurm(&arena, "llama2-7b.v1_x"), "llama2-7b.v1_x");
  check_eq("slurm", "hostile", hx_esc_slurm(&arena, "a b\"$(x)'\n#"), "a_b___x____");
  check_eq("markdown", "cell", hx_esc_markdown(&arena, "a|b*c_d`e"), "a\\|b\\*c\\_d\\`e");
  check_eq("markdown", "html", hx_esc_markdown(&arena, "<i>#\\&~[x]"), "\\<i\\>\\#\\\\\\&\\~\\[x\\]");
  check_eq("markdown", "ctl", hx_esc_markdown(&arena, "a\nb\xff\xe5\x8c\x97"), "a?b?\xe5\x8c\x97");
  check_eq("xml", "markup", hx_esc_xml(&arena, "n<&\">'x"), "n&lt;&amp;&quot;&gt;&apos;x");
  check_eq("xml", "ctl", hx_esc_xml(&arena, "a\nb\xff\xe5\x8c\x97]]>"), "a?b?\xe5\x8c\x97]]&gt;");
  check_eq("xml", "null", hx_esc_xml(&arena, NULL), "");
}

static void test_make_text(void) {
  check_eq("make", "dollar", hx_esc_make(&arena, "$(shell x)#y"), "$$(shell x)\\#y");
  check_eq("make", "newline", hx_esc_make(&arena, "a\nb"), "a?b");
  check_eq("make", "trailing", hx_esc_make(&arena, "dir\\"), "dir\\$()");
}

/* bash reads the word back as the original bytes and runs nothing in it. */
static void check_shell_reads_back(const char *value) {
  char path[] = "/tmp/hx_escape_XXXXXX";
  int fd = mkstemp(path);
  CHECK(fd >= 0);
  if (fd < 0)
    return;
  FILE *f = fdopen(fd, "w");
  fprintf(f, "v=(%s)\nprintf '[%%s]' \"${v[@]}\"\n", hx_esc_shell(&arena, value));
  fclose(f);
  char cmd[256], got[512] = "";
  snprintf(cmd, sizeof cmd, "cd /tmp && bash %s", path);
  FILE *p = popen(cmd, "r");
  if (p) {
    got[fread(got, 1, sizeof got - 1, p)] = '\0';
    pclose(p);
  }
  unlink(path);
  char want[512];
  snprintf(want, sizeof want, "[%s]", value);
  check_eq("shell reads back", value, got, want);
}

static void test_shell(void) {
  check_eq("shell", "quote", hx_esc_shell(&arena, "a'b"), "'a'\\''b'");
  check_eq("shell", NULL, hx_esc_shell(&arena, NULL), "''");
  check_shell_reads_back("h100:0");
  check_shell_reads_back("n'$(touch pwned)`touch pwned` \"q\" ;touch pwned");
  check_shell_reads_back("''\\'");
  check_shell_reads_back("a\nb $HOME * ~ !x");
  CHECK(access("/tmp/pwned", F_OK) != 0);
}

/* GNU make parses "V ?= <escaped>" back into the original value. */
static void check_make_reads_back(const char *value) {
  char path[] = "/tmp/hx_escape_XXXXXX";
  int fd = mkstemp(path);
  CHECK(fd >= 0);
  if (fd < 0)
    return;
  FILE *f = fdopen(fd, "w");
  fprintf(f, "V ?= %s\n$(info [$(V)])\nall: ;@:\n", hx_esc_make(&arena, value));
  fclose(f);
  char cmd[256], got[512] = "";
  snprintf(cmd, sizeof cmd, "cd /tmp && make -s -f %s", path);
  FILE *p = popen(cmd, "r");
  if (p) {
    if (!fgets(got, sizeof got, p))
      got[0] = '\0';
    pclose(p);
  }
  unlink(path);
  got[strcspn(got, "\n")] = '\0';
  char want[512];
  snprintf(want, sizeof want, "[%s]", value);
  check_eq("make reads back", value, got, want);
}

static void test_make_reads_back(void) {
  check_make_reads_back("/plain/path");
  check_make_reads_back("/a $(shell touch pwned) `b` 'c' \"d\"");
  check_make_reads_back("/hash # not a comment");
  check_make_reads_back("/dollar $$ $ $x $(x) ${x}");
  check_make_reads_back("/trailing\\");
  check_make_reads_back("%s%n ?\?/ * [x]");
  CHECK(access("/tmp/pwned", F_OK) != 0);
}

int main(void) {
  hx_arena_init(&arena);
  test_c_string();
  test_c_comment();
  test_slurm_markdown();
  test_make_text();
  test_make_reads_back();
  test_shell();
  hx_arena_free(&arena);
  if (!failures)
    printf("escape: C strings and comments, Makefile (read back by make), bash words (read "
           "back by bash), #SBATCH, Markdown\n");
  return failures != 0;
}
