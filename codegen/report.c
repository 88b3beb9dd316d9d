/* report.md (a table a person reads in a minute) and the summary lines on
 * stdout. Every figure comes from plan->sim and the cost model. */
#include <math.h>

#include "passes/cost/cost.h"
#include "ir/plan_util.h"
#include "ir/units.h"
#include "codegen.h"
#include "escape.h"

/* A user string in a Markdown cell or heading (codegen/escape.h). */
static const char *md(const struct hx_ctx *ctx, const char *s) {
  return hx_esc_markdown((struct hx_arena *)&ctx->arena, s);
}

static void stage_gpus(const struct hx_ctx *ctx, const struct hx_stage *st, FILE *f) {
  for (int k = 0; k < st->ndevices; k++)
    fprintf(f, "%s%s", k ? ", " : "", md(ctx, ctx->cluster.devices[st->devices[k]].name));
}

/* A memory cell: the planned peak as tensors + reserve, of the device's
 * memory ("2.5 MiB + 1.5 GiB of 4.0 GiB"). A bare "1.5 / 4.0" hid that a
 * small model's 1.5 GiB is all reserve. */
static const char *memory_cell(const struct hx_ctx *ctx, double need, double cap) {
  struct hx_arena *a = (struct hx_arena *)&ctx->arena;
  return hx_sprintf(a, "%s + %s of %s", hx_bytes_text(a, need - HX_MEMORY_RESERVE_BYTES),
                    hx_bytes_text(a, HX_MEMORY_RESERVE_BYTES), hx_bytes_text(a, cap));
}

/* One row of the stages table; true when its TP cell is marked SP. */
static bool stage_row(const struct hx_ctx *ctx, const struct hx_plan *p, int i, int s, FILE *f) {
  const struct hx_pipeline *pl = &p->pipelines[i];
  const struct hx_stage *st = &pl->stages[s];
  bool first = s == 0, last = s == pl->nstages - 1;
  bool sp = hx_stage_sequence_parallel(ctx, st);
  double t = hx_stage_fwd_s(ctx, st, first, last, pl->micro_batch_size) +
             hx_stage_bwd_s(ctx, st, first, last, pl->micro_batch_size);
  /* the stage's neediest device against its smallest: the units of a
   * context x head layout need different amounts */
  double cap = hx_stage_memory_capacity(&ctx->cluster, st), need = 0;
  for (int k = 0; k < st->ndevices; k++)
    need = fmax(need, p->sim.peak_memory[st->devices[k]]);
  fprintf(f, "| %d | %d | ", i, s);
  stage_gpus(ctx, st, f);
  fprintf(f, " | %d%s | [%d, %d)%s | %lld x %lld | %.3f | %s |\n", st->tp, sp ? " SP" : "",
          st->layer_begin, st->layer_end, st->recompute ? " recompute" : "",
          (long long)pl->micro_batches, (long long)pl->micro_batch_size, t,
          memory_cell(ctx, need, cap));
  return sp;
}

static void stage_rows(const struct hx_ctx *ctx, const struct hx_plan *p, FILE *f) {
  fputs("| pipeline | stage | GPUs | TP | layers | micro-batches x size | fwd+bwd per "
        "micro-batch (s) | memory: tensors + reserve of device |\n"
        "|---|---|---|---|---|---|---|---|\n",
        f);
  bool any_sp = false;
  for (int i = 0; i < p->npipelines; i++)
    for (int s = 0; s < p->pipelines[i].nstages; s++)
      any_sp |= stage_row(ctx, p, i, s, f);
  fprintf(f, "\nMemory: the planned peak of the stage's neediest device: its tensors (weights, "
             "gradients, optimizer state, activations; docs/memory-model.md) and a fixed %s "
             "reserve (CUDA context, NCCL buffers, fragmentation), of the smallest device's "
             "memory.\n",
          hx_bytes_text((struct hx_arena *)&ctx->arena, HX_MEMORY_RESERVE_BYTES));
  if (any_sp) /* explains the cell's mark, so only where a cell has it */
    fputs("\nTP `SP`: sequence parallel (norms and residuals on each TP rank's rows; "
          "context x head stages keep the TP all-reduces).\n",
          f);
}

