/* `hexic simulate PLAN.json FILE...`: the ordinary pipeline with the plan
 * taken from PLAN.json (--plan), stopped before emit, then the summary. */
#include <getopt.h>
#include <stdio.h>

#include "codegen/codegen.h"
#include "ir/plan_util.h"
#include "pipeline.h"
#include "simulate_cmd.h"

static const char simulate_usage[] =
    "usage: hexic simulate [--] PLAN.json FILE...\n"
    "Checks PLAN.json (a plan.json, perhaps edited) against the model and cluster in\n"
    "FILE... and prints its simulated figures beside the symmetric baselines.\n"
    "  -h, --help   print this text and exit\n";

/* -h/--help anywhere (GNU getopt_long permutes the paths around it), `--`
 * before a path that starts with '-'. Returns -1 to go on, else the exit code. */
static int parse_simulate_options(int argc, char **argv) {
  static const struct option longs[] = {{"help", no_argument, NULL, 'h'}, {NULL, 0, NULL, 0}};
  opterr = 0; /* our message, with the usage */
  int c;
  while ((c = getopt_long(argc, argv, "h", longs, NULL)) != -1) {
    if (c == 'h') {
      fputs(simulate_usage, stdout);
      return HX_EXIT_OK;
    }
    fprintf(stderr, "hexic: error: unknown option '%s'\n%s", argv[optind - 1], simulate_usage);
    return HX_EXIT_USAGE;
  }
  if (argc - optind < 2) {
    fprintf(stderr, "hexic: error: simulate takes a plan and the model and cluster files\n%s",
            simulate_usage);
    return HX_EXIT_USAGE;
  }
  return -1;
}

int hx_simulate_command(int argc, char **argv) {
  int done = parse_simulate_options(argc, argv);
  if (done >= 0)
    return done;
  struct hx_ctx ctx;
  hx_ctx_init(&ctx);
  ctx.opt.plan_file = argv[optind];
  ctx.opt.inputs = (const char **)argv + optind + 1;
  ctx.opt.ninputs = argc - optind - 1;
  int rc = hx_run_pipeline(&ctx);
  if (rc == HX_EXIT_OK)
    hx_print_summary(&ctx, stdout);
  hx_arena_free(&ctx.arena);
  return rc;
}
