/* schedule: the plan hexic emits.
 *  - --plan=FILE: the plan in the file, as it is, after checking it;
 *  - --strategy=symmetric: the best symmetric (Megatron) plan;
 *  - --strategy=symmetric-subset: the best symmetric plan on a subset of the
 *    devices (the stronger baseline where slow devices are better left out);
 *  - --strategy=exhaustive: the exact planner (clusters of <= 8 devices);
 *  - --strategy=hexiseq, or `auto` when one sequence's activations keep every
 *    symmetric shape out of memory (or when the HexiScale search finds
 *    nothing that fits): the HexiSeq planner (passes/hexiseq/hexiseq.c),
 *    asymmetric context x head parallelism inside a DP/TP/PP frame; it makes
 *    ctx->baseline the best of Ring / Ulysses / USP / symmetric;
 *  - otherwise the HexiScale search (passes/schedule/sched_search.c), which keeps the
 *    symmetric baseline as a candidate, so hexic is never slower than it.
 * When nothing fits, the run ends with exit 3 and the smallest memory
 * shortfall found (HexiSeq reports its own reason). */
#include "ir/plan_util.h"
#include "passes/hexiseq/hexiseq.h"
#include "passes/planload/plan_load.h"
#include "passes.h"
#include "passes/schedule/sched.h"

/* A baseline as the plan, labelled: --strategy=symmetric (every device) and
 * --strategy=symmetric-subset (what an engineer who leaves the slow devices
 * out runs, to train and measure it beside hexic's plan: bench/measured.sh).
 * NULL when that baseline fits nowhere. */
static struct hx_plan *baseline_plan(struct hx_ctx *ctx, const struct hx_plan *baseline,
                                     const char *strategy) {
  if (!baseline)
    return NULL;
  struct hx_plan *p = hx_plan_copy(&ctx->arena, baseline);
  p->strategy = strategy;
  return p;
}


static struct hx_plan *choose_plan(struct hx_ctx *ctx) {
  switch (ctx->opt.strategy) {
  case HX_STRAT_SYMMETRIC:
    return baseline_plan(ctx, ctx->baseline, "symmetric");
  case HX_STRAT_SUBSET:
    return baseline_plan(ctx, ctx->baseline_subset, "symmetric-subset");
  case HX_STRAT_EXHAUSTIVE:
    return hx_sched_exhaustive(ctx);
  default:
    return hx_sched_search(ctx);
  }
}

/* HexiSeq when forced, or when `auto` finds a sequence too long for every
 * symmetric shape (hexiseq.h): splitting one sequence is the only way then. */
static bool wants_hexiseq(const struct hx_ctx *ctx) {
  if (ctx->opt.strategy == HX_STRAT_HEXISEQ)
    return true;
  return ctx->opt.strategy == HX_STRAT_AUTO && hx_hexiseq_needed(ctx);
}

/* From this many tokens on, `auto` also prices HexiSeq when the sequence
 * would fit whole: splitting it can still be faster (attention grows with
 * the square of the length), so both planners run and the faster plan wins. */
enum { LONG_SEQUENCE = 32768 };

static struct hx_plan *faster_of_both(struct hx_ctx *ctx) {
  struct hx_plan *scale = hx_sched_search(ctx);
  /* hx_hexiseq_schedule makes ctx->baseline the best of its baselines, the
   * symmetric one included, so either winner is compared with the best */
  struct hx_plan *seq = hx_hexiseq_schedule(ctx);
  if (!seq)
    return scale;
  if (!scale || seq->sim.iteration_s < scale->sim.iteration_s)
    return seq;
  return scale;
}

/* Whether a stage of the plan runs TP over a link slower than its machines'
 * own: the HexiScale search does that only as a last resort, when nothing
 * else fits (sched.h, tp_any_link), which is where split sequences may fit
 * far better. */
