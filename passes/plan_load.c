/* --plan=FILE and `hexic simulate`: reads a plan.json (as codegen/plan_json.c
 * writes it, perhaps edited by a person) and checks it against the model and
 * the cluster, reporting "plan.json:line:col: error: ..." for what is wrong. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../ir/cost.h"
#include "../ir/json.h"
#include "../ir/plan_util.h"
#include "passes.h"

static const struct hx_source *read_source(struct hx_ctx *ctx, const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    hx_error_plain("cannot read %s: %s", path, strerror(errno));
    return NULL;
  }
  size_t cap = 1 << 16, n = 0;
  char *buf = malloc(cap);
  for (size_t got; buf && (got = fread(buf + n, 1, cap - n, f)) > 0;) {
    n += got;
    if (n == cap)
      buf = realloc(buf, cap *= 2);
  }
  fclose(f);
  if (!buf)
    hx_internal_error("out of memory reading %s", path);
  struct hx_source *src = HX_NEW(&ctx->arena, struct hx_source);
  src->name = hx_strdup(&ctx->arena, path);
  src->text = hx_strndup(&ctx->arena, buf, n);
  src->len = (long)n;
  free(buf);
  return src;
}

/* A required integer member in [lo, hi]; reports and returns false if not. */
static bool get_int(const struct hx_json *obj, const char *key, int64_t lo, int64_t hi,
                    int64_t *out) {
  const struct hx_json *v = hx_json_get(obj, key);
  if (hx_json_int(v, lo, hi, out))
    return true;
  hx_error(v ? v->loc : obj->loc, "'%s' must be an integer in [%lld, %lld]", key, (long long)lo,
           (long long)hi);
  return false;
}

static const struct hx_json *get_array(const struct hx_json *obj, const char *key, int min) {
  const struct hx_json *v = hx_json_get(obj, key);
  if (v && v->kind == HX_JSON_ARRAY && v->nitems >= min)
    return v;
  hx_error(v ? v->loc : obj->loc, "'%s' must be an array of at least %d item%s", key, min,
           min == 1 ? "" : "s");
  return NULL;
}

struct loader {
  struct hx_ctx *ctx;
  struct hx_plan *plan;
  int *owner; /* per rank: whether some stage took it */
  bool ok;
};

static bool load_ranks(struct loader *l, const struct hx_json *arr, int *ranks) {
  int n = l->ctx->cluster.ndevices;
  for (int k = 0; k < arr->nitems; k++) {
    int64_t r;
    if (!hx_json_int(&arr->items[k], 0, n - 1, &r)) {
      hx_error(arr->items[k].loc, "rank must be an integer in [0, %d]", n - 1);
      return false;
    }
    ranks[k] = (int)r;
  }
  return true;
}

static bool load_stage(struct loader *l, const struct hx_json *js, struct hx_stage *st,
                       int expect_begin) {
  struct hx_ctx *ctx = l->ctx;
  const struct hx_json *ranks = get_array(js, "ranks", 1), *layers = hx_json_get(js, "layers");
  if (!ranks)
    return false;
  int *r = HX_NEW_ARRAY(&ctx->arena, int, ranks->nitems);
  if (!load_ranks(l, ranks, r))
    return false;
  int64_t b, e, tp = ranks->nitems, cp = 1, hp = 1, leader = r[0];
  if (!layers || layers->kind != HX_JSON_ARRAY || layers->nitems != 2 ||
      !hx_json_int(&layers->items[0], 0, ctx->model.layers, &b) ||
      !hx_json_int(&layers->items[1], b, ctx->model.layers, &e)) {
    hx_error(layers ? layers->loc : js->loc, "'layers' must be [begin, end) within 0..%lld",
             (long long)ctx->model.layers);
    return false;
  }
  if (b != expect_begin) {
    hx_error(layers->loc, "this stage starts at layer %lld; the previous stage ends at %d",
             (long long)b, expect_begin);
    return false;
  }
  if ((hx_json_get(js, "tp") && !get_int(js, "tp", 1, ranks->nitems, &tp)) ||
      (hx_json_get(js, "cp") && !get_int(js, "cp", 1, ranks->nitems, &cp)) ||
      (hx_json_get(js, "hp") && !get_int(js, "hp", 1, ranks->nitems, &hp)) ||
      (hx_json_get(js, "leader") && !get_int(js, "leader", 0, ctx->cluster.ndevices - 1, &leader)))
    return false;
  if (tp * cp * hp != ranks->nitems) {
    hx_error(js->loc, "tp %lld x cp %lld x hp %lld must equal the %d ranks of the stage",
             (long long)tp, (long long)cp, (long long)hp, ranks->nitems);
    return false;
  }
  /* The planner's rule (hx_sched_tp_legal): tp divides the query heads; kv
   * heads that tp does not divide are replicated, which the kernels support. */
  if (ctx->model.heads % tp) {
    hx_error(js->loc, "tp %lld does not divide the %lld heads", (long long)tp,
             (long long)ctx->model.heads);
    return false;
  }
  const struct hx_json *rc = hx_json_get(js, "recompute");
  hx_stage_init(&ctx->arena, st, r, ranks->nitems, (int)b, (int)e,
                rc && rc->kind == HX_JSON_BOOL && rc->boolean);
  st->tp = (int)tp;
  st->cp = (int)cp;
  st->hp = (int)hp;
  st->leader = (int)leader;
  bool leader_inside = false;
  for (int k = 0; k < st->ndevices; k++) {
    if (l->owner[r[k]]) {
      hx_error(ranks->items[k].loc, "rank %d is used twice", r[k]);
      return false;
    }
    l->owner[r[k]] = 1;
    leader_inside |= r[k] == leader;
  }
  if (!leader_inside) {
    hx_error(hx_json_get(js, "leader")->loc, "leader %lld is not one of the stage's ranks",
             (long long)leader);
    return false;
  }
  return true;
}

