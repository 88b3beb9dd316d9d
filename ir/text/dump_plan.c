/* The stable text form of a plan (--print-after=baseline|schedule|simulate):
 * fixed field order, numbers printed with fixed precision, no pointers. */
#include "dump.h"
#include "ir/plan_util.h"

static void dump_stage(const struct hx_stage *st, int s, FILE *f) {
  fprintf(f, "    stage %d: layers [%d, %d) tp %d cp %d hp %d leader %d%s ranks [", s,
          st->layer_begin, st->layer_end, st->tp, st->cp, st->hp, st->leader,
          st->recompute ? " recompute" : "");
  for (int k = 0; k < st->ndevices; k++)
    fprintf(f, "%s%d", k ? ", " : "", st->devices[k]);
  fputs("]\n", f);
}

static void dump_group(const struct hx_group *g, FILE *f) {
  fprintf(f, "  group %s layers [%d, %d) slice %d/%d ranks [", hx_group_kind_name(g->kind),
          g->layer_begin, g->layer_end, g->slice, g->nslices);
  for (int k = 0; k < g->nranks; k++)
    fprintf(f, "%s%d", k ? ", " : "", g->ranks[k]);
  fputs("]\n", f);
}

static void dump_sim(const struct hx_plan *p, FILE *f) {
  const struct hx_sim_result *r = &p->sim;
  if (!r->valid)
    return;
  fprintf(f, "  simulated: iteration %.6f s, %.1f tokens/s, mfu %.4f, bubble %.4f\n",
          r->iteration_s, r->tokens_per_s, r->mfu, r->bubble);
  fprintf(f, "  time: pipeline %.6f s, busiest compute %.6f s, grad sync tail %.6f s, "
             "optimizer %.6f s\n",
          r->pipeline_s, r->compute_s, r->grad_sync_s, r->optimizer_s);
  for (int d = 0; d < p->ndevices; d++)
    if (p->devices[d].pipeline >= 0)
      fprintf(f, "  rank %d: busy %.6f s, peak memory %.3f GiB\n", d, r->busy_s[d],
              r->peak_memory[d] / 1073741824.0);
}

void hx_dump_plan(const struct hx_ctx *ctx, const struct hx_plan *p, FILE *f) {
  (void)ctx;
  fprintf(f, "plan %s \"%s\" schedule %s, %d pipelines\n", p->strategy ? p->strategy : "?",
          p->description ? p->description : "", p->schedule == HX_PP_GPIPE ? "gpipe" : "1f1b",
          p->npipelines);
  for (int i = 0; i < p->npipelines; i++) {
    const struct hx_pipeline *pl = &p->pipelines[i];
    fprintf(f, "  pipeline %d: %lld micro-batches of %lld\n", i, (long long)pl->micro_batches,
            (long long)pl->micro_batch_size);
    for (int s = 0; s < pl->nstages; s++)
      dump_stage(&pl->stages[s], s, f);
  }
  for (int g = 0; g < p->ngroups; g++)
    dump_group(&p->groups[g], f);
  dump_sim(p, f);
}
