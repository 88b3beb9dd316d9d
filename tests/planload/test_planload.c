/* plan.json round trips of random HexiSeq plans (issue 7 item 1): random
 * layouts (ragged groups, uneven tokens and heads, any front/back split,
 * units without heads) are built into plans, written by hx_emit_plan_json,
 * read back by hx_plan_load, and must come back with the same layouts,
 * device tables, group tables and simulated figures. A plan with a unit
 * holding no tokens, which the generated programs cannot run (issue 24 item
 * 13), must be refused with a located error instead. The IR is filled by
 * hand.
 * usage: test_planload WORK_DIR */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/codegen.h"
#include "passes/cost/cost.h"
#include "ir/plan_util.h"
#include "passes/hexiseq/hexiseq.h"
#include "passes/passes.h"
#include "passes/planload/plan_load.h"

#include "tests/fixture.h"

static uint64_t rng = 0x9E3779B97F4A7C15ULL;

static void set_model(struct hx_ctx *ctx) {
  fx_model(ctx, "roundtrip", 4, 512, 1365, 16, 4, 32000, 1000); /* seq not a power of two */
  fx_train(ctx, HX_RECOMPUTE_AUTO, 4); /* the trials recompute some stages only */
}

/* Four nodes of four GPUs, two types alternating, fast links inside a node. */
static void set_cluster(struct hx_ctx *ctx) {
  int types[] = {0, 1, 0, 1};
  double tf[] = {300, 100}, mem[] = {80, 80};
  fx_cluster(ctx, 4, 4, types, tf, mem, 2, 100e9, 10e9, 1e-6);
  ctx->cluster.gpus[0].name = "fast";
  ctx->cluster.gpus[1].name = "slow";
}

static bool same_layout(const struct hx_seq_layout *a, const struct hx_seq_layout *b,
                        int64_t seq_len) {
  if (!a || !b || a->tp != b->tp || a->nunits != b->nunits || a->ngroups != b->ngroups)
    return false;
  bool same = !memcmp(a->order, b->order, sizeof(int) * (size_t)a->nunits) &&
              !memcmp(a->group_start, b->group_start, sizeof(int) * (size_t)(a->ngroups + 1));
  for (int u = 0; same && u < a->nunits; u++) {
    struct hx_range ra[2], rb[2];
    int na = hx_seq_unit_ranges(a, seq_len, u, ra), nb = hx_seq_unit_ranges(b, seq_len, u, rb);
    same = a->tokens[u] == b->tokens[u] && a->heads[u] == b->heads[u] && na == nb &&
           !memcmp(ra, rb, sizeof ra[0] * (size_t)na);
  }
  return same;
}

static bool same_devices(const struct hx_plan *a, const struct hx_plan *b) {
  for (int r = 0; r < a->ndevices; r++) {
    const struct hx_device_plan *x = &a->devices[r], *y = &b->devices[r];
    if (x->pipeline != y->pipeline || x->stage != y->stage || x->tp_rank != y->tp_rank ||
        x->cp_rank != y->cp_rank || x->hp_rank != y->hp_rank || x->nseq != y->nseq ||
        x->heads.begin != y->heads.begin || x->heads.end != y->heads.end ||
        memcmp(x->seq, y->seq, sizeof x->seq[0] * (size_t)x->nseq))
      return false;
  }
  return true;
}

static bool same_groups(const struct hx_plan *a, const struct hx_plan *b) {
  if (a->ngroups != b->ngroups)
    return false;
  for (int g = 0; g < a->ngroups; g++) {
    const struct hx_group *x = &a->groups[g], *y = &b->groups[g];
    long cells = (long)x->nranks * x->nranks;
    if (x->kind != y->kind || x->nranks != y->nranks ||
        memcmp(x->ranks, y->ranks, sizeof(int) * (size_t)x->nranks) ||
        !x->split_table != !y->split_table ||
        (x->split_table && memcmp(x->split_table, y->split_table, sizeof(int64_t) * (size_t)cells)))
      return false;
  }
  return true;
}

/* Whether some unit of the plan holds no tokens. */
static bool has_empty_unit(const struct hx_plan *p) {
  for (int i = 0; i < p->npipelines; i++)
    for (int s = 0; s < p->pipelines[i].nstages; s++) {
      const struct hx_seq_layout *l = p->pipelines[i].stages[s].seq_layout;
      for (int u = 0; l && u < l->nunits; u++)
        if (l->tokens[u] == 0)
          return true;
    }
  return false;
}

