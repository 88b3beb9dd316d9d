/* The one visible list of passes. Read top to bottom: that is what hexic does. */
#include <string.h>

#include "codegen/codegen.h"
#include "ir/text/dump.h"
#include "pipeline.h"

/* What a pass's dump shows (--print-after=NAME). */
enum dump_kind { DUMP_AST, DUMP_MODEL_CLUSTER, DUMP_PLAN };

struct pass {
  const char *name;
  bool (*run)(struct hx_ctx *);
  enum dump_kind dump;
  int exit_code_on_error; /* what a failing pass means to the user */
  bool front_end;         /* runs under --check */
};

static const struct pass passes[] = {
    {"parse", hx_pass_parse, DUMP_AST, HX_EXIT_INPUT, true},
    {"sema", hx_pass_sema, DUMP_MODEL_CLUSTER, HX_EXIT_INPUT, true},
    {"model-stats", hx_pass_model_stats, DUMP_MODEL_CLUSTER, HX_EXIT_INPUT, true},
    {"cluster-table", hx_pass_cluster_table, DUMP_MODEL_CLUSTER, HX_EXIT_INPUT, true},
    {"baseline", hx_pass_baseline, DUMP_PLAN, HX_EXIT_INFEASIBLE, false},
    {"schedule", hx_pass_schedule, DUMP_PLAN, HX_EXIT_INFEASIBLE, false},
    {"simulate", hx_pass_simulate, DUMP_PLAN, HX_EXIT_INTERNAL, false},
    {"emit", hx_pass_emit, DUMP_PLAN, HX_EXIT_INTERNAL, false},
};
enum { NPASSES = sizeof passes / sizeof passes[0] };

void hx_ctx_init(struct hx_ctx *ctx) {
  memset(ctx, 0, sizeof *ctx);
  hx_arena_init(&ctx->arena);
  ctx->opt.target = HX_TARGET_CPU;
  ctx->opt.strategy = HX_STRAT_AUTO;
  ctx->opt.search_budget_s = 0; /* no clock: the plan must not depend on the machine */
}

static const struct pass *find_pass(const char *name) {
  for (int i = 0; i < NPASSES; i++)
    if (!strcmp(passes[i].name, name))
      return &passes[i];
  return NULL;
}

bool hx_pass_exists(const char *name) { return find_pass(name) != NULL; }

static bool runs(const struct hx_options *opt, const struct pass *p) {
  if (opt->check_only && !p->front_end)
    return false;
  /* Without -o there is nothing to write. */
  return p->run != hx_pass_emit || opt->out_dir;
}

bool hx_pass_runs(const struct hx_options *opt, const char *name) {
  const struct pass *p = find_pass(name);
  return p && runs(opt, p);
}

static void verify_after(const struct hx_ctx *ctx, const struct pass *p) {
  switch (p->dump) {
  case DUMP_AST:
    break;
  case DUMP_MODEL_CLUSTER:
    hx_verify_model(ctx);
    hx_verify_cluster(ctx);
    break;
  case DUMP_PLAN:
    if (ctx->plan)
      hx_verify_plan(ctx, ctx->plan);
    if (ctx->baseline)
      hx_verify_plan(ctx, ctx->baseline);
    if (ctx->baseline_subset)
      hx_verify_plan(ctx, ctx->baseline_subset);
    break;
  }
}

static void dump(const struct hx_ctx *ctx, const struct pass *p, FILE *f) {
  fprintf(f, "# after %s\n", p->name);
  switch (p->dump) {
  case DUMP_AST:
    hx_dump_ast(ctx, f);
    break;
  case DUMP_MODEL_CLUSTER:
    hx_dump_model(ctx, f);
    hx_dump_cluster(ctx, f);
    break;
  case DUMP_PLAN:
    hx_dump_model(ctx, f);
    hx_dump_cluster(ctx, f);
    if (ctx->baseline) {
      fputs("baseline ", f);
      hx_dump_plan(ctx, ctx->baseline, f);
    }
    if (ctx->baseline_subset) {
      fputs("subset baseline ", f);
      hx_dump_plan(ctx, ctx->baseline_subset, f);
    }
    if (ctx->plan)
      hx_dump_plan(ctx, ctx->plan, f);
    break;
  }
}

int hx_run_pipeline(struct hx_ctx *ctx) {
  const struct pass *last = NULL;
  for (int i = 0; i < NPASSES; i++) {
    const struct pass *p = &passes[i];
    if (!runs(&ctx->opt, p)) /* the passes that do not run are the last ones */
      break;
    if (!p->run(ctx) || hx_error_count() > 0) {
      if (ctx->exit_code != HX_EXIT_OK)
        return ctx->exit_code;
      return hx_error_count() > 0 ? p->exit_code_on_error : HX_EXIT_INTERNAL;
    }
    verify_after(ctx, p);
    last = p;
    if (ctx->opt.print_after && !strcmp(ctx->opt.print_after, p->name)) {
      dump(ctx, p, stdout);
      return HX_EXIT_OK;
    }
  }
  if (ctx->opt.print_ir && last)
    dump(ctx, last, stdout);
  return HX_EXIT_OK;
}