/* HexiSeq plans: tokens and heads of every device (context x head layout). */
static void device_shards(const struct hx_ctx *ctx, const struct hx_plan *p, FILE *f) {
  bool any = false;
  for (int i = 0; i < p->npipelines; i++)
    for (int s = 0; s < p->pipelines[i].nstages; s++)
      any |= p->pipelines[i].stages[s].seq_layout != NULL;
  if (!any)
    return;
  fputs("\n## Tokens and heads per device\n\n| rank | GPU | pipeline | stage | CP group | HP rank "
        "| tokens | token ranges | heads |\n|---|---|---|---|---|---|---|---|---|\n",
        f);
  for (int r = 0; r < p->ndevices; r++) {
    const struct hx_device_plan *d = &p->devices[r];
    if (d->pipeline < 0)
      continue;
    int64_t tokens = 0;
    for (int k = 0; k < d->nseq; k++)
      tokens += d->seq[k].end - d->seq[k].begin;
    fprintf(f, "| %d | %s | %d | %d | %d | %d | %lld | ", r, md(ctx, ctx->cluster.devices[r].name),
            d->pipeline, d->stage, d->cp_rank, d->hp_rank, (long long)tokens);
    for (int k = 0; k < d->nseq; k++)
      fprintf(f, "%s[%lld, %lld)", k ? " " : "", (long long)d->seq[k].begin,
              (long long)d->seq[k].end);
    fprintf(f, " | [%lld, %lld) |\n", (long long)d->heads.begin, (long long)d->heads.end);
  }
}

/* ZeRO-1 plans: per used rank, the optimizer state it keeps (fp32 master and
 * Adam moments of its shards) and that as a share of its parameters'. */
static void optimizer_shards(const struct hx_ctx *ctx, const struct hx_plan *p, FILE *f) {
  if (p->optimizer_sharding != HX_SHARD_ZERO1)
    return;
  struct hx_arena *a = (struct hx_arena *)&ctx->arena;
  double *opt = HX_NEW_ARRAY(a, double, p->ndevices + 1);
  hx_plan_optimizer_params(ctx, p, opt);
  double per_param = hx_optimizer_state_bytes_per_param(&ctx->train), total = 0;
  for (int r = 0; r < p->ndevices; r++)
    total += opt[r];
  if (total * per_param < 1) /* a table of zero rows says nothing */
    return;
  fputs("\n## Optimizer state per rank (ZeRO-1)\n\n| rank | GPU | optimizer state (bytes) | "
        "size | share of its parameters |\n|---|---|---|---|---|\n",
        f);
  for (int i = 0; i < p->npipelines; i++)
    for (int s = 0; s < p->pipelines[i].nstages; s++) {
      const struct hx_stage *st = &p->pipelines[i].stages[s];
      double held = hx_stage_device_params(&ctx->model, st, s == 0,
                                           s == p->pipelines[i].nstages - 1);
      for (int k = 0; k < st->ndevices; k++) {
        int r = st->devices[k];
        double bytes = floor(opt[r] * per_param);
        fprintf(f, "| %d | %s | %.0f | %s | %.1f%% |\n", r,
                md(ctx, ctx->cluster.devices[r].name), bytes, hx_bytes_text(a, bytes),
                held > 0 ? 100 * opt[r] / held : 0.0);
      }
    }
}

static void figures(const struct hx_plan *p, FILE *f) {
  const struct hx_sim_result *r = &p->sim;
  /* a bubble of -4e-16 (rounding in the simulator's sums) read "-0.0%" */
  double bubble = fabs(r->bubble) < 1e-9 ? 0 : r->bubble;
  fprintf(f, "| iteration | %.3f s |\n|---|---|\n| tokens/s | %.0f |\n| MFU | %.1f%% |\n"
             "| pipeline bubble | %.1f%% |\n",
          r->iteration_s, r->tokens_per_s, 100 * r->mfu, 100 * bubble);
}

static void where_time_goes(const struct hx_plan *p, FILE *f) {
  const struct hx_sim_result *r = &p->sim;
  fprintf(f, "\n## Where the time goes\n\n"
             "- pipeline phase (forward and backward of every micro-batch): %.3f s, of which "
             "the busiest stage computes %.3f s\n"
             "- gradient synchronisation not hidden under the backward: %.3f s\n"
             "- optimizer step: %.3f s\n",
          r->pipeline_s, r->compute_s, r->grad_sync_s, r->optimizer_s);
}

static const struct hx_plan *valid(const struct hx_plan *b) { return b && b->sim.valid ? b : NULL; }

/* The faster of the two symmetric baselines (the all-device one on a tie),
 * the one hexic's headline speed-up is over; NULL when neither fits. */
static const struct hx_plan *stronger(const struct hx_ctx *ctx) {
  const struct hx_plan *b = valid(ctx->baseline), *s = valid(ctx->baseline_subset);
  if (s && (!b || s->sim.iteration_s < b->sim.iteration_s))
    return s;
  return b;
}

