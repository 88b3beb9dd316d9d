/* From the plan to what each MPI rank runs: dense world ranks, the pipeline
 * neighbours, the 1F1B (or GPipe) op order, and the gradient-sync groups. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "emit_programs.h"

/* The emitter receives a const context but allocates from its arena like
 * every other pass; the arena is the one mutable part it touches. */
static struct hx_arena *arena_of(const struct hx_ctx *ctx) {
  return (struct hx_arena *)&ctx->arena;
}

static void number_ranks(struct program_set *set) {
  const struct hx_plan *plan = set->plan;
  struct hx_arena *a = arena_of(set->ctx);
  set->world_of_device = HX_NEW_ARRAY(a, int, plan->ndevices);
  set->nranks = 0;
  for (int d = 0; d < plan->ndevices; d++)
    set->world_of_device[d] = plan->devices[d].pipeline >= 0 ? set->nranks++ : -1;
  set->ranks = HX_NEW_ARRAY(a, struct hx_prog_rank, set->nranks);
  for (int d = 0; d < plan->ndevices; d++) {
    int w = set->world_of_device[d];
    if (w < 0)
      continue;
    struct hx_prog_rank *r = &set->ranks[w];
    r->device = d;
    r->pipeline = plan->devices[d].pipeline;
    r->stage = plan->devices[d].stage;
    r->pl = &plan->pipelines[r->pipeline];
    r->st = &r->pl->stages[r->stage];
  }
}

static int stage_leader(const struct program_set *set, const struct hx_pipeline *pl, int s) {
  if (s < 0 || s >= pl->nstages)
    return -1;
  return set->world_of_device[pl->stages[s].leader];
}

static void place_ranks(struct program_set *set) {
  int64_t *first = HX_NEW_ARRAY(arena_of(set->ctx), int64_t, set->plan->npipelines + 1);
  for (int p = 0; p < set->plan->npipelines; p++) {
    const struct hx_pipeline *pl = &set->plan->pipelines[p];
    first[p + 1] = first[p] + pl->micro_batch_size * pl->micro_batches;
  }
  if (first[set->plan->npipelines] != set->ctx->train.global_batch)
    hx_internal_error("plan's pipelines take %lld sequences per step, global_batch is %lld",
                      (long long)first[set->plan->npipelines],
                      (long long)set->ctx->train.global_batch);
  for (int w = 0; w < set->nranks; w++) {
    struct hx_prog_rank *r = &set->ranks[w];
    r->first_sequence = (int)first[r->pipeline];
    r->prev_leader = stage_leader(set, r->pl, r->stage - 1);
    r->next_leader = stage_leader(set, r->pl, r->stage + 1);
  }
}

static void add_step(struct hx_prog_rank *r, enum hx_prog_op op, int m, enum hx_schedule_phase ph) {
  r->steps[r->nsteps++] = (struct hx_prog_step){op, m, ph};
}

static void add_forward(struct hx_prog_rank *r, int m, enum hx_schedule_phase ph) {
  if (r->stage > 0)
    add_step(r, OP_RECV_ACT, m, ph);
  add_step(r, OP_FORWARD, m, ph);
  if (r->stage < r->pl->nstages - 1)
    add_step(r, OP_SEND_ACT, m, ph);
}

static void add_backward(struct hx_prog_rank *r, int m, enum hx_schedule_phase ph) {
  if (r->stage < r->pl->nstages - 1)
    add_step(r, OP_RECV_GRAD, m, ph);
  add_step(r, OP_BACKWARD, m, ph);
  if (r->stage > 0)
    add_step(r, OP_SEND_GRAD, m, ph);
}

/* 1F1B (PipeDream-flush, as Megatron runs it): stage s of k first runs
 * k-s-1 forwards, then alternates one forward and one backward, then drains
 * the backwards; at most warm-up + 1 micro-batches are alive at once. GPipe
 * runs every forward, then every backward. */
static void build_schedule(const struct program_set *set, struct hx_prog_rank *r) {
  int m_total = (int)r->pl->micro_batches;
  int warmup = m_total;
  if (set->plan->schedule == HX_PP_1F1B) {
    warmup = r->pl->nstages - r->stage - 1;
    if (warmup > m_total)
      warmup = m_total;
  }
  r->steps = HX_NEW_ARRAY(arena_of(set->ctx), struct hx_prog_step, 6 * m_total);
  for (int m = 0; m < warmup; m++)
    add_forward(r, m, PHASE_WARMUP);
  for (int i = 0; i < m_total - warmup; i++) {
    add_forward(r, warmup + i, PHASE_STEADY);
    add_backward(r, i, PHASE_STEADY);
  }
  for (int m = m_total - warmup; m < m_total; m++)
    add_backward(r, m, PHASE_COOLDOWN);
  r->activation_slots = warmup < m_total ? warmup + 1 : m_total;
}

static int compare_ints(const void *a, const void *b) {
  int x = *(const int *)a, y = *(const int *)b;
  return (x > y) - (x < y);
}

/* Sorted, duplicate-free world ranks in list[0..n); returns the new n. */
static int sort_unique(int *list, int n) {
  qsort(list, (size_t)n, sizeof *list, compare_ints);
  int out = 0;
  for (int i = 0; i < n; i++)
    if (out == 0 || list[out - 1] != list[i])
      list[out++] = list[i];
  return out;
}

