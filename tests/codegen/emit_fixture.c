/* Emits the per-rank programs of a hand-built plan, so the codegen and the
 * executor can be tested on plan shapes chosen exactly (uneven batches,
 * uneven layer splits, several stages) whatever the planner would pick.
 *
 *   emit_fixture OUTDIR PLAN [--tied] [--cuda] [--cp] [--heads6] [--no-sp]
 *
 * PLAN lists pipelines separated by ';', each "MBSxM@S1,S2,..." — micro-batch
 * size, micro-batch count, and one item per stage: "END[:TP][l][r]", the end
 * layer of the stage (the last is the layer count), its TP degree (default
 * 1), 'l' to make its last TP rank the leader instead of the first, 'r' for
 * activation recompute. Example: "2x2@4:2;1x4@1,4r" is two pipelines: 4
 * sequences on one stage of TP 2, and 4 sequences over stages [0,1) and
 * [1,4), the second recomputing. The model is the tiny one of
 * examples/models/tiny.hx (--heads6: hidden 96 with 6 heads over 2 kv heads,
 * so TP 3 and 4 replicate kv heads); devices are numbered in pipeline order,
 * TP ranks consecutive. --cp gives the first stage cp = 2 (a shape the emitter
 * must refuse). Sequence parallelism is on (the train block's default), off
 * with --no-sp. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/codegen.h"

#include "tests/fixture.h"

enum { MAX_STAGES = 16, MAX_PIPELINES = 16 };

static void set_model(struct hx_ctx *ctx, bool tied, bool heads6) {
  fx_model(ctx, "tiny", 4, 64, 176, 4, 2, 256, 64);
  struct hx_model *m = &ctx->model;
  m->rope_theta = 10000.0;
  m->norm_eps = 1e-5;
  m->tie_embeddings = tied;
  if (heads6) {
    m->hidden = 96;
    m->heads = 6;
  }
  struct hx_train *t = &ctx->train;
  t->lr = 1e-3;
  t->beta1 = 0.9;
  t->beta2 = 0.95;
  t->eps = 1e-8;
  t->weight_decay = 0.1;
  t->grad_clip = 1.0;
  t->warmup_steps = 10;
  t->steps = 300;
  t->seed = 1;
  t->optimizer = HX_OPT_ADAMW;
}

static void set_cluster(struct hx_ctx *ctx, int ndevices) {
  struct hx_cluster *c = &ctx->cluster;
  c->ngpus = 1;
  c->gpus = HX_NEW(&ctx->arena, struct hx_gpu_type);
  c->gpus[0].name = "cpu";
  c->ndevices = ndevices;
  c->devices = HX_NEW_ARRAY(&ctx->arena, struct hx_device, ndevices);
  for (int d = 0; d < ndevices; d++) {
    c->devices[d].rank = d;
    c->devices[d].name = hx_sprintf(&ctx->arena, "cpu0:%d", d);
    c->devices[d].local_index = d;
  }
}

/* Parses one "MBSxM@E1,E2" into pl; devices from *next_device on. */
static bool parse_pipeline(struct hx_ctx *ctx, char *text, struct hx_pipeline *pl,
                           int *next_device) {
  long mbs, nmb;
  char *at = strchr(text, '@');
  if (!at || sscanf(text, "%ldx%ld", &mbs, &nmb) != 2 || mbs < 1 || nmb < 1)
    return false;
  pl->micro_batch_size = mbs;
  pl->micro_batches = nmb;
  pl->stages = HX_NEW_ARRAY(&ctx->arena, struct hx_stage, MAX_STAGES);
  int begin = 0;
  for (char *tok = strtok(at + 1, ","); tok; tok = strtok(NULL, ",")) {
    if (pl->nstages == MAX_STAGES)
      return false;
    struct hx_stage *st = &pl->stages[pl->nstages++];
    char *rest;
    st->layer_begin = begin;
    st->layer_end = begin = (int)strtol(tok, &rest, 10);
    st->tp = *rest == ':' ? (int)strtol(rest + 1, &rest, 10) : 1;
    if (st->tp < 1 || st->tp > 8)
      return false;
    st->ndevices = st->tp;
    st->cp = st->hp = 1;
    st->devices = HX_NEW_ARRAY(&ctx->arena, int, st->tp);
    for (int k = 0; k < st->tp; k++)
      st->devices[k] = (*next_device)++;
    st->leader = st->devices[strchr(rest, 'l') ? st->tp - 1 : 0];
    st->recompute = strchr(rest, 'r') != NULL;
  }
  return pl->nstages > 0 && begin == ctx->model.layers;
}

static bool build_plan(struct hx_ctx *ctx, const char *spec) {
  struct hx_plan *plan = HX_NEW(&ctx->arena, struct hx_plan);
  plan->strategy = "file";
  plan->schedule = HX_PP_1F1B;
  plan->pipelines = HX_NEW_ARRAY(&ctx->arena, struct hx_pipeline, MAX_PIPELINES);
  char *copy = hx_strdup(&ctx->arena, spec), *save = NULL;
  int ndev = 0;
  for (char *p = strtok_r(copy, ";", &save); p; p = strtok_r(NULL, ";", &save)) {
    if (plan->npipelines == MAX_PIPELINES ||
        !parse_pipeline(ctx, p, &plan->pipelines[plan->npipelines++], &ndev))
      return false;
  }
  set_cluster(ctx, ndev);
  plan->ndevices = ndev;
  plan->devices = HX_NEW_ARRAY(&ctx->arena, struct hx_device_plan, ndev);
  for (int p = 0; p < plan->npipelines; p++) {
    const struct hx_pipeline *pl = &plan->pipelines[p];
    ctx->train.global_batch += pl->micro_batch_size * pl->micro_batches;
    for (int s = 0; s < pl->nstages; s++)
      for (int k = 0; k < pl->stages[s].tp; k++) {
        struct hx_device_plan *d = &plan->devices[pl->stages[s].devices[k]];
        d->pipeline = p;
        d->stage = s;
        d->tp_rank = k;
      }
  }
  ctx->plan = plan;
  return plan->npipelines > 0;
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr,
            "usage: emit_fixture OUTDIR PLAN [--tied] [--cuda] [--cp] [--heads6] [--no-sp]\n");
    return 2;
  }
  struct hx_ctx ctx;
  fx_init(&ctx);
  bool tied = false, cp = false, heads6 = false;
  ctx.train.sequence_parallel = true; /* the train block's default; --no-sp turns it off */
  for (int i = 3; i < argc; i++) {
    if (!strcmp(argv[i], "--no-sp"))
      ctx.train.sequence_parallel = false;
    tied |= !strcmp(argv[i], "--tied");
    cp |= !strcmp(argv[i], "--cp");
    heads6 |= !strcmp(argv[i], "--heads6");
    if (!strcmp(argv[i], "--cuda"))
      ctx.opt.target = HX_TARGET_CUDA;
  }
  set_model(&ctx, tied, heads6);
  if (!build_plan(&ctx, argv[2])) {
    fprintf(stderr, "emit_fixture: bad plan '%s'\n", argv[2]);
    return 2;
  }
  if (cp)
    ctx.plan->pipelines[0].stages[0].cp = 2; /* a shape the emitter must refuse */
  int rc = (int)hx_emit_programs(&ctx, argv[1]);
  hx_arena_free(&ctx.arena);
  return rc;
}
