/* The per-rank programs: rank_NNNN.c for every rank the plan uses, plus the
 * Makefile, launch.sh and slurm.sbatch that build and run them.
 *
 * A rank program holds its part of the plan as literal tables (rtlib/hexic_rt.h
 * defines them) and calls hx_rt_main. The text is written in the repository's
 * .clang-format style directly — one table entry per line with aligned
 * trailing comments, because clang-format would re-pack bare lists into
 * columns — so running clang-format over the output changes nothing. Nothing
 * time- or path-dependent is written except HEXIC_HOME's default, so two
 * compilations of the same inputs give the same bytes. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "codegen.h"
#include "emit_programs.h"
#include "passes/cost/cost.h"

/* Copied beside the output so `clang-format` there uses the style the text
 * was written in; must stay equal to the repository's .clang-format (a test
 * compares them). */
static const char clang_format_text[] =
    "# The style of hexic's own sources and of the code it generates (the emitter\n"
    "# writes in this style and copies this file beside its output).\n"
    "BasedOnStyle: LLVM\n"
    "ColumnLimit: 100\n";

/* The target as the refusals below name it. */
static const char *target_name(const struct hx_ctx *ctx) {
  return ctx->opt.target == HX_TARGET_CUDA ? "CUDA" : "CPU";
}

/* The runtime executes data, pipeline and tensor parallelism (each stage its
 * own TP degree, uneven splits allowed) and HexiSeq's context/head parallel
 * stages (units of tp devices, uneven tokens and heads: rtlib/seq/, whose
 * hook runs on the CUDA device's kernels too, in fp32 buffers that a bf16
 * layer fills from its own and rounds back). */
static bool stage_supported(const struct hx_ctx *ctx, const struct hx_stage *st, int p, int s) {
  bool seq = st->cp != 1 || st->hp != 1 || st->seq_layout;
  if (seq && !st->seq_layout) {
    hx_error_plain("pipeline %d stage %d has cp=%d hp=%d but no HexiSeq layout (token ranges "
                   "and heads per device): nothing says which tokens each rank holds",
                   p, s, st->cp, st->hp);
    return false;
  }
  /* The kernels read a local length of 0 as the whole sequence, so a unit
   * holding no tokens (its heads would still take part in the all-to-all)
   * cannot be expressed to them yet. */
  for (int u = 0; st->seq_layout && u < st->seq_layout->nunits; u++)
    if (st->seq_layout->tokens[u] < 1) {
      hx_error_plain("pipeline %d stage %d: unit %d (rank %d) holds no tokens of the sequence; the "
                     "generated programs need at least one token per unit",
                     p, s, u, st->devices[u * st->tp]);
      return false;
    }
  int units = st->seq_layout ? st->ndevices / st->tp : 1;
  if (st->tp < 1 || st->ndevices != st->tp * units || st->tp > ctx->model.heads) {
    hx_error_plain("pipeline %d stage %d: tp=%d over %d devices cannot split %lld heads", p, s,
                   st->tp, st->ndevices, (long long)ctx->model.heads);
    return false;
  }
  return true;
}

static bool plan_supported(const struct hx_ctx *ctx, const struct hx_plan *plan) {
  if (ctx->train.optimizer != HX_OPT_ADAMW) {
    hx_error_plain("the generated %s programs implement only optimizer = adamw", target_name(ctx));
    return false;
  }
  for (int p = 0; p < plan->npipelines; p++)
    for (int s = 0; s < plan->pipelines[p].nstages; s++)
      if (!stage_supported(ctx, &plan->pipelines[p].stages[s], p, s))
        return false;
  return true;
}

static void emit_clang_format(const struct program_set *set, FILE *f, int unused) {
  (void)set, (void)unused;
  fputs(clang_format_text, f);
}

/* The most table rows (schedule steps, gradient-group members, HexiSeq
 * unit rows; one line of about 30 bytes each) the rank programs may hold
 * together: about 250 MB of C. They grow with micro-batches x stages and,
 * as every rank lists its gradient groups' members, with devices squared: a
 * 16M-sequence batch on 8 devices wrote 8 files of up to 38 MB, 16M-token
 * sequences on 4096 devices 2.5 GB in 4096 files (and 8 GB of memory). */
#define HX_PROGRAMS_MAX_ROWS (8LL << 20)

/* Table rows of world rank w's program: its schedule, the members of every
 * group it belongs to, and its HexiSeq stage's unit rows and split tables
 * (counted as units squared over its groups' units, at least the units). */