/* The reader refuses such a plan: NULL, one located error at a 'seq'. */
static void refused(struct hx_ctx *ctx, const char *path, int trial) {
  char *text = NULL;
  size_t len = 0;
  FILE *diag = open_memstream(&text, &len);
  CHECK(diag != NULL);
  if (!diag)
    return;
  hx_diag_set_stream(diag);
  int before = hx_error_count();
  struct hx_plan *q = hx_plan_load(ctx, path);
  hx_diag_set_stream(stderr);
  fclose(diag);
  CHECK(q == NULL && hx_error_count() == before + 1);
  CHECK(strstr(text, "plan.json:") && strstr(text, ": error: rank ") &&
        strstr(text, " holds no tokens of the sequence"));
  if (q || !strstr(text, "holds no tokens"))
    fprintf(stderr, "trial %d: a unit without tokens was not refused:\n%s", trial, text);
  free(text);
  hx_diag_reset();
}

/* Writes the plan as plan.json at path, reads it back, compares (or, with
 * an empty unit, checks that it is refused). Returns whether it round-tripped. */
static bool round_trip(struct hx_ctx *ctx, struct hx_plan *p, const char *path, int trial) {
  CHECK(hx_simulate(ctx, p, NULL));
  ctx->plan = p;
  FILE *f = fopen(path, "w");
  CHECK(f != NULL);
  if (!f)
    return false;
  CHECK(hx_emit_plan_json(ctx, f));
  fclose(f);
  if (has_empty_unit(p)) {
    refused(ctx, path, trial);
    return false;
  }
  struct hx_plan *q = hx_plan_load(ctx, path);
  CHECK(q != NULL);
  if (!q) {
    fprintf(stderr, "trial %d: %s not read back\n", trial, path);
    return false;
  }
  hx_verify_plan(ctx, q);
  for (int i = 0; i < p->npipelines; i++)
    for (int s = 0; s < p->pipelines[i].nstages; s++)
      CHECK(same_layout(p->pipelines[i].stages[s].seq_layout, q->pipelines[i].stages[s].seq_layout,
                        ctx->model.seq_len));
  CHECK(same_devices(p, q));
  CHECK(same_groups(p, q));
  CHECK(hx_simulate(ctx, q, NULL));
  /* a lone chunk where the zig-zag cursors meet reads back as a front
   * chunk: the same tokens, the causal pairs summed in another order */
  NEAR(q->sim.iteration_s, p->sim.iteration_s);
  for (int r = 0; r < p->ndevices; r++)
    NEAR(q->sim.peak_memory[r], p->sim.peak_memory[r]);
  return true;
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: test_planload WORK_DIR\n");
    return 2;
  }
  struct hx_ctx ctx;
  fx_init(&ctx);
  set_model(&ctx);
  set_cluster(&ctx);
  const char *path = hx_sprintf(&ctx.arena, "%s/plan.json", argv[1]);
  int done = 0, empty = 0;
  for (int trial = 0; trial < 120; trial++) {
    int tp = 1 << fx_below(&rng, 3), pp = 1 + fx_below(&rng, 2), dp = 1 + fx_below(&rng, 2);
    ctx.train.global_batch = dp * 2;
    struct hx_seq_frame *f =
        hx_seq_frame_new(&ctx.arena, &ctx, dp, tp, pp, trial % 3 == 0, trial % 2);
    if (!f)
      continue;
    const struct hx_seq_layout **ls =
        HX_NEW_ARRAY(&ctx.arena, const struct hx_seq_layout *, dp *pp);
    for (int c = 0; c < dp * pp; c++)
      ls[c] = fx_random_layout(&ctx, &rng, f->cell[c], tp, f->units);
    struct hx_plan *p = hx_seq_plan_build(&ctx.arena, &ctx, f, ls, "hexiseq", "random");
    CHECK(hx_seq_check_plan(&ctx.arena, &ctx, p) == NULL);
    if (round_trip(&ctx, p, path, trial))
      done++;
    else
      empty++;
  }
  CHECK(done >= 80 && empty >= 5);
  printf("%d random HexiSeq plans round-tripped through plan.json, %d with an empty unit refused\n",
         done, empty);
  hx_arena_free(&ctx.arena);
  return failures != 0;
}
