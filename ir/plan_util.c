#include "plan_util.h"

#include <string.h>

struct hx_plan *hx_plan_new(struct hx_arena *a, int ndevices, int npipelines) {
  struct hx_plan *p = HX_NEW(a, struct hx_plan);
  p->schedule = HX_PP_1F1B;
  p->npipelines = npipelines;
  p->pipelines = HX_NEW_ARRAY(a, struct hx_pipeline, npipelines);
  p->ndevices = ndevices;
  p->devices = HX_NEW_ARRAY(a, struct hx_device_plan, ndevices);
  for (int r = 0; r < ndevices; r++) {
    p->devices[r].pipeline = p->devices[r].stage = -1;
    p->devices[r].tp_rank = p->devices[r].cp_rank = p->devices[r].hp_rank = -1;
  }
  p->sim.busy_s = HX_NEW_ARRAY(a, double, ndevices);
  p->sim.peak_memory = HX_NEW_ARRAY(a, double, ndevices);
  return p;
}

void hx_pipeline_init(struct hx_arena *a, struct hx_pipeline *p, int nstages) {
  p->nstages = nstages;
  p->stages = HX_NEW_ARRAY(a, struct hx_stage, nstages);
}

void hx_stage_init(struct hx_arena *a, struct hx_stage *st, const int *ranks, int n,
                   int layer_begin, int layer_end, bool recompute) {
  st->ndevices = n;
  st->devices = HX_NEW_ARRAY(a, int, n);
  memcpy(st->devices, ranks, sizeof(int) * (size_t)n);
  st->tp = n;
  st->cp = st->hp = 1;
  st->seq_layout = NULL; /* callers may pass an uninitialised stage */
  st->layer_begin = layer_begin;
  st->layer_end = layer_end;
  st->leader = ranks[0];
  st->recompute = recompute;
}

static void *copy_bytes(struct hx_arena *a, const void *src, size_t n) {
  void *dst = hx_alloc(a, n ? n : 1);
  if (n)
    memcpy(dst, src, n);
  return dst;
}

#define COPY_ARRAY(a, src, n) copy_bytes((a), (src), sizeof *(src) * (size_t)(n))

static void copy_pipeline(struct hx_arena *a, struct hx_pipeline *dst,
                          const struct hx_pipeline *src) {
  *dst = *src;
  dst->stages = COPY_ARRAY(a, src->stages, src->nstages);
  for (int s = 0; s < src->nstages; s++)
    dst->stages[s].devices = COPY_ARRAY(a, src->stages[s].devices, src->stages[s].ndevices);
}

static void copy_group(struct hx_arena *a, struct hx_group *dst, const struct hx_group *src) {
  *dst = *src;
  dst->ranks = COPY_ARRAY(a, src->ranks, src->nranks);
  if (src->split_table)
    dst->split_table = COPY_ARRAY(a, src->split_table, (long)src->nranks * src->nranks);
  if (src->shard_ppm)
    dst->shard_ppm = COPY_ARRAY(a, src->shard_ppm, src->nranks);
}

struct hx_plan *hx_plan_copy(struct hx_arena *a, const struct hx_plan *src) {
  struct hx_plan *p = HX_NEW(a, struct hx_plan);
  *p = *src;
  p->pipelines = COPY_ARRAY(a, src->pipelines, src->npipelines);
  for (int i = 0; i < src->npipelines; i++)
    copy_pipeline(a, &p->pipelines[i], &src->pipelines[i]);
  p->devices = COPY_ARRAY(a, src->devices, src->ndevices);
  for (int r = 0; r < src->ndevices; r++)
    if (src->devices[r].nseq)
      p->devices[r].seq = COPY_ARRAY(a, src->devices[r].seq, src->devices[r].nseq);
  p->groups = COPY_ARRAY(a, src->groups, src->ngroups);
  for (int g = 0; g < src->ngroups; g++)
    copy_group(a, &p->groups[g], &src->groups[g]);
  p->sim.busy_s = HX_NEW_ARRAY(a, double, src->ndevices);
  p->sim.peak_memory = HX_NEW_ARRAY(a, double, src->ndevices);
  if (src->sim.busy_s)
    memcpy(p->sim.busy_s, src->sim.busy_s, sizeof(double) * (size_t)src->ndevices);
  if (src->sim.peak_memory)
    memcpy(p->sim.peak_memory, src->sim.peak_memory, sizeof(double) * (size_t)src->ndevices);
  return p;
}

