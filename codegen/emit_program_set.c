/* From the plan to what each MPI rank runs: dense world ranks, the pipeline
 * neighbours, the TP shards, the 1F1B (or GPipe) op order, and the
 * gradient-sync groups; and the runtime library's Makefile rules both
 * targets share. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir/plan_util.h"
#include "emit_programs.h"

static void number_ranks(struct program_set *set) {
  const struct hx_plan *plan = set->plan;
  struct hx_arena *a = hx_prog_arena(set);
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
    r->tp_rank = plan->devices[d].tp_rank;
  }
}

/* Boundaries of an even split of n into parts (floor(k n / parts)): the same
 * formula for TP shards and for the lcm slices of the gradient sync, so a
 * shard is always a whole number of slices (k n / t = (k L/t) n / L). */
static int split_point(int n, int parts, int k) { return (int)((int64_t)k * n / parts); }

static int *split_bounds(struct hx_arena *a, int n, int parts) {
  int *b = HX_NEW_ARRAY(a, int, parts + 1);
  for (int k = 0; k <= parts; k++)
    b[k] = split_point(n, parts, k);
  return b;
}

/* Units of a stage: a HexiSeq stage is ndevices / tp units of tp devices
 * (each a TP group holding its own tokens), any other stage one unit. */
static int stage_units(const struct hx_stage *st) {
  return st->seq_layout ? st->ndevices / st->tp : 1;
}

/* The device of TP rank k in unit u of a stage. */
static int unit_device(const struct hx_stage *st, int u, int k) {
  return st->devices[u * st->tp + k];
}

static int stage_position(const struct hx_stage *st, int device) {
  for (int k = 0; k < st->ndevices; k++)
    if (st->devices[k] == device)
      return k;
  hx_internal_error("device %d is not in its stage", device);
}

static void place_tp(struct program_set *set, struct hx_prog_rank *r) {
  struct hx_arena *a = hx_prog_arena(set);
  const struct hx_stage *st = r->st;
  r->nunits = stage_units(st);
  r->unit = stage_position(st, r->device) / st->tp;
  r->leader_tp_rank = stage_position(st, st->leader) % st->tp;
  r->tp_group = HX_NEW_ARRAY(a, int, st->tp);
  for (int k = 0; k < st->tp; k++)
    r->tp_group[k] = set->world_of_device[unit_device(st, r->unit, k)];
  r->unit_contacts = HX_NEW_ARRAY(a, int, r->nunits);
  for (int u = 0; u < r->nunits; u++)
    r->unit_contacts[u] = set->world_of_device[unit_device(st, u, r->leader_tp_rank)];
  r->head_bounds = split_bounds(a, (int)set->ctx->model.heads, st->tp);
  r->ffn_bounds = split_bounds(a, (int)set->ctx->model.ffn, st->tp);
}

static int stage_leader(const struct program_set *set, const struct hx_pipeline *pl, int s) {
  if (s < 0 || s >= pl->nstages)
    return -1;
  return set->world_of_device[pl->stages[s].leader];
}

