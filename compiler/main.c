/* hexic: the driver. Parses the command line, runs the pass pipeline, and
 * maps the outcome to an exit code (see ir/diag.h). */
#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pipeline.h"
#include "simulate_cmd.h"

static const char usage_text[] =
    "usage: hexic [options] FILE...\n"
    "       hexic simulate [--] PLAN.json FILE...\n"
    "\n"
    "Compiles a model, training settings and a cluster written in the .hx language\n"
    "into an asymmetric parallel training plan and one C program per rank.\n"
    "Blocks may be spread over any number of FILEs.\n"
    "\n"
    "options (before or after the FILEs; -- ends them):\n"
    "  -o DIR                write plan.json, report.md, trace.json and the per-rank\n"
    "                        programs with their Makefile and launch.sh into DIR\n"
    "  --check               parse and validate the input only\n"
    "  --print-ir            dump the IR after the last pass that ran\n"
    "  --print-after=PASS    dump the IR after PASS and stop; PASS is one of\n"
    "                        parse sema model-stats cluster-table baseline schedule\n"
    "                        simulate emit\n"
    "  --target=cpu|cuda     generated programs run on CPU over MPI (default) or on\n"
    "                        NVIDIA GPUs, one per rank (NCCL between them)\n"
    "  --transport=nccl|mpi  --target=cuda: the programs' transport between GPUs: NCCL\n"
    "                        (default when this hexic was built with it; ranks that\n"
    "                        share a GPU fall back to MPI) or MPI staged through host\n"
    "                        memory only (no NCCL needed)\n"
    "  --cuda-attention=hexic|cudnn\n"
    "                        --target=cuda: the attention the programs build in:\n"
    "                        hexic's kernels (default) or cuDNN's fused attention\n"
    "                        (bf16 plans; the Makefile's ATTENTION= overrides)\n"
    "  --strategy=NAME       auto (default), hexiscale, symmetric,\n"
    "                        symmetric-subset, exhaustive, hexiseq\n"
    "  --search-evals=N      stop the plan search after N evaluations (candidate\n"
    "                        plans priced; default 100000): the same N gives the same\n"
    "                        plan on any machine\n"
    "  --search-budget=SEC   also cut the plan search short after SEC seconds, with\n"
    "                        a warning: the plan may then differ from a run that is\n"
    "                        not cut short (default: no clock, the plan depends on\n"
    "                        the inputs only)\n"
    "  --tau=N               stage orders follow paths that take one of the N heaviest\n"
    "                        links at each step (1..16, default 3)\n"
    "  --plan=FILE           take the plan from FILE (a plan.json) instead of searching\n"
    "  --version             print the version and exit\n"
    "  -h, --help            print this text and exit\n"
    "\n"
    "exit status: 0 success, 1 errors in the input, 2 usage error, 3 no feasible\n"
    "plan, 70 internal error.\n";

static int usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int usage_error(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fputs("hexic: error: ", stderr);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fprintf(stderr, "\n%s", usage_text);
  return HX_EXIT_USAGE;
}

enum {
  OPT_CHECK = 256,
  OPT_PRINT_IR,
  OPT_PRINT_AFTER,
  OPT_TARGET,
  OPT_TRANSPORT,
  OPT_CUDA_ATTENTION,
  OPT_STRATEGY,
  OPT_BUDGET,
  OPT_EVALS,
  OPT_TAU,
  OPT_PLAN,
  OPT_VERSION,
};

