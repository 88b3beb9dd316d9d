/* The emit pass: everything hexic writes into -o DIR — plan.json, report.md,
 * trace.json, plan.svg, then the per-rank programs — and the summary on
 * stdout. It lives here, the floor above passes/, because it calls
 * codegen/'s writers: a pass never includes a floor above its own. */
#include <errno.h>
#include <string.h>
#include <sys/stat.h>

#include "codegen.h"
#include "ir/plan_util.h"

static bool write_file(struct hx_ctx *ctx, const char *name,
                       bool (*writer)(const struct hx_ctx *, FILE *)) {
  const char *path = hx_sprintf(&ctx->arena, "%s/%s", ctx->opt.out_dir, name);
  FILE *f = fopen(path, "w");
  if (!f) {
    hx_error_plain("cannot write %s: %s", path, strerror(errno));
    return false;
  }
  bool ok = writer(ctx, f);
  if (fclose(f) != 0 || !ok) {
    hx_error_plain("cannot write %s", path);
    return false;
  }
  return true;
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
  if (!write_file(ctx, "plan.json", hx_emit_plan_json) ||
      !write_file(ctx, "report.md", hx_emit_report) || !write_file(ctx, "trace.json", hx_emit_trace) ||
      !write_file(ctx, "plan.svg", hx_emit_svg)) {
    ctx->exit_code = HX_EXIT_INPUT; /* the output directory, not hexic, is at fault */
    return false;
  }
  ctx->exit_code = hx_emit_programs(ctx, dir);
  if (ctx->exit_code != HX_EXIT_OK)
    return false;
  hx_print_summary(ctx, stdout);
  return true;
}
