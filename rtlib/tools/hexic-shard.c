/* hexic-shard: turns any file into a byte-level llm.c token shard (vocab
 * 256, one token per byte, uint16 tokens, magic 20240520 / version 1), the
 * format a hexic train block's `data` reads. */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rtlib/rt_data.h"
#include "rtlib/ckpt/user_file.h"

static void usage(FILE *f) {
  fputs("usage: hexic-shard INPUT OUTPUT\n"
        "  Writes every byte of INPUT (a regular file, e.g. text; '-': stdin) as one token\n"
        "  of a byte-level llm.c shard OUTPUT: vocab 256, uint16 tokens, magic 20240520,\n"
        "  version 1. Train on it with `data = \"OUTPUT\"` and `vocab = 256`.\n"
        "  For a Hugging Face tokenizer, rtlib/tools/hexic-tokenize.py (docs/data.md).\n"
        "  -h, --help anywhere prints this; -- before an INPUT that starts with '-'.\n",
        f);
}

/* Reads all of f into a growing buffer of tokens; false on a read error. */
static bool read_bytes_as_tokens(FILE *f, uint32_t **tokens_out, int64_t *n_out) {
  size_t cap = 1 << 16, n = 0;
  uint32_t *tokens = malloc(cap * sizeof *tokens);
  unsigned char buf[1 << 14];
  size_t got;
  while (tokens && (got = fread(buf, 1, sizeof buf, f)) > 0) {
    if (n + got > cap) {
      cap = 2 * (n + got);
      uint32_t *grown = realloc(tokens, cap * sizeof *tokens);
      if (!grown) {
        free(tokens);
        tokens = NULL;
        break;
      }
      tokens = grown;
    }
    for (size_t i = 0; i < got; i++)
      tokens[n++] = buf[i];
  }
  if (!tokens || ferror(f)) {
    free(tokens);
    return false;
  }
  *tokens_out = tokens;
  *n_out = (int64_t)n;
  return true;
}

/* -h/--help anywhere; the two paths around it (GNU getopt_long permutes), `--`
 * before a path that starts with '-'. Returns -1 to go on, else the exit code. */
static int parse_command_line(int argc, char **argv) {
  static const struct option longs[] = {{"help", no_argument, NULL, 'h'}, {NULL, 0, NULL, 0}};
  opterr = 0; /* our message, with the usage */
  int c;
  while ((c = getopt_long(argc, argv, "h", longs, NULL)) != -1) {
    if (c == 'h') {
      usage(stdout); /* asked for: not an error */
      return 0;
    }
    fprintf(stderr, "hexic-shard: unknown option '%s'\n", argv[optind - 1]);
    usage(stderr);
    return 2;
  }
  if (argc - optind != 2) {
    usage(stderr);
    return 2;
  }
  return -1;
}

int main(int argc, char **argv) {
  int done = parse_command_line(argc, argv);
  if (done >= 0)
    return done;
  const char *in_path = argv[optind], *out_path = argv[optind + 1];
  bool from_stdin = !strcmp(in_path, "-");
  /* INPUT a regular file ('-' for a pipe): a FIFO's open blocked forever,
   * /dev/zero filled memory without end */
  char err[512];
  FILE *in = from_stdin ? stdin : hx_rt_fopen_regular(in_path, err, sizeof err);
  if (!in) {
    fprintf(stderr, "hexic-shard: error: %s\n", err);
    return 1;
  }
  uint32_t *tokens = NULL;
  int64_t n = 0;
  bool read_ok = read_bytes_as_tokens(in, &tokens, &n);
  int read_errno = errno;
  if (!from_stdin)
    fclose(in);
  if (!read_ok) {
    fprintf(stderr, "hexic-shard: error: %s: cannot read: %s\n", in_path, strerror(read_errno));
    return 1;
  }
  if (n == 0) {
    fprintf(stderr, "hexic-shard: error: %s is empty: a shard needs at least one token\n", in_path);
    free(tokens);
    return 1;
  }
  bool ok = hx_rt_shard_write(out_path, tokens, n, false, err, sizeof err);
  free(tokens);
  if (!ok) {
    fprintf(stderr, "hexic-shard: error: %s\n", err);
    return 1;
  }
  printf("hexic-shard: wrote %" PRId64 " tokens (vocab 256, uint16) to %s\n", n, out_path);
  return 0;
}