/* Heads [begin, end) that TP rank `rank` of `tp` computes: Megatron splits the
 * heads evenly; the first heads % tp ranks take one more when tp does not
 * divide them (the planner decides whether it allows that). */
static struct hx_range tp_heads(int64_t heads, int tp, int rank) {
  int64_t base = heads / tp, extra = heads % tp;
  int64_t begin = rank * base + (rank < extra ? rank : extra);
  struct hx_range r = {begin, begin + base + (rank < extra ? 1 : 0)};
  return r;
}

void hx_plan_fill_devices(struct hx_arena *a, struct hx_plan *plan, const struct hx_model *m) {
  for (int r = 0; r < plan->ndevices; r++) {
    struct hx_device_plan *d = &plan->devices[r];
    memset(d, 0, sizeof *d);
    d->pipeline = d->stage = d->tp_rank = d->cp_rank = d->hp_rank = -1;
  }
  for (int i = 0; i < plan->npipelines; i++)
    for (int s = 0; s < plan->pipelines[i].nstages; s++) {
      const struct hx_stage *st = &plan->pipelines[i].stages[s];
      for (int k = 0; k < st->ndevices; k++) {
        struct hx_device_plan *d = &plan->devices[st->devices[k]];
        d->pipeline = i;
        d->stage = s;
        d->tp_rank = k;
        d->cp_rank = d->hp_rank = 0;
        d->nseq = 1;
        d->seq = HX_NEW(a, struct hx_range);
        d->seq->begin = 0;
        d->seq->end = m->seq_len;
        d->heads = tp_heads(m->heads, st->tp, k);
      }
    }
}

unsigned hx_group_holds(const struct hx_plan *plan, const struct hx_group *g) {
  if (g->layer_begin >= 0)
    return 0;
  if (g->holds)
    return g->holds;
  bool all_first = true, all_last = true;
  for (int k = 0; k < g->nranks; k++) {
    const struct hx_device_plan *d = &plan->devices[g->ranks[k]];
    if (d->pipeline < 0) {
      all_first = all_last = false;
      break;
    }
    all_first &= d->stage == 0;
    all_last &= d->stage == plan->pipelines[d->pipeline].nstages - 1;
  }
  unsigned holds = (all_first ? HX_HOLDS_EMBEDDING : 0u) | (all_last ? HX_HOLDS_HEAD : 0u);
  /* a group on neither (hand-edited) keeps the old meaning: both */
  return holds ? holds : HX_HOLDS_EMBEDDING | HX_HOLDS_HEAD;
}

int64_t hx_plan_batch(const struct hx_plan *plan) {
  int64_t total = 0;
  for (int i = 0; i < plan->npipelines; i++)
    total += plan->pipelines[i].micro_batches * plan->pipelines[i].micro_batch_size;
  return total;
}

int hx_plan_used_devices(const struct hx_plan *plan) {
  int n = 0;
  for (int i = 0; i < plan->npipelines; i++)
    for (int s = 0; s < plan->pipelines[i].nstages; s++)
      n += plan->pipelines[i].stages[s].ndevices;
  return n;
}

const struct hx_stage *hx_stage_holding(const struct hx_pipeline *p, int layer) {
  if (layer < 0)
    return &p->stages[0];
  if (layer == HX_LAYER_HEAD)
    return &p->stages[p->nstages - 1];
  for (int s = 0; s < p->nstages; s++)
    if (p->stages[s].layer_begin <= layer && layer < p->stages[s].layer_end)
      return &p->stages[s];
  return NULL;
}

bool hx_grad_group_covers(const struct hx_group *g, int layer) {
  if (g->kind != HX_GROUP_GRAD && g->kind != HX_GROUP_UNSPLIT)
    return false;
  if (layer < 0 || layer == HX_LAYER_HEAD)
    return g->layer_begin < 0;
  return g->layer_begin <= layer && layer < g->layer_end;
}

const char *hx_group_kind_name(enum hx_group_kind kind) {
  switch (kind) {
  case HX_GROUP_TP:
    return "tp";
  case HX_GROUP_GRAD:
    return "grad";
  case HX_GROUP_UNSPLIT:
    return "unsplit";
  case HX_GROUP_CP_RING:
    return "cp_ring";
  case HX_GROUP_HP_A2A:
    return "hp_a2a";
  }
  return "?";
}

int64_t hx_gcd(int64_t a, int64_t b) {
  while (b) {
    int64_t t = a % b;
    a = b;
    b = t;
  }
  return a;
}

int64_t hx_lcm(int64_t a, int64_t b) { return a / hx_gcd(a, b) * b; }