static void place_ranks(struct program_set *set) {
  int64_t *first = HX_NEW_ARRAY(hx_prog_arena(set), int64_t, set->plan->npipelines + 1);
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
    place_tp(set, r);
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
  r->steps = HX_NEW_ARRAY(hx_prog_arena(set), struct hx_prog_step, 6 * m_total);
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

/* ---- gradient-sync groups ------------------------------------------------ */

struct group_list {
  int n, cap;
  struct hx_prog_group *items;
};

static struct hx_prog_group *new_group(struct program_set *set, struct group_list *l,
                                       unsigned parts, int capacity) {
  if (l->n == l->cap) {
    int cap = l->cap ? 2 * l->cap : 32;
    struct hx_prog_group *items = HX_NEW_ARRAY(hx_prog_arena(set), struct hx_prog_group, cap);
    if (l->n)
      memcpy(items, l->items, (size_t)l->n * sizeof *items);
    l->items = items;
    l->cap = cap;
  }
  struct hx_prog_group *g = &l->items[l->n++];
  *g = (struct hx_prog_group){parts, -1, -1, 0, 0, 0, 0, 0, 0, 0, NULL};
  g->ranks = HX_NEW_ARRAY(hx_prog_arena(set), int, capacity);
  return g;
}

/* Sorts the ranks; drops the group when one rank holds the part alone
 * (nothing to sum). */
static void finish_group(struct group_list *l) {
  struct hx_prog_group *g = &l->items[l->n - 1];
  g->nranks = sort_unique(g->ranks, g->nranks);
  if (g->nranks < 2)
    l->n--;
}

static void add_stage_ranks(const struct program_set *set, struct hx_prog_group *g,
                            const struct hx_stage *st) {
  for (int k = 0; k < st->ndevices; k++)
    g->ranks[g->nranks++] = set->world_of_device[st->devices[k]];
}

static int max_stage_ranks(const struct hx_plan *plan) {
  int n = 0;
  for (int p = 0; p < plan->npipelines; p++)
    for (int s = 0; s < plan->pipelines[p].nstages; s++)
      n += plan->pipelines[p].stages[s].ndevices;
  return n;
}

/* The embedding (which_end 0: first stages, and last stages when tied) or
 * the final norm and LM head (1: last stages), held whole by every TP rank
 * of those stages. */
static void add_end_group(struct program_set *set, struct group_list *l, int which_end) {
  const struct hx_plan *plan = set->plan;
  bool tied = set->ctx->model.tie_embeddings;
  struct hx_prog_group *g =
      new_group(set, l, which_end ? PART_HEAD : PART_TOK_EMB, max_stage_ranks(plan));
  for (int p = 0; p < plan->npipelines; p++) {
    const struct hx_pipeline *pl = &plan->pipelines[p];
    if (which_end == 0)
      add_stage_ranks(set, g, &pl->stages[0]);
    if (which_end == 1 || tied) /* tied: the LM head reads (and adds to) tok_emb */
      add_stage_ranks(set, g, &pl->stages[pl->nstages - 1]);
  }
  finish_group(l);
}

static const struct hx_stage *stage_at(const struct hx_pipeline *pl, int layer) {
  for (int s = 0; s < pl->nstages; s++)
    if (pl->stages[s].layer_begin <= layer && layer < pl->stages[s].layer_end)
      return &pl->stages[s];
  hx_internal_error("no stage holds layer %d", layer);
}

/* The stages holding layers from `begin` (one per pipeline) and the end of
 * the range they all keep. */
static int segment(const struct hx_plan *plan, int begin, const struct hx_stage **st) {
  int end = INT32_MAX;
  for (int p = 0; p < plan->npipelines; p++) {
    st[p] = stage_at(&plan->pipelines[p], begin);
    if (st[p]->layer_end < end)
      end = st[p]->layer_end;
  }
  return end;
}

/* Slice k of L of the TP-split weights: heads and ffn columns [k/L, (k+1)/L),
 * reduced among TP rank k*t_i/L of every pipeline. */
static void add_slice_groups(struct program_set *set, struct group_list *l,
                             const struct hx_stage **st, int begin, int end) {
  const struct hx_model *m = &set->ctx->model;
  int np = set->plan->npipelines;
  int64_t nslices = 1;
  for (int p = 0; p < np; p++)
    nslices = hx_lcm(nslices, st[p]->tp);
  int L = (int)nslices;
  for (int k = 0; k < L; k++) {
    struct hx_prog_group *g = new_group(set, l, PART_HEADS | PART_FFN, max_stage_ranks(set->plan));
    g->head_begin = split_point((int)m->heads, L, k);
    g->head_end = split_point((int)m->heads, L, k + 1);
    g->ffn_begin = split_point((int)m->ffn, L, k);
    g->ffn_end = split_point((int)m->ffn, L, k + 1);
    g->parts = (g->head_end > g->head_begin ? PART_HEADS : 0) |
               (g->ffn_end > g->ffn_begin ? PART_FFN : 0);
    for (int p = 0; p < np; p++) /* HexiSeq: every unit holds the slice (CP/HP replicas) */
      for (int u = 0; u < stage_units(st[p]); u++)
        g->ranks[g->nranks++] =
            set->world_of_device[unit_device(st[p], u, (int)((int64_t)k * st[p]->tp / L))];
    g->layer_begin = begin;
    g->layer_end = end;
    if (!g->parts)
      g->nranks = 0; /* more slices than heads and columns: nothing to sum */
    finish_group(l);
  }
}

/* Does TP rank r of stage st hold kv head j? (query heads read kv head h/G) */
static bool holds_kv(const struct program_set *set, const struct hx_stage *st, int r, int j) {
  const struct hx_model *m = &set->ctx->model;
  int G = (int)(m->heads / m->kv_heads);
  int q0 = split_point((int)m->heads, st->tp, r), q1 = split_point((int)m->heads, st->tp, r + 1);
  return q1 > q0 && q0 / G <= j && j <= (q1 - 1) / G;
}

/* Ranks holding kv head j in the range's stages, into g (unsorted). */
static void kv_holders(const struct program_set *set, const struct hx_stage **st, int j,
                       struct hx_prog_group *g) {
  g->nranks = 0;
  for (int p = 0; p < set->plan->npipelines; p++)
    for (int r = 0; r < st[p]->tp; r++)
      for (int u = 0; u < stage_units(st[p]); u++)
        if (holds_kv(set, st[p], r, j))
          g->ranks[g->nranks++] = set->world_of_device[unit_device(st[p], u, r)];
  g->nranks = sort_unique(g->ranks, g->nranks);
}

static bool same_ranks(const struct hx_prog_group *a, const struct hx_prog_group *b) {
  return a->nranks == b->nranks && !memcmp(a->ranks, b->ranks, (size_t)a->nranks * sizeof(int));
}

/* wk/wv rows: a kv head that a TP split replicates is held by several ranks
 * of a pipeline, each with its own query heads' share of the gradient, so it
 * is summed over every holder in every pipeline; consecutive kv heads with
 * the same holders share a group. */
static void add_kv_groups(struct program_set *set, struct group_list *l,
                          const struct hx_stage **st, int begin, int end) {
  int K = (int)set->ctx->model.kv_heads, cap = max_stage_ranks(set->plan);
  struct hx_prog_group next = {.ranks = HX_NEW_ARRAY(hx_prog_arena(set), int, cap)};
  for (int j = 0; j < K;) {
    struct hx_prog_group *g = new_group(set, l, PART_KV, cap);
    kv_holders(set, st, j, g);
    g->layer_begin = begin;
    g->layer_end = end;
    g->kv_begin = j;
    for (j++; j < K; j++) {
      kv_holders(set, st, j, &next);
      if (!same_ranks(g, &next))
        break;
    }
    g->kv_end = j;
    finish_group(l);
  }
}

/* Groups of one layer range over the same ranks become one (one all-reduce
 * of all their parts): with TP 1 everywhere, one group per range as plain
 * data parallelism has. Parts of one kind never meet twice on one rank set. */
static void merge_range(struct group_list *l, int first) {
  int out = first;
  for (int i = first; i < l->n; i++) {
    struct hx_prog_group *g = &l->items[i];
    int j = first;
    while (j < out && !(same_ranks(&l->items[j], g) && !(l->items[j].parts & g->parts)))
      j++;
    if (j == out) {
      l->items[out++] = *g;
      continue;
    }
    struct hx_prog_group *into = &l->items[j];
    into->parts |= g->parts;
    if (g->parts & PART_HEADS)
      into->head_begin = g->head_begin, into->head_end = g->head_end;
    if (g->parts & PART_FFN)
      into->ffn_begin = g->ffn_begin, into->ffn_end = g->ffn_end;
    if (g->parts & PART_KV)
      into->kv_begin = g->kv_begin, into->kv_end = g->kv_end;
  }
  l->n = out;
}

static void add_layer_groups(struct program_set *set, struct group_list *l) {
  const struct hx_plan *plan = set->plan;
  const struct hx_stage **st =
      HX_NEW_ARRAY(hx_prog_arena(set), const struct hx_stage *, plan->npipelines);
  for (int begin = 0, layers = (int)set->ctx->model.layers; begin < layers;) {
    int end = segment(plan, begin, st), first = l->n;
    struct hx_prog_group *norms = new_group(set, l, PART_NORMS, max_stage_ranks(plan));
    for (int p = 0; p < plan->npipelines; p++)
      add_stage_ranks(set, norms, st[p]);
    norms->layer_begin = begin;
    norms->layer_end = end;
    finish_group(l);
    add_slice_groups(set, l, st, begin, end);
    add_kv_groups(set, l, st, begin, end);
    merge_range(l, first);
    begin = end;
  }
}

/* The scheduler's HX_GROUP_GRAD tables, when the plan has them, must name
 * the same ranks as the slices derived here: the generated constants come
 * from one derivation, checked against the plan's. */
static bool plan_slices_agree(const struct program_set *set, const struct hx_group *pg) {
  const struct hx_plan *plan = set->plan;
  const struct hx_stage **st =
      HX_NEW_ARRAY(hx_prog_arena(set), const struct hx_stage *, plan->npipelines);
  if (pg->layer_begin < 0 || pg->layer_end > set->ctx->model.layers ||
      segment(plan, pg->layer_begin, st) != pg->layer_end || pg->nranks != plan->npipelines)
    return false;
  int64_t L = 1;
  for (int p = 0; p < plan->npipelines; p++)
    L = hx_lcm(L, st[p]->tp);
  if (pg->nslices != L || pg->slice < 0 || pg->slice >= L)
    return false;
  for (int p = 0; p < plan->npipelines; p++)
    if (pg->ranks[p] != st[p]->devices[(int64_t)pg->slice * st[p]->tp / L])
      return false;
  return true;
}

bool hx_plan_groups_agree(const struct program_set *set) {
  for (int g = 0; g < set->plan->ngroups; g++) {
    const struct hx_group *pg = &set->plan->groups[g];
    if (pg->kind == HX_GROUP_GRAD && pg->layer_begin >= 0 && !plan_slices_agree(set, pg)) {
      hx_error_plain("the plan's gradient group %d (layers [%d, %d), slice %d of %d) does not "
                     "match its stages' TP layout",
                     g, pg->layer_begin, pg->layer_end, pg->slice, pg->nslices);
      return false;
    }
  }
  return true;
}

/* Groups in a fixed order — tok_emb, layer ranges in order, head — so ids
 * are deterministic and every rank creates its communicators in the same
 * global order. */
static void build_groups(struct program_set *set) {
  struct group_list l = {0};
  add_end_group(set, &l, 0);
  add_layer_groups(set, &l);
  add_end_group(set, &l, 1);
  set->groups = l.items;
  set->ngroups = l.n;
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
  if (m->rope_factor > 0) { /* only then: unscaled plans keep their fingerprints */
    snprintf(buf, sizeof buf, "rope_scaling llama3 %.17g %.17g %.17g %lld", m->rope_factor,
             m->rope_low_freq_factor, m->rope_high_freq_factor,
             (long long)m->rope_original_max_len);
    h = fnv_text(h, buf);
  }
  snprintf(buf, sizeof buf, "train %lld %.17g %.17g %.17g %.17g %.17g %.17g %lld %lld %lld",
           (long long)t->global_batch, t->lr, t->beta1, t->beta2, t->eps, t->weight_decay,
           t->grad_clip, (long long)t->warmup_steps, (long long)t->steps, (long long)t->seed);
  h = fnv_text(h, buf);
  for (int w = 0; w < set->nranks; w++) {
    const struct hx_prog_rank *r = &set->ranks[w];
    snprintf(buf, sizeof buf, "rank %d %d %d %d %d %lld %lld %d tp %d %d %d %d", r->device,
             r->pipeline, r->stage, r->st->layer_begin, r->st->layer_end,
             (long long)r->pl->micro_batch_size, (long long)r->pl->micro_batches,
             (int)set->plan->schedule, r->tp_rank, r->st->tp, r->leader_tp_rank,
             (int)r->st->recompute);
    h = fnv_text(h, buf);
    if (r->st->seq_layout) { /* HexiSeq: the rank's tokens and heads too */
      const struct hx_device_plan *d = &set->plan->devices[r->device];
      snprintf(buf, sizeof buf, "seq %d %d %lld %lld", r->unit, d->nseq,
               (long long)d->heads.begin, (long long)d->heads.end);
      h = fnv_text(h, buf);
      for (int i = 0; i < d->nseq; i++) {
        snprintf(buf, sizeof buf, " [%lld %lld)", (long long)d->seq[i].begin,
                 (long long)d->seq[i].end);
        h = fnv_text(h, buf);
      }
    }
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

/* ---- the runtime library's Makefile rules, which both targets' Makefiles
 * hold (emit_scripts.c, emit_cuda.c): here, below both, so neither calls the
 * other for them ---- */

/* One pattern rule: obj/PREFIX_X.o from $(HEXIC_HOME)/DIR/X.c, with mpicc. */
static void emit_object_rule(FILE *f, const char *prefix, const char *dir) {
  fprintf(f,
          "obj/%s_%%.o: $(HEXIC_HOME)/%s/%%.c $(LIB_HEADERS)\n"
          "\t@mkdir -p obj\n"
          "\t$(CC) $(ALL_CFLAGS) $(CPPFLAGS) -c $< -o $@\n\n",
          prefix, dir);
}

void hx_emit_runtime_library_rules(FILE *f, const char *backend) {
  char backend_dir[32];
  snprintf(backend_dir, sizeof backend_dir, "rtlib/%s", backend);
  emit_object_rule(f, "rtlib", "rtlib");
  emit_object_rule(f, backend, backend_dir);
  emit_object_rule(f, "seq", "rtlib/seq");
  emit_object_rule(f, "ckpt", "rtlib/ckpt");
  emit_object_rule(f, "kernels", "kernels/cpu");
  fputs("libhexic.a: $(LIB_OBJECTS)\n"
        "\trm -f $@\n"
        "\tar rcs $@ $^\n\n",
        f);
}