/* The world ranks holding decoder layer l: one per pipeline (TP is 1). */
static int layer_holders(const struct program_set *set, int l, int *out) {
  int n = 0;
  for (int p = 0; p < set->plan->npipelines; p++) {
    const struct hx_pipeline *pl = &set->plan->pipelines[p];
    for (int s = 0; s < pl->nstages; s++)
      if (l >= pl->stages[s].layer_begin && l < pl->stages[s].layer_end)
        out[n++] = set->world_of_device[pl->stages[s].devices[0]];
  }
  return sort_unique(out, n);
}

/* Ranks of each pipeline's first stage (which_end 0) or last stage (1). */
static int end_stage_holders(const struct program_set *set, int which_end, int *out, int n) {
  for (int p = 0; p < set->plan->npipelines; p++) {
    const struct hx_pipeline *pl = &set->plan->pipelines[p];
    const struct hx_stage *st = &pl->stages[which_end ? pl->nstages - 1 : 0];
    out[n++] = set->world_of_device[st->devices[0]];
  }
  return n;
}

static void add_group(struct program_set *set, enum hx_prog_sync tensors, int begin, int end,
                      const int *ranks, int n) {
  if (n < 2)
    return; /* a tensor held once needs no sync */
  struct hx_prog_group *g = &set->groups[set->ngroups++];
  g->tensors = tensors;
  g->layer_begin = begin;
  g->layer_end = end;
  g->nranks = n;
  g->ranks = HX_NEW_ARRAY(arena_of(set->ctx), int, n);
  memcpy(g->ranks, ranks, (size_t)n * sizeof *ranks);
}

/* Groups in a fixed order — tok_emb, layers in order (consecutive layers held
 * by the same ranks share a group), head — so ids are deterministic and every
 * rank creates its communicators in the same global order. */
static void build_groups(struct program_set *set) {
  struct hx_arena *a = arena_of(set->ctx);
  int np = set->plan->npipelines;
  int layers = (int)set->ctx->model.layers;
  set->groups = HX_NEW_ARRAY(a, struct hx_prog_group, layers + 2);
  int *cur = HX_NEW_ARRAY(a, int, 2 * np), *next = HX_NEW_ARRAY(a, int, 2 * np);

  int n = end_stage_holders(set, 0, cur, 0);
  if (set->ctx->model.tie_embeddings)
    n = end_stage_holders(set, 1, cur, n);
  add_group(set, SYNC_TOK_EMB, -1, -1, cur, sort_unique(cur, n));

  int begin = 0;
  n = layers > 0 ? layer_holders(set, 0, cur) : 0;
  for (int l = 1; l <= layers; l++) {
    int nn = l < layers ? layer_holders(set, l, next) : -1;
    if (nn == n && !memcmp(cur, next, (size_t)n * sizeof *cur))
      continue;
    add_group(set, SYNC_LAYERS, begin, l, cur, n);
    begin = l;
    n = nn;
    int *t = cur;
    cur = next;
    next = t;
  }
  n = sort_unique(cur, end_stage_holders(set, 1, cur, 0));
  add_group(set, SYNC_HEAD, -1, -1, cur, n);
}

static uint64_t fnv_text(uint64_t h, const char *text) {
  for (const unsigned char *p = (const unsigned char *)text; *p; p++)
    h = (h ^ *p) * UINT64_C(0x100000001b3);
  return h;
}

/* Identifies the plan at run time: the world check and the checkpoints
 * refuse to mix programs (or files) of different compilations. It covers the
 * model, the training settings that change the numbers, and every rank's
 * place; printed with %.17g so equal inputs give equal text. */
static void compute_fingerprint(struct program_set *set) {
  const struct hx_model *m = &set->ctx->model;
  const struct hx_train *t = &set->ctx->train;
  char buf[512];
  snprintf(buf, sizeof buf, "model %lld %lld %lld %lld %lld %lld %lld %.17g %.17g %d",
           (long long)m->layers, (long long)m->hidden, (long long)m->ffn, (long long)m->heads,
           (long long)m->kv_heads, (long long)m->vocab, (long long)m->seq_len, m->rope_theta,
           m->norm_eps, (int)m->tie_embeddings);
  uint64_t h = fnv_text(UINT64_C(0xcbf29ce484222325), buf);
  snprintf(buf, sizeof buf, "train %lld %.17g %.17g %.17g %.17g %.17g %.17g %lld %lld %lld",
           (long long)t->global_batch, t->lr, t->beta1, t->beta2, t->eps, t->weight_decay,
           t->grad_clip, (long long)t->warmup_steps, (long long)t->steps, (long long)t->seed);
  h = fnv_text(h, buf);
  for (int w = 0; w < set->nranks; w++) {
    const struct hx_prog_rank *r = &set->ranks[w];
    snprintf(buf, sizeof buf, "rank %d %d %d %d %d %lld %lld %d", r->device, r->pipeline, r->stage,
             r->st->layer_begin, r->st->layer_end, (long long)r->pl->micro_batch_size,
             (long long)r->pl->micro_batches, (int)set->plan->schedule);
    h = fnv_text(h, buf);
  }
  snprintf(set->fingerprint, sizeof set->fingerprint, "%016llx", (unsigned long long)h);
}

bool hx_group_has_rank(const struct hx_prog_group *g, int rank) {
  for (int i = 0; i < g->nranks; i++)
    if (g->ranks[i] == rank)
      return true;
  return false;
}

void hx_build_program_set(const struct hx_ctx *ctx, const struct hx_plan *plan,
                          struct program_set *set) {
  memset(set, 0, sizeof *set);
  set->ctx = ctx;
  set->plan = plan;
  number_ranks(set);
  place_ranks(set);
  for (int w = 0; w < set->nranks; w++)
    build_schedule(set, &set->ranks[w]);
  build_groups(set);
  compute_fingerprint(set);
}
