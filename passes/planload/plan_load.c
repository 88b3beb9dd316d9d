/* --plan=FILE and `hexic simulate`: reads a plan.json (as codegen/plan_json.c
 * writes it, perhaps edited by a person) and checks it against the model and
 * the cluster, reporting "plan.json:line:col: error: ..." for what is wrong.
 * The groups are read first: a stage whose ranks sit in cp_ring / hp_a2a
 * groups is a HexiSeq stage, rebuilt by passes/planload/plan_load_seq.c. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "passes/cost/cost.h"
#include "ir/text/json.h"
#include "ir/plan_util.h"
#include "ir/units.h"
#include "passes/schedule/sched.h"
#include "plan_load.h"

/* plan.json through the shared bounded reader (ir/source.c): a regular file
 * of at most HX_INPUT_LIMIT bytes, its lines indexed for diagnostics. */
static const struct hx_source *read_source(struct hx_ctx *ctx, const char *path) {
  size_t n = 0;
  char *buf = hx_read_input(path, &n); /* reports why not */
  if (!buf)
    return NULL;
  struct hx_source *src = HX_NEW(&ctx->arena, struct hx_source);
  hx_source_init(&ctx->arena, src, path, buf, n);
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

static bool load_ranks(struct hx_plan_loader *l, const struct hx_json *arr, int *ranks) {
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

/* The train block's recompute binds the plan as it binds the planner
 * (hx_sched_recompute_allowed): `full` and `none` fix every stage, only
 * `auto` lets plan.json choose per stage. A missing "recompute" is false. */
static bool recompute_agrees(const struct hx_ctx *ctx, const struct hx_json *at, bool recompute) {
  if (hx_sched_recompute_allowed(ctx, recompute))
    return true;
  enum hx_recompute train = ctx->train.recompute;
  hx_error(at->loc,
           "this stage has \"recompute\": %s but the train block says recompute = %s (set "
           "recompute = auto there to let plan.json choose per stage)",
           recompute ? "true" : "false", train == HX_RECOMPUTE_FULL ? "full" : "none");
  return false;
}

static bool load_stage(struct hx_plan_loader *l, const struct hx_json *js, struct hx_stage *st,
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
  /* A HexiSeq stage's all-to-all groups may differ in size: its layout
   * (plan_load_seq.c) checks cp and hp; here only whole units of tp. */
  if (hx_plan_load_is_seq_stage(l, r, ranks->nitems) ? ranks->nitems % tp != 0
                                                     : tp * cp * hp != ranks->nitems) {
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
  bool recompute = rc && rc->kind == HX_JSON_BOOL && rc->boolean;
  if (!recompute_agrees(ctx, rc ? rc : js, recompute))
    return false;
  hx_stage_init(&ctx->arena, st, r, ranks->nitems, (int)b, (int)e, recompute);
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

static bool load_pipeline(struct hx_plan_loader *l, const struct hx_json *js,
                          struct hx_pipeline *p) {
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

/* An hp_a2a group's nranks x nranks split table, when the file has one
 * (plan_load_seq.c fills a missing one from the layout and checks a given
 * one against it). */
static bool load_split_table(struct hx_plan_loader *l, const struct hx_json *js,
                             struct hx_group *gr) {
  const struct hx_json *t = hx_json_get(js, "split_table");
  if (!t || gr->kind != HX_GROUP_HP_A2A)
    return true;
  long cells = (long)gr->nranks * gr->nranks;
  if (t->kind != HX_JSON_ARRAY || t->nitems != cells) {
    hx_error(t->loc, "'split_table' must be an array of %d x %d integers", gr->nranks, gr->nranks);
    return false;
  }
  gr->split_table = HX_NEW_ARRAY(&l->ctx->arena, int64_t, cells);
  for (long k = 0; k < cells; k++)
    if (!hx_json_int(&t->items[k], 0, INT64_C(1) << 52, &gr->split_table[k])) {
      hx_error(t->items[k].loc, "a split_table entry must be a non-negative integer");
      return false;
    }
  return true;
}

/* A gradient group's "optimizer_shards" (ZeRO-1, /work/notes/zero1_api.md):
 * one share per member in parts per million, each >= 0, summing to exactly
 * 1000000; absent: the group's optimizer state is not sharded. */
static bool load_optimizer_shards(struct hx_plan_loader *l, const struct hx_json *js,
                                  struct hx_group *gr) {
  const struct hx_json *t = hx_json_get(js, "optimizer_shards");
  if (!t)
    return true;
  if (gr->kind != HX_GROUP_GRAD && gr->kind != HX_GROUP_UNSPLIT) {
    hx_error(t->loc, "'optimizer_shards' belongs to a grad or unsplit group, not a %s group",
             hx_group_kind_name(gr->kind));
    return false;
  }
  if (t->kind != HX_JSON_ARRAY || t->nitems != gr->nranks) {
    hx_error(t->loc, "'optimizer_shards' must be an array of %d integers, one per rank of the group",
             gr->nranks);
    return false;
  }
  gr->shard_ppm = HX_NEW_ARRAY(&l->ctx->arena, int32_t, gr->nranks);
  int64_t sum = 0;
  for (int k = 0; k < gr->nranks; k++) {
    int64_t v;
    if (!hx_json_int(&t->items[k], 0, HX_PPM, &v)) {
      hx_error(t->items[k].loc, "an optimizer shard must be an integer in [0, %d] (parts per million)",
               HX_PPM);
      return false;
    }
    gr->shard_ppm[k] = (int32_t)v;
    sum += v;
  }
  if (sum != HX_PPM) {
    hx_error(t->loc, "the optimizer shards sum to %lld parts per million, not %d", (long long)sum,
             HX_PPM);
    return false;
  }
  return true;
}

/* The group kind plan.json names (hx_group_kind_name), -1 for none. */
static int group_kind_of(const struct hx_json *kind) {
  if (!kind || kind->kind != HX_JSON_STRING)
    return -1;
  for (int k = HX_GROUP_TP; k <= HX_GROUP_HP_A2A; k++)
    if (!strcmp(kind->string, hx_group_kind_name((enum hx_group_kind)k)))
      return k;
  return -1;
}

static bool load_group(struct hx_plan_loader *l, const struct hx_json *js, struct hx_group *gr) {
  const struct hx_json *kind = hx_json_get(js, "kind");
  int k = group_kind_of(kind);
  if (k < 0) {
    hx_error(kind ? kind->loc : js->loc,
             "'kind' of a group must be \"tp\", \"grad\", \"unsplit\", \"cp_ring\" or "
             "\"hp_a2a\"");
    return false;
  }
  const struct hx_json *ranks = get_array(js, "ranks", 1), *layers = hx_json_get(js, "layers");
  if (!ranks)
    return false;
  /* without 'layers' a group is one of the embedding/head weights' (-1, -1) */
  int64_t b = -1, e = -1, slice = 0, nslices = 1;
  if (layers && (layers->kind != HX_JSON_ARRAY || layers->nitems != 2 ||
                 !hx_json_int(&layers->items[0], -1, l->ctx->model.layers, &b) ||
                 !hx_json_int(&layers->items[1], b, l->ctx->model.layers, &e))) {
    hx_error(layers->loc, "'layers' of a group must be [begin, end) within -1..%lld",
             (long long)l->ctx->model.layers);
    return false;
  }
  /* CP rings and HP groups reduce no weights: plan.json writes nslices 0 */
  bool seq = k == HX_GROUP_CP_RING || k == HX_GROUP_HP_A2A;
  if ((hx_json_get(js, "nslices") && !get_int(js, "nslices", seq ? 0 : 1, 1 << 20, &nslices)) ||
      (hx_json_get(js, "slice") && !get_int(js, "slice", 0, nslices > 1 ? nslices - 1 : 0, &slice)))
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
  for (int r = 0; seq && r < gr->nranks; r++)
    l->in_seq_group[gr->ranks[r]] = true;
  return load_split_table(l, js, gr) && load_optimizer_shards(l, js, gr);
}

static bool load_groups(struct hx_plan_loader *l, const struct hx_json *root) {
  const struct hx_json *groups = hx_json_get(root, "groups");
  if (!groups || groups->kind != HX_JSON_ARRAY)
    return true;
  struct hx_plan *p = l->plan;
  p->groups = HX_NEW_ARRAY(&l->ctx->arena, struct hx_group, groups->nitems);
  l->group_js = HX_NEW_ARRAY(&l->ctx->arena, const struct hx_json *, groups->nitems);
  for (int g = 0; g < groups->nitems; g++) {
    if (!load_group(l, &groups->items[g], &p->groups[g]))
      return false;
    l->group_js[g] = &groups->items[g];
    p->ngroups++;
  }
  return true;
}

/* ---- devices[]: the cluster the plan was made for ---- */

/* A string member of a devices[] entry, when present, must say what the
 * cluster says of that rank: a plan made for another cluster (other nodes,
 * another order, another GPU type) is refused, not priced on this one. */
static bool device_text_agrees(const struct hx_json *d, const char *key, int rank, const char *want,
                               const char *what) {
  const struct hx_json *v = hx_json_get(d, key);
  if (!v)
    return true;
  if (v->kind == HX_JSON_STRING && !strcmp(v->string, want))
    return true;
  if (v->kind == HX_JSON_STRING)
    hx_error(v->loc, "'%s' of rank %d is \"%s\", but rank %d of the cluster %s \"%s\"", key, rank,
             v->string, rank, what, want);
  else
    hx_error(v->loc, "'%s' of rank %d must be a string: \"%s\" (%s)", key, rank, want, what);
  return false;
}

static bool check_device(const struct hx_ctx *ctx, const struct hx_json *d, bool *listed) {
  const struct hx_cluster *c = &ctx->cluster;
  if (d->kind != HX_JSON_OBJECT) {
    hx_error(d->loc, "a 'devices' entry must be an object with the device's 'rank'");
    return false;
  }
  int64_t r;
  if (!hx_json_int(hx_json_get(d, "rank"), 0, c->ndevices - 1, &r)) {
    const struct hx_json *v = hx_json_get(d, "rank");
    hx_error(v ? v->loc : d->loc,
             "'rank' must be an integer in [0, %d]: the cluster has %d devices", c->ndevices - 1,
             c->ndevices);
    return false;
  }
  if (listed[r]) {
    hx_error(hx_json_get(d, "rank")->loc, "rank %lld is listed twice in 'devices'", (long long)r);
    return false;
  }
  listed[r] = true;
  const struct hx_device *dev = &c->devices[r];
  return device_text_agrees(d, "name", (int)r, dev->name, "is") &&
         device_text_agrees(d, "gpu", (int)r, c->gpus[dev->gpu_type].name, "has the GPU type") &&
         device_text_agrees(d, "node", (int)r, c->nodes[dev->node].name, "is on node");
}

/* devices[] is optional (the stages say which ranks work); each entry
 * given is checked against the cluster. */
static bool check_devices(struct hx_ctx *ctx, const struct hx_json *root) {
  const struct hx_json *devs = hx_json_get(root, "devices");
  if (!devs)
    return true;
  if (devs->kind != HX_JSON_ARRAY) {
    hx_error(devs->loc, "'devices' must be an array of objects, one per rank");
    return false;
  }
  bool *listed = HX_NEW_ARRAY(&ctx->arena, bool, ctx->cluster.ndevices);
  for (int k = 0; k < devs->nitems; k++)
    if (!check_device(ctx, &devs->items[k], listed))
      return false;
  return true;
}

/* "train": {"optimizer_sharding": "none" | "zero1"}; absent: none. The train
 * block binds the file as it binds the planner: a zero1 plan needs a train
 * block that allows it (the planner may itself choose none). A "train" that
 * is not an object is refused: read as none, a zero1 plan without shards
 * (HexiSeq units) would silently lose its sharding. */
static bool load_sharding(const struct hx_ctx *ctx, const struct hx_json *root,
                          struct hx_plan *p) {
  const struct hx_json *train = hx_json_get(root, "train");
  if (!train)
    return true;
  if (train->kind != HX_JSON_OBJECT) {
    hx_error(train->loc,
             "'train' must be an object: {\"optimizer_sharding\": \"none\" | \"zero1\"}");
    return false;
  }
  const struct hx_json *v = hx_json_get(train, "optimizer_sharding");
  if (!v)
    return true;
  if (v->kind != HX_JSON_STRING || (strcmp(v->string, "none") && strcmp(v->string, "zero1"))) {
    hx_error(v->loc, "'optimizer_sharding' must be \"none\" or \"zero1\"");
    return false;
  }
  p->optimizer_sharding = strcmp(v->string, "zero1") ? HX_SHARD_NONE : HX_SHARD_ZERO1;
  if (p->optimizer_sharding == HX_SHARD_ZERO1 && ctx->train.optimizer_sharding == HX_SHARD_NONE) {
    hx_error(v->loc, "this plan shards the optimizer state but the train block says "
                     "optimizer_sharding = none");
    return false;
  }
  return true;
}

/* "train": {"sequence_parallel": true | false}: the file's choice over the
 * train block's (absent: the train block's); load_sharding checked the
 * object. */
static bool load_sequence_parallel(struct hx_ctx *ctx, const struct hx_json *root) {
  const struct hx_json *train = hx_json_get(root, "train");
  const struct hx_json *v = train ? hx_json_get(train, "sequence_parallel") : NULL;
  if (!v)
    return true;
  if (v->kind != HX_JSON_BOOL) {
    hx_error(v->loc, "'sequence_parallel' must be true or false");
    return false;
  }
  ctx->train.sequence_parallel = v->boolean;
  return true;
}

/* Shards on a plan that does not shard are a contradiction, not a no-op. */
static bool shards_agree(const struct hx_plan_loader *l) {
  if (l->plan->optimizer_sharding == HX_SHARD_ZERO1)
    return true;
  for (int g = 0; g < l->plan->ngroups; g++)
    if (l->plan->groups[g].shard_ppm) {
      hx_error(hx_json_get(l->group_js[g], "optimizer_shards")->loc,
               "'optimizer_shards' on a plan whose train.optimizer_sharding is not \"zero1\"");
      return false;
    }
  return true;
}

static struct hx_plan *load_plan(struct hx_ctx *ctx, const struct hx_json *root) {
  const struct hx_json *pipes = get_array(root, "pipelines", 1);
  if (!pipes)
    return NULL;
  int n = ctx->cluster.ndevices;
  struct hx_plan_loader l = {ctx,
                             hx_plan_new(&ctx->arena, n, pipes->nitems),
                             root,
                             HX_NEW_ARRAY(&ctx->arena, int, n),
                             HX_NEW_ARRAY(&ctx->arena, bool, n),
                             NULL};
  l.plan->strategy = "file";
  const struct hx_json *desc = hx_json_get(root, "description");
  l.plan->description = desc && desc->kind == HX_JSON_STRING ? desc->string : NULL;
  const struct hx_json *sched = hx_json_get(root, "schedule");
  l.plan->schedule = sched && sched->kind == HX_JSON_STRING && !strcmp(sched->string, "gpipe")
                         ? HX_PP_GPIPE
                         : HX_PP_1F1B;
  /* groups first: they say which stages are HexiSeq stages */
  if (!check_devices(ctx, root) || !load_sharding(ctx, root, l.plan) ||
      !load_sequence_parallel(ctx, root) || !load_groups(&l, root) || !shards_agree(&l))
    return NULL;
  for (int i = 0; i < pipes->nitems; i++)
    if (!load_pipeline(&l, &pipes->items[i], &l.plan->pipelines[i]))
      return NULL;
  if (hx_plan_batch(l.plan) != ctx->train.global_batch) {
    hx_error(pipes->loc, "the pipelines hold %lld sequences; the global batch is %lld",
             (long long)hx_plan_batch(l.plan), (long long)ctx->train.global_batch);
    return NULL;
  }
  hx_plan_fill_devices(&ctx->arena, l.plan, &ctx->model);
  if (!hx_plan_load_check_groups(&l) || !hx_plan_load_seq(&l))
    return NULL;
  return l.plan;
}

static struct hx_plan *read_plan(struct hx_ctx *ctx, const char *path) {
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
  return load_plan(ctx, root);
}

struct hx_plan *hx_plan_load(struct hx_ctx *ctx, const char *path) {
  struct hx_plan *plan = read_plan(ctx, path);
  if (!plan) {
    /* an unreadable or wrong plan file is an error in the input (exit 1),
     * not "no feasible plan" (3, the schedule pass's code, kept below for a
     * plan that does not fit memory) */
    ctx->exit_code = HX_EXIT_INPUT;
    return NULL;
  }
  double shortfall;
  int rank;
  if (!hx_plan_memory_fits(ctx, plan, &shortfall, &rank)) {
    hx_error_plain("plan %s does not fit in memory: needs %s more on %s", path,
                   hx_bytes_text(&ctx->arena, shortfall), ctx->cluster.devices[rank].name);
    return NULL;
  }
  return plan;
}