static const char *which(const struct hx_ctx *ctx, const struct hx_plan *b) {
  if (b != ctx->baseline)
    return "symmetric on a subset of the devices";
  /* HexiSeq plans: ctx->baseline is the best of their baselines[] */
  return ctx->plan->nbaselines ? "the best of Ring, Ulysses, USP and Megatron-LM on every device"
                               : "Megatron-LM on every device";
}

/* Ranks a baseline uses, by name, in report.md. */
static void baseline_devices(const struct hx_ctx *ctx, const struct hx_plan *b, FILE *f) {
  int n = hx_plan_used_devices(b);
  fprintf(f, "Devices (%d of %d): ", n, ctx->cluster.ndevices);
  const char *sep = "";
  for (int r = 0; r < b->ndevices; r++)
    if (b->devices[r].pipeline >= 0) {
      fprintf(f, "%s%s", sep, md(ctx, ctx->cluster.devices[r].name));
      sep = ", ";
    }
  fputs("\n\n", f);
}

/* Both symmetric baselines, each with its figures and hexic's speed-up over
 * it, then the speed-up over the stronger one and which it is. */
static void baselines_section(const struct hx_ctx *ctx, const struct hx_plan *p, FILE *f) {
  const struct hx_plan *b = valid(ctx->baseline), *s = valid(ctx->baseline_subset);
  if (b) {
    fprintf(f, "\n## Symmetric baseline (Megatron-LM, every device): %s\n\n", b->description);
    figures(b, f);
    fprintf(f, "\nSpeed-up over it: %.2fx\n", b->sim.iteration_s / p->sim.iteration_s);
  } else {
    fputs("\n## Symmetric baseline (Megatron-LM, every device)\n\nNo symmetric plan fits this "
          "cluster's memory.\n",
          f);
  }
  if (s) {
    fprintf(f, "\n## Best symmetric plan on a subset of the devices: %s\n\n", s->description);
    baseline_devices(ctx, s, f);
    figures(s, f);
    fprintf(f, "\nSpeed-up over it: %.2fx\n", s->sim.iteration_s / p->sim.iteration_s);
  }
  const struct hx_plan *strong = stronger(ctx);
  if (strong)
    fprintf(f, "\nSpeed-up over the stronger baseline (%s): **%.2fx**\n", which(ctx, strong),
            strong->sim.iteration_s / p->sim.iteration_s);
}

bool hx_emit_report(const struct hx_ctx *ctx, FILE *f) {
  const struct hx_plan *p = ctx->plan;
  fprintf(f, "# hexic plan: %s on %d devices\n\nStrategy **%s**", md(ctx, ctx->model.name),
          ctx->cluster.ndevices, p->strategy);
  if (p->description)
    fprintf(f, " (%s)", p->description);
  fprintf(f, ", schedule %s, %lld parameters.\n\n![plan](plan.svg)\n\n## Stages\n\n",
          p->schedule == HX_PP_GPIPE ? "GPipe" : "1F1B", (long long)ctx->model.params_total);
  stage_rows(ctx, p, f);
  device_shards(ctx, p, f);
  optimizer_shards(ctx, p, f);
  fputs("\n## Simulated iteration\n\n", f);
  figures(p, f);
  baselines_section(ctx, p, f);
  where_time_goes(p, f);
  return !ferror(f);
}

void hx_print_summary(const struct hx_ctx *ctx, FILE *f) {
  const struct hx_plan *p = ctx->plan, *b = valid(ctx->baseline), *s = valid(ctx->baseline_subset);
  if (!p)
    return;
  fprintf(f, "plan: %s%s%s, %d pipeline%s over %d of %d devices\n", p->strategy,
          p->description ? " " : "", p->description ? p->description : "", p->npipelines,
          p->npipelines == 1 ? "" : "s", hx_plan_used_devices(p), ctx->cluster.ndevices);
  fprintf(f, "iteration: %.3f s, %.0f tokens/s, MFU %.1f%%\n", p->sim.iteration_s,
          p->sim.tokens_per_s, 100 * p->sim.mfu);
  if (b)
    fprintf(f, "baseline: %s, %.3f s; speed-up %.2fx\n", b->description, b->sim.iteration_s,
            b->sim.iteration_s / p->sim.iteration_s);
  else
    fputs("baseline: no symmetric plan fits\n", f);
  if (s)
    fprintf(f, "baseline on a subset: %s, %.3f s; speed-up %.2fx\n", s->description,
            s->sim.iteration_s, s->sim.iteration_s / p->sim.iteration_s);
  else
    fputs("baseline on a subset: no symmetric plan fits any subset\n", f);
  const struct hx_plan *strong = stronger(ctx);
  if (strong)
    fprintf(f, "speed-up over the stronger baseline (%s): %.2fx\n", which(ctx, strong),
            strong->sim.iteration_s / p->sim.iteration_s);
}
