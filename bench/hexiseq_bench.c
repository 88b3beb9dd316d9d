/* hexiseq_bench MODEL.hx CLUSTER.hx: the front end, the symmetric baseline
 * and the HexiSeq scheduler, then one line: hexic's simulated iteration
 * against each baseline's, the speed-up over the best and the scheduler's
 * wall time. bench/hexiseq_bench.sh runs it over the paper-like settings. */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "passes/hexiseq/hexiseq.h"
#include "passes/passes.h"

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static double baseline_s(const struct hx_plan *p, const char *kind) {
  for (int i = 0; i < p->nbaselines; i++)
    if (!strcmp(p->baselines[i]->strategy, kind))
      return p->baselines[i]->sim.iteration_s;
  return 0;
}

static void cell(const char *name, double s) {
  if (s > 0)
    printf(" %s %.2f s", name, s);
  else
    printf(" %s -", name);
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: hexiseq_bench MODEL.hx CLUSTER.hx\n");
    return 2;
  }
  struct hx_ctx ctx;
  memset(&ctx, 0, sizeof ctx);
  hx_arena_init(&ctx.arena);
  ctx.opt.inputs = (const char **)argv + 1;
  ctx.opt.ninputs = argc - 1;
  /* GPU clusters: memory as the CUDA programs allocate it (the plan's bf16;
   * the CPU target's fp32 would double every activation, issue 25) */
  ctx.opt.target = HX_TARGET_CUDA;
  if (!hx_pass_parse(&ctx) || !hx_pass_sema(&ctx) || !hx_pass_model_stats(&ctx) ||
      !hx_pass_cluster_table(&ctx) || !hx_pass_baseline(&ctx)) {
    hx_arena_free(&ctx.arena);
    return 1;
  }
  bool needed = hx_hexiseq_needed(&ctx);
  double t0 = now_s();
  struct hx_plan *p = hx_hexiseq_schedule(&ctx);
  double wall = now_s() - t0;
  if (!p) {
    hx_arena_free(&ctx.arena);
    return 3;
  }
  hx_verify_plan(&ctx, p);
  const struct hx_plan *b = ctx.baseline;
  printf("%s %lldK on %d GPUs: hexic %.2f s (%s)", ctx.model.name,
         (long long)(ctx.model.seq_len / 1024), ctx.cluster.ndevices, p->sim.iteration_s,
         p->description);
  cell("ring", baseline_s(p, "ring"));
  cell("ulysses", baseline_s(p, "ulysses"));
  cell("usp", baseline_s(p, "usp"));
  cell("symmetric", baseline_s(p, "symmetric"));
  /* Where no baseline fits at all there is nothing to divide by: said in
   * words, so the bench's average only counts settings with a baseline. */
  if (b)
    printf(" | speed-up %.3fx over %s", b->sim.iteration_s / p->sim.iteration_s, b->strategy);
  else
    printf(" | no baseline fits");
  printf(" | split needed %s | scheduler %.2f s\n", needed ? "yes" : "no", wall);
  hx_arena_free(&ctx.arena);
  return 0;
}