static int64_t rank_rows(const struct program_set *set, int w) {
  const struct hx_prog_rank *r = &set->ranks[w];
  int64_t rows = r->nsteps + r->nunits;
  for (int g = 0; g < set->ngroups; g++)
    if (hx_group_has_rank(&set->groups[g], w))
      rows += set->groups[g].nranks;
  const struct hx_seq_layout *l = r->st ? r->st->seq_layout : NULL;
  if (l && l->ngroups > 0)
    rows += (int64_t)l->nunits * l->nunits / l->ngroups;
  return rows;
}

/* Refuses (exit 2, nothing of the programs written) a program set over
 * HX_PROGRAMS_MAX_ROWS, saying what to change. */
static bool program_size_ok(const struct program_set *set) {
  int64_t rows = 0, steps = 0;
  for (int w = 0; w < set->nranks && rows <= HX_PROGRAMS_MAX_ROWS; w++) {
    rows += rank_rows(set, w);
    steps += set->ranks[w].nsteps;
  }
  if (rows <= HX_PROGRAMS_MAX_ROWS)
    return true;
  bool schedule = steps > rows / 2; /* what most of it is */
  hx_error_plain("the %d rank programs would hold more than %lld table rows (about %lld MB of C), "
                 "the most hexic writes: %s; plan.json, report.md and trace.json are written",
                 set->nranks, (long long)HX_PROGRAMS_MAX_ROWS,
                 (long long)(HX_PROGRAMS_MAX_ROWS * 30 >> 20),
                 schedule ? "each rank lists one schedule step per micro-batch, so use fewer "
                            "micro-batches (a larger micro_batch or a smaller global_batch in the "
                            "train block)"
                          : "each rank lists the members of its gradient-sync groups and HexiSeq "
                            "units, which grow with the devices, so use fewer devices");
  return false;
}

/* Calls emit(set, f, arg) with f open on dir/name; mode 0 keeps fopen's. */
static bool write_file(const struct program_set *set, const char *dir, const char *name, int mode,
                       void (*emit)(const struct program_set *, FILE *, int), int arg) {
  const char *path = hx_sprintf(hx_prog_arena(set), "%s/%s", dir, name); /* any length */
  FILE *f = fopen(path, "w");
  if (!f) {
    hx_error_plain("cannot write '%s': %s", path, strerror(errno));
    return false;
  }
  /* a large plan's rank sources are megabytes each: a 4 KiB block (stdio's
   * default) writes them in thousands of system calls */
  setvbuf(f, NULL, _IOFBF, 1 << 20);
  emit(set, f, arg);
  bool ok = !ferror(f);
  ok = fclose(f) == 0 && ok;
  if (ok && mode)
    ok = chmod(path, (mode_t)mode) == 0;
  if (!ok)
    hx_error_plain("cannot write '%s': %s", path, strerror(errno));
  return ok;
}

enum hx_exit hx_emit_programs(const struct hx_ctx *ctx, const char *dir) {
  bool cuda = ctx->opt.target == HX_TARGET_CUDA;
  const struct hx_plan *plan = ctx->plan;
  if (!plan)
    hx_internal_error("hx_emit_programs: no plan");
  if (!plan_supported(ctx, plan))
    return HX_EXIT_USAGE;
  if (mkdir(dir, 0777) != 0 && errno != EEXIST) {
    hx_error_plain("cannot create '%s': %s", dir, strerror(errno));
    return HX_EXIT_INPUT;
  }
  struct program_set set;
  hx_build_program_set(ctx, plan, &set);
  if (cuda) { /* what each rank checks against its GPU's free memory at start */
    set.memory_need = HX_NEW_ARRAY(hx_prog_arena(&set), double, plan->ndevices);
    hx_plan_memory(ctx, plan, set.memory_need, NULL, NULL);
  }
  if (!hx_plan_groups_agree(&set) || (cuda && !hx_cuda_plan_supported(&set)) ||
      !program_size_ok(&set))
    return HX_EXIT_USAGE;
  for (int r = 0; r < set.nranks; r++) {
    char name[32];
    snprintf(name, sizeof name, "rank_%04d.c", r);
    if (!write_file(&set, dir, name, 0, hx_emit_rank_source, r))
      return HX_EXIT_INPUT;
  }
  bool ok =
      write_file(&set, dir, "Makefile", 0, cuda ? hx_emit_cuda_makefile : hx_emit_makefile, 0) &&
      write_file(&set, dir, "launch.sh", 0755, hx_emit_launch_script, 0) &&
      write_file(&set, dir, "slurm.sbatch", 0644, hx_emit_slurm_script, 0) &&
      write_file(&set, dir, ".clang-format", 0, emit_clang_format, 0);
  return ok ? HX_EXIT_OK : HX_EXIT_INPUT;
}