static bool load_pipeline(struct loader *l, const struct hx_json *js, struct hx_pipeline *p) {
  int64_t m, mbs;
  if (!get_int(js, "micro_batches", 1, 1 << 20, &m) ||
      !get_int(js, "micro_batch_size", 1, 1 << 20, &mbs))
    return false;
  const struct hx_json *stages = get_array(js, "stages", 1);
  if (!stages)
    return false;
  hx_pipeline_init(&l->ctx->arena, p, stages->nitems);
  p->micro_batches = m;
  p->micro_batch_size = mbs;
  int next = 0;
  for (int s = 0; s < stages->nitems; s++) {
    if (!load_stage(l, &stages->items[s], &p->stages[s], next))
      return false;
    next = p->stages[s].layer_end;
  }
  if (next != l->ctx->model.layers) {
    hx_error(stages->loc, "the stages cover layers [0, %d) of %lld", next,
             (long long)l->ctx->model.layers);
    return false;
  }
  return true;
}

static bool load_groups(struct loader *l, const struct hx_json *root) {
  const struct hx_json *groups = hx_json_get(root, "groups");
  if (!groups || groups->kind != HX_JSON_ARRAY)
    return true;
  static const char *const kinds[] = {"tp", "grad", "unsplit", "cp_ring", "hp_a2a"};
  struct hx_plan *p = l->plan;
  p->groups = HX_NEW_ARRAY(&l->ctx->arena, struct hx_group, groups->nitems);
  for (int g = 0; g < groups->nitems; g++) {
    const struct hx_json *js = &groups->items[g], *kind = hx_json_get(js, "kind");
    struct hx_group *gr = &p->groups[p->ngroups];
    int k = 0;
    while (k < 5 && !(kind && kind->kind == HX_JSON_STRING && !strcmp(kind->string, kinds[k])))
      k++;
    const struct hx_json *ranks = get_array(js, "ranks", 1), *layers = hx_json_get(js, "layers");
    int64_t b = -1, e = -1, slice = 0, nslices = 1;
    if (k == 5) {
      hx_error(kind ? kind->loc : js->loc, "unknown group kind");
      return false;
    }
    if (!ranks)
      return false;
    if (layers && layers->kind == HX_JSON_ARRAY && layers->nitems == 2) {
      hx_json_int(&layers->items[0], -1, l->ctx->model.layers, &b);
      hx_json_int(&layers->items[1], -1, l->ctx->model.layers, &e);
    }
    if ((hx_json_get(js, "nslices") && !get_int(js, "nslices", 1, 1 << 20, &nslices)) ||
        (hx_json_get(js, "slice") && !get_int(js, "slice", 0, nslices - 1, &slice)))
      return false;
    gr->kind = (enum hx_group_kind)k;
    gr->nranks = ranks->nitems;
    gr->ranks = HX_NEW_ARRAY(&l->ctx->arena, int, ranks->nitems);
    if (!load_ranks(l, ranks, gr->ranks))
      return false;
    gr->layer_begin = (int)b;
    gr->layer_end = (int)e;
    gr->slice = (int)slice;
    gr->nslices = (int)nslices;
    p->ngroups++;
  }
  return true;
}

static struct hx_plan *load_plan(struct hx_ctx *ctx, const struct hx_json *root) {
  const struct hx_json *pipes = get_array(root, "pipelines", 1);
  if (!pipes)
    return NULL;
  struct loader l = {ctx, hx_plan_new(&ctx->arena, ctx->cluster.ndevices, pipes->nitems),
                     HX_NEW_ARRAY(&ctx->arena, int, ctx->cluster.ndevices), true};
  l.plan->strategy = "file";
  const struct hx_json *desc = hx_json_get(root, "description");
  l.plan->description = desc && desc->kind == HX_JSON_STRING ? desc->string : NULL;
  const struct hx_json *sched = hx_json_get(root, "schedule");
  l.plan->schedule = sched && sched->kind == HX_JSON_STRING && !strcmp(sched->string, "gpipe")
                         ? HX_PP_GPIPE
                         : HX_PP_1F1B;
  for (int i = 0; i < pipes->nitems; i++)
    if (!load_pipeline(&l, &pipes->items[i], &l.plan->pipelines[i]))
      return NULL;
  if (hx_plan_batch(l.plan) != ctx->train.global_batch) {
    hx_error(pipes->loc, "the pipelines hold %lld sequences; the global batch is %lld",
             (long long)hx_plan_batch(l.plan), (long long)ctx->train.global_batch);
    return NULL;
  }
  if (!load_groups(&l, root))
    return NULL;
  hx_plan_fill_devices(&ctx->arena, l.plan, &ctx->model);
  return l.plan;
}

struct hx_plan *hx_plan_load(struct hx_ctx *ctx, const char *path) {
  const struct hx_source *src = read_source(ctx, path);
  if (!src)
    return NULL;
  struct hx_json *root = hx_json_parse(&ctx->arena, src);
  if (!root)
    return NULL;
  if (root->kind != HX_JSON_OBJECT) {
    hx_error(root->loc, "a plan file holds one JSON object");
    return NULL;
  }
  struct hx_plan *plan = load_plan(ctx, root);
  if (!plan)
    return NULL;
  double shortfall;
  int rank;
  if (!hx_plan_memory_fits(ctx, plan, &shortfall, &rank)) {
    hx_error_plain("plan %s does not fit in memory: needs %.1f GiB more on %s", path,
                   shortfall / 1073741824.0, ctx->cluster.devices[rank].name);
    return NULL;
  }
  return plan;
}
