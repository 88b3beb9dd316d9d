/* The emit pass: everything hexic writes into -o DIR — plan.json, report.md,
 * trace.json, plan.svg, then the per-rank programs — and the summary on
 * stdout. It lives here, the floor above passes/, because it calls
 * codegen/'s writers: a pass never includes a floor above its own. */
#include <errno.h>
#include <string.h>
#include <sys/stat.h>

#include "codegen.h"
#include "ir/plan_util.h"
#include "passes/cost/cost.h"

/* Output buffer of the big files: trace.json and plan.svg run to tens of
 * megabytes, which stdio's default (a 4 KiB block) writes in as many
 * thousands of system calls. */
enum { EMIT_BUFFER = 1 << 20 };

/* A writer of one file: the recorded simulation is trace.json's and
 * plan.svg's (plan.json and report.md ignore it). */
typedef bool (*emit_writer)(const struct hx_ctx *, const struct hx_sim_options *, FILE *);

static bool write_file(struct hx_ctx *ctx, const char *name, emit_writer writer,
                       const struct hx_sim_options *sim) {
  const char *path = hx_sprintf(&ctx->arena, "%s/%s", ctx->opt.out_dir, name);
  FILE *f = fopen(path, "w");
  if (!f) {
    hx_error_plain("cannot write %s: %s", path, strerror(errno));
    return false;
  }
  setvbuf(f, NULL, _IOFBF, EMIT_BUFFER);
  bool ok = writer(ctx, sim, f);
  if (fclose(f) != 0 || !ok) {
    hx_error_plain("cannot write %s", path);
    return false;
  }
  return true;
}

static bool plan_json(const struct hx_ctx *ctx, const struct hx_sim_options *sim, FILE *f) {
  (void)sim;
  return hx_emit_plan_json(ctx, f);
}

static bool report(const struct hx_ctx *ctx, const struct hx_sim_options *sim, FILE *f) {
  (void)sim;
  return hx_emit_report(ctx, f);
}

/* mkdir -p: the README's `-o out/7b` must work in a fresh checkout, where
 * out/ does not exist yet. Each missing component is created in turn; the
 * first that cannot be names the path in the caller's error. */
static bool make_dirs(struct hx_ctx *ctx, const char *dir) {
  char *path = hx_sprintf(&ctx->arena, "%s", dir);
  for (char *slash = *path ? strchr(path + 1, '/') : NULL; slash; slash = strchr(slash + 1, '/')) {
    *slash = '\0';
    bool made = mkdir(path, 0777) == 0 || errno == EEXIST;
    *slash = '/';
    if (!made)
      return false;
  }
  return mkdir(path, 0777) == 0 || errno == EEXIST;
}

bool hx_pass_emit(struct hx_ctx *ctx) {
  if (!ctx->plan)
    return true;
  const char *dir = ctx->opt.out_dir;
  if (!make_dirs(ctx, dir)) {
    hx_error_plain("cannot create %s: %s", dir, strerror(errno));
    ctx->exit_code = HX_EXIT_INPUT;
    return false;
  }
  if (!write_file(ctx, "plan.json", plan_json, NULL) ||
      !write_file(ctx, "report.md", report, NULL)) {
    ctx->exit_code = HX_EXIT_INPUT; /* the output directory, not hexic, is at fault */
    return false;
  }
  /* One simulation with its events recorded, for trace.json and plan.svg
   * both (the passes keep no events): it fills plan->sim as the simulate
   * pass did, so plan.json and report.md, written above, read the same. */
  struct hx_sim_options sim = {.record_events = true, .arena = &ctx->arena};
  hx_simulate(ctx, ctx->plan, &sim);
  if (!write_file(ctx, "trace.json", hx_emit_trace, &sim) ||
      !write_file(ctx, "plan.svg", hx_emit_svg, &sim)) {
    ctx->exit_code = HX_EXIT_INPUT; /* the output directory, not hexic, is at fault */
    return false;
  }
  ctx->exit_code = hx_emit_programs(ctx, dir);
  if (ctx->exit_code != HX_EXIT_OK)
    return false;
  hx_print_summary(ctx, stdout);
  return true;
}