static const struct option long_options[] = {
    {"check", no_argument, NULL, OPT_CHECK},
    {"print-ir", no_argument, NULL, OPT_PRINT_IR},
    {"print-after", required_argument, NULL, OPT_PRINT_AFTER},
    {"target", required_argument, NULL, OPT_TARGET},
    {"transport", required_argument, NULL, OPT_TRANSPORT},
    {"cuda-attention", required_argument, NULL, OPT_CUDA_ATTENTION},
    {"strategy", required_argument, NULL, OPT_STRATEGY},
    {"search-budget", required_argument, NULL, OPT_BUDGET},
    {"search-evals", required_argument, NULL, OPT_EVALS},
    {"tau", required_argument, NULL, OPT_TAU},
    {"plan", required_argument, NULL, OPT_PLAN},
    {"version", no_argument, NULL, OPT_VERSION},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

static bool parse_strategy(const char *s, enum hx_strategy *out) {
  static const struct {
    const char *name;
    enum hx_strategy value;
  } table[] = {
      {"auto", HX_STRAT_AUTO},           {"hexiscale", HX_STRAT_HEXISCALE},
      {"symmetric", HX_STRAT_SYMMETRIC}, {"exhaustive", HX_STRAT_EXHAUSTIVE},
      {"hexiseq", HX_STRAT_HEXISEQ},     {"symmetric-subset", HX_STRAT_SUBSET},
  };
  for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
    if (!strcmp(s, table[i].name)) {
      *out = table[i].value;
      return true;
    }
  return false;
}

/* A whole decimal number in [lo, hi], nothing else (no sign, no spaces). */
static bool parse_count(const char *s, long long lo, long long hi, long long *out) {
  if (*s < '0' || *s > '9')
    return false;
  char *end;
  errno = 0;
  long long v = strtoll(s, &end, 10);
  if (*end || errno || v < lo || v > hi)
    return false;
  *out = v;
  return true;
}

/* Fills opt (holding the defaults) from the command line. Returns -1 when
 * the command line is fine, else the exit code. */
static int parse_options(int argc, char **argv, struct hx_options *opt) {
  opterr = 0;
  int c;
  while ((c = getopt_long(argc, argv, ":o:h", long_options, NULL)) != -1) {
    switch (c) {
    case 'o':
      opt->out_dir = optarg;
      break;
    case OPT_CHECK:
      opt->check_only = true;
      break;
    case OPT_PRINT_IR:
      opt->print_ir = true;
      break;
    case OPT_PRINT_AFTER:
      if (!hx_pass_exists(optarg))
        return usage_error("unknown pass '%s' in --print-after", optarg);
      opt->print_after = optarg;
      break;
    case OPT_TARGET:
      if (!strcmp(optarg, "cpu"))
        opt->target = HX_TARGET_CPU;
      else if (!strcmp(optarg, "cuda"))
        opt->target = HX_TARGET_CUDA;
      else
        return usage_error("unknown target '%s' (expected cpu or cuda)", optarg);
      break;
    case OPT_TRANSPORT:
      if (!strcmp(optarg, "nccl"))
        opt->transport = HX_TRANSPORT_NCCL;
      else if (!strcmp(optarg, "mpi"))
        opt->transport = HX_TRANSPORT_MPI;
      else
        return usage_error("unknown transport '%s' (expected nccl or mpi)", optarg);
      break;
    case OPT_CUDA_ATTENTION:
      if (!strcmp(optarg, "hexic"))
        opt->cuda_attention = HX_CUDA_ATTN_HEXIC;
      else if (!strcmp(optarg, "cudnn"))
        opt->cuda_attention = HX_CUDA_ATTN_CUDNN;
      else
        return usage_error("unknown attention '%s' (expected hexic or cudnn)", optarg);
      break;
    case OPT_STRATEGY:
      if (!parse_strategy(optarg, &opt->strategy))
        return usage_error("unknown strategy '%s'", optarg);
      break;
    case OPT_BUDGET: {
      char *end;
      double v = strtod(optarg, &end);
      if (*end || !(v > 0) || v > 1e6)
        return usage_error("--search-budget wants a positive number of seconds, not '%s'", optarg);
      opt->search_budget_s = v;
      break;
    }
    case OPT_EVALS: {
      long long v;
      if (!parse_count(optarg, 1, 1000000000, &v))
        return usage_error("--search-evals wants a whole number of evaluations in 1..1e9, not "
                           "'%s'",
                           optarg);
      opt->search_evals = v;
      break;
    }
    case OPT_TAU: {
      long long v;
      if (!parse_count(optarg, 1, 16, &v))
        return usage_error("--tau wants a whole number in 1..16, not '%s'", optarg);
      opt->tau = (int)v;
      break;
    }
    case OPT_PLAN:
      opt->plan_file = optarg;
      break;
    case OPT_VERSION:
      printf("hexic %s\n", HEXIC_VERSION);
      return HX_EXIT_OK;
    case 'h':
      fputs(usage_text, stdout);
      return HX_EXIT_OK;
    case ':':
      return usage_error("option '%s' needs an argument", argv[optind - 1]);
    default:
      return usage_error("unknown option '%s'", argv[optind - 1]);
    }
  }
  opt->inputs = (const char **)argv + optind;
  opt->ninputs = argc - optind;
  if (opt->ninputs == 0)
    return usage_error("no input files");
  /* The CPU programs have one transport, MPI on host memory. */
  if (opt->transport != HX_TRANSPORT_AUTO && opt->target != HX_TARGET_CUDA)
    return usage_error("--transport chooses between GPUs: it needs --target=cuda");
  if (opt->cuda_attention != HX_CUDA_ATTN_HEXIC && opt->target != HX_TARGET_CUDA)
    return usage_error("--cuda-attention=cudnn chooses the GPUs' attention: it needs "
                       "--target=cuda");
  /* Otherwise the dump would silently never come. */
  if (opt->print_after && !hx_pass_runs(opt, opt->print_after))
    return usage_error("--print-after=%s: that pass does not run %s", opt->print_after,
                       opt->check_only ? "under --check" : "without -o DIR");
  return -1;
}

int main(int argc, char **argv) {
  if (argc > 1 && !strcmp(argv[1], "simulate"))
    return hx_simulate_command(argc - 1, argv + 1);

  struct hx_ctx ctx;
  hx_ctx_init(&ctx);
  int rc = parse_options(argc, argv, &ctx.opt);
  if (rc < 0)
    rc = hx_run_pipeline(&ctx);
  hx_arena_free(&ctx.arena);
  return rc;
}