static bool tp_over_slow_links(const struct hx_ctx *ctx, const struct hx_plan *plan) {
  for (int i = 0; i < plan->npipelines; i++)
    for (int j = 0; j < plan->pipelines[i].nstages; j++) {
      const struct hx_stage *st = &plan->pipelines[i].stages[j];
      for (int k = 1; k < st->ndevices && !st->seq_layout; k++)
        if (!hx_sched_may_share_tp(&ctx->cluster, st->devices[0], st->devices[k]))
          return true;
    }
  return false;
}

/* The faster of plan and HexiSeq's (NULL when neither). */
static struct hx_plan *faster_with_hexiseq(struct hx_ctx *ctx, struct hx_plan *plan) {
  struct hx_plan *seq = hx_hexiseq_try(ctx);
  if (!seq)
    return plan;
  if (!plan || seq->sim.iteration_s < plan->sim.iteration_s)
    return seq;
  return plan;
}

static struct hx_plan *searched_plan(struct hx_ctx *ctx) {
  if (wants_hexiseq(ctx))
    return hx_hexiseq_schedule(ctx); /* reports why when nothing fits */
  struct hx_plan *plan = NULL;
  if (ctx->opt.strategy == HX_STRAT_AUTO && ctx->model.seq_len >= LONG_SEQUENCE)
    plan = faster_of_both(ctx);
  else
    plan = choose_plan(ctx);
  /* faster_of_both tried HexiSeq already */
  if (!plan && ctx->opt.strategy == HX_STRAT_AUTO && ctx->model.seq_len < LONG_SEQUENCE) {
    /* hx_hexiseq_needed decides from the symmetric shapes at their own
     * memory estimate; where none is legal at all (6 devices, global batch
     * 4) it cannot tell, and where one misses by a little (tiny-long in
     * bf16 on cpu8-long: 0.9 MiB on one device) the HexiScale search finds
     * nothing that fits although split sequences do: they are what is left.
     * With no legal symmetric shape HexiSeq reports its own reason, else
     * the HexiScale shortfall below is the one reported. HexiSeq carries
     * one sequence per micro-batch, so a train block that sets a larger
     * micro_batch keeps whole sequences (and that report). */
    if (hx_hexiseq_no_symmetric_shape(ctx))
      plan = hx_hexiseq_schedule(ctx);
    else if (ctx->train.micro_batch <= 1)
      plan = hx_hexiseq_try(ctx);
  } else if (plan && ctx->opt.strategy == HX_STRAT_AUTO && ctx->model.seq_len < LONG_SEQUENCE &&
             ctx->train.micro_batch <= 1 && tp_over_slow_links(ctx, plan)) {
    /* HexiScale fitted only by TP over slow links (tiny-long in bf16 on
     * cpu8-long: TP 4 over two machines, 0.72 s, where HexiSeq takes
     * 0.19 s): the faster of both */
    plan = faster_with_hexiseq(ctx, plan);
  }
  if (!plan)
    hx_report_no_plan(ctx);
  return plan;
}

bool hx_pass_schedule(struct hx_ctx *ctx) {
  if (!ctx->has_model || !ctx->has_train || ctx->cluster.ndevices <= 0)
    return true;
  if (ctx->opt.plan_file) {
    ctx->plan = hx_plan_load(ctx, ctx->opt.plan_file);
    return ctx->plan != NULL;
  }
  if (ctx->opt.strategy == HX_STRAT_EXHAUSTIVE &&
      ctx->cluster.ndevices > HX_EXHAUSTIVE_MAX_DEVICES) {
    hx_error_plain("--strategy=exhaustive plans clusters of at most %d devices; this one has %d",
                   HX_EXHAUSTIVE_MAX_DEVICES, ctx->cluster.ndevices);
    return false;
  }
  ctx->plan = searched_plan(ctx);
  hx_hexiseq_warn_micro_batch(ctx, ctx->plan);
  return ctx->plan != NULL;
}
