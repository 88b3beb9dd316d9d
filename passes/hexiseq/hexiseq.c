/* HexiSeq entry points: whether a sequence must be split, and the search
 * over DP/TP/PP frames, baseline layouts and HexiSeq layouts (hexiseq.h). */
#include "hexiseq.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "passes/cost/cost.h"
#include "ir/plan_util.h"
#include "ir/units.h"
#include "passes/schedule/sched.h"

/* ---- is the sequence too long? ----------------------------------------- */

/* Static and full memory of Megatron's stage s of a (dp, tp, pp) shape, one
 * sequence per micro-batch: true in *weights_fit when the weights fit. */
static bool shape_fits(const struct hx_ctx *ctx, int dp, int tp, int pp, bool recompute,
                       bool *weights_fit) {
  int64_t per_stage = ctx->model.layers / pp, m = ctx->train.global_batch / dp;
  int ranks[4096];
  bool fits = true;
  for (int s = 0; s < pp; s++) {
    struct hx_stage st;
    memset(&st, 0, sizeof st);
    for (int t = 0; t < tp; t++)
      ranks[t] = s * dp * tp + t;
    st.devices = ranks;
    st.ndevices = st.tp = tp;
    st.cp = st.hp = 1;
    st.layer_begin = (int)(s * per_stage);
    st.layer_end = (int)((s + 1) * per_stage);
    st.recompute = recompute;
    bool first = s == 0, last = s == pp - 1;
    double cap = hx_stage_memory_capacity(&ctx->cluster, &st);
    double weights = hx_stage_static_bytes(ctx, &st, first, last) + HX_MEMORY_RESERVE_BYTES;
    int64_t keep = hx_in_flight(ctx->train.schedule, s, pp, m);
    if (weights > cap)
      return false;
    if (hx_stage_memory_bytes(ctx, &st, first, last, 1, keep) > cap)
      fits = false;
  }
  *weights_fit = true;
  return fits;
}

/* Megatron's rules: tp divides the heads and kv heads, pp the layers, dp the
 * global batch, and dp x tp x pp is every device. */
static bool symmetric_shape_legal(const struct hx_ctx *ctx, int tp, int pp) {
  const struct hx_model *m = &ctx->model;
  int n = ctx->cluster.ndevices;
  return n % (tp * pp) == 0 && m->heads % tp == 0 && m->kv_heads % tp == 0 &&
         m->layers % pp == 0 && ctx->train.global_batch % (n / (tp * pp)) == 0;
}

bool hx_hexiseq_no_symmetric_shape(const struct hx_ctx *ctx) {
  int n = ctx->cluster.ndevices;
  for (int tp = 1; tp <= n && tp <= 4096; tp++)
    for (int pp = 1; pp <= n / tp; pp++)
      if (symmetric_shape_legal(ctx, tp, pp))
        return false;
  return true;
}

bool hx_hexiseq_needed(const struct hx_ctx *ctx) {
  int n = ctx->cluster.ndevices;
  bool weights_fit = false;
  for (int tp = 1; tp <= n && tp <= 4096; tp++)
    for (int pp = 1; pp <= n / tp; pp++) {
      if (!symmetric_shape_legal(ctx, tp, pp))
        continue;
      int dp = n / (tp * pp);
      for (int r = 0; r < 2; r++)
        if (hx_sched_recompute_allowed(ctx, r == 1) &&
            shape_fits(ctx, dp, tp, pp, r == 1, &weights_fit))
          return false;
    }
  return weights_fit;
}

/* ---- candidates -------------------------------------------------------- */

enum kind { KIND_RING, KIND_ULYSSES, KIND_USP, KIND_HEXISEQ, NKINDS };
static const char *const kind_names[] = {"ring", "ulysses", "usp", "hexiseq"};

/* The best few plans of each kind by the closed-form estimate, kept as deep
 * copies in `keep` (frames are built in arenas freed after each frame). */
enum { KEEP = 3 };

/* How far a layout, a cell or a frame is from fitting: the bytes the
 * binding device lacks (its unit's largest need over its memory) and that
 * device; bytes INFINITY, rank -1 when nothing was measured. */
struct miss {
  double bytes;
  int rank;
  const char *frame; /* the closest frame's shape (search level only) */
};

struct search {
  struct hx_ctx *ctx;
  struct hx_search_limit limit; /* the clock cuts refinement short */
  struct hx_arena keep;
  struct hx_plan *best[NKINDS][KEEP];
  double est[NKINDS][KEEP];
  struct miss closest; /* of the frames refined, the one nearest to fitting */
};

static double evaluate(const struct hx_ctx *ctx, const struct hx_plan *p) {
  if (!hx_plan_memory_fits(ctx, p, NULL, NULL))
    return INFINITY;
  return hx_estimate_iteration_s(ctx, p);
}

static double offer(struct search *s, enum kind k, const struct hx_plan *p) {
  double est = evaluate(s->ctx, p);
  int at = KEEP;
  while (at > 0 && est < s->est[k][at - 1])
    at--;
  if (at == KEEP)
    return est;
  for (int j = KEEP - 1; j > at; j--) {
    s->best[k][j] = s->best[k][j - 1];
    s->est[k][j] = s->est[k][j - 1];
  }
  s->best[k][at] = hx_seq_plan_copy(&s->keep, p);
  s->est[k][at] = est;
  return est;
}

/* ---- baselines: symmetric layouts on Megatron's rank order -------------- */

static const char *frame_text(struct hx_arena *a, const struct hx_seq_frame *f) {
  return hx_sprintf(a, "dp=%d tp=%d pp=%d mbs=1%s", f->dp, f->tp, f->pp,
                    f->recompute ? " recompute=full" : "");
}

/* Every legal cp x hp factoring of the frame's units; the frame's best. */
static double baselines_of(struct search *s, struct hx_arena *a, const struct hx_seq_frame *f) {
  double best = INFINITY;
  int ncells = f->dp * f->pp;
  const struct hx_seq_layout **layouts = HX_NEW_ARRAY(a, const struct hx_seq_layout *, ncells);
  for (int hp = 1; hp <= f->units; hp++) {
    if (f->units % hp)
      continue;
    int cp = f->units / hp;
    bool ok = true;
    for (int c = 0; c < ncells && ok; c++)
      ok = (layouts[c] = hx_seq_symmetric_layout(a, s->ctx, f->cell[c], f->tp, cp, hp)) != NULL;
    if (!ok)
      continue;
    enum kind k = hp == 1 ? KIND_RING : cp == 1 ? KIND_ULYSSES : KIND_USP;
    const char *text = hx_sprintf(a, "%s %s cp=%d hp=%d", kind_names[k], frame_text(a, f), cp, hp);
    struct hx_plan *p = hx_seq_plan_build(a, s->ctx, f, layouts, kind_names[k], text);
    best = fmin(best, offer(s, k, p));
  }
  return best;
}

/* ---- HexiSeq layouts of one cell ---------------------------------------- */

struct cell_search {
  const struct hx_ctx *ctx;
  struct hx_stage st; /* the cell as a stage (devices, tp, layers) */
  bool first, last;
  int64_t in_flight;
  const struct hx_seq_layout *best; /* fastest that fits memory */
  double best_s;
  /* Fastest of all, fitting or not: its per-layer cost and memory tell the
   * layer split how many layers this cell could take instead. */
  const struct hx_seq_layout *any;
  double any_s;
  struct miss miss; /* the least any layout that does not fit lacks */
};

/* The layout's binding device and the bytes it lacks: over the units, the
 * largest need over the unit's memory (its smallest device's, named). */
static struct miss layout_miss(const struct cell_search *cs) {
  const struct hx_seq_layout *l = cs->st.seq_layout;
  const struct hx_cluster *c = &cs->ctx->cluster;
  struct miss m = {-INFINITY, -1, NULL};
  for (int u = 0; u < l->nunits; u++) {
    double over = hx_seq_unit_memory_bytes(cs->ctx, &cs->st, u, cs->first, cs->last, 1,
                                           cs->in_flight) -
                  l->unit_memory[u];
    if (over <= m.bytes)
      continue;
    m.bytes = over;
    for (int k = 0; k < l->tp; k++) {
      int r = cs->st.devices[u * l->tp + k];
      if ((double)c->gpus[c->devices[r].gpu_type].memory_bytes == l->unit_memory[u]) {
        m.rank = r;
        break;
      }
    }
  }
  return m;
}

static void consider(struct cell_search *cs, struct hx_seq_layout *l) {
  if (!l)
    return;
  cs->st.seq_layout = l;
  double t = hx_seq_refine(cs->ctx, &cs->st, cs->first, cs->last, 1, cs->in_flight);
  bool fits =
      hx_seq_stage_memory_fits(cs->ctx, &cs->st, cs->first, cs->last, 1, cs->in_flight, NULL);
  if (!fits) {
    struct miss m = layout_miss(cs);
    if (m.rank >= 0 && m.bytes < cs->miss.bytes)
      cs->miss = m;
  }
  if (fits && t < cs->best_s) {
    cs->best_s = t;
    cs->best = l;
  }
  if (t < cs->any_s) {
    cs->any_s = t;
    cs->any = l;
  }
}

/* Distinct nodes among the cell's units: its NVLink islands. */
static int islands(const struct hx_ctx *ctx, const int *ranks, int tp, int units) {
  int n = 0;
  for (int u = 0; u < units; u++) {
    bool seen = false;
    for (int v = 0; v < u && !seen; v++)
      seen = ctx->cluster.devices[ranks[v * tp]].node == ctx->cluster.devices[ranks[u * tp]].node;
    n += !seen;
  }
  return n;
}

/* Group counts from the cell's topology: every count that keeps groups
 * inside NVLink islands or unions of whole islands (divisors of the island
 * count, and the island count times a divisor of the units per island),
 * one group (pure HP) and one per unit (pure CP). Distinct, ascending. */
static int group_counts(int units, int isl, int *out) {
  int n = 0;
  for (int g = 1; g <= units; g++) {
    bool whole_islands = isl % g == 0;
    bool inside_islands = g % isl == 0 && units % g == 0;
    if (g == 1 || g == units || whole_islands || inside_islands)
      out[n++] = g;
  }
  return n;
}

static void grouped_candidates(struct cell_search *cs, struct hx_arena *a, int units) {
  int isl = islands(cs->ctx, cs->st.devices, cs->st.tp, units);
  int *counts = HX_NEW_ARRAY(a, int, units);
  int ncounts = group_counts(units, isl, counts);
  int *group_of = HX_NEW_ARRAY(a, int, units), *by_compute_of = HX_NEW_ARRAY(a, int, units);
  for (int i = 0; i < ncounts; i++) {
    int g = counts[i];
    hx_seq_partition(a, cs->ctx, cs->st.devices, cs->st.tp, units, g, group_of, by_compute_of);
    /* groups of equal compute too where they differ: between units joined
     * by equally fast links (nodes over one network) size says little */
    bool balanced_only = !memcmp(group_of, by_compute_of, sizeof *group_of * (size_t)units);
    for (int pass = 0; pass < (balanced_only ? 1 : 2); pass++)
      for (int rule = 0; rule < HX_SPLIT_RULES; rule++)
        consider(cs, hx_seq_rule_layout(a, cs->ctx, &cs->st, pass ? by_compute_of : group_of, g,
                                        (enum hx_seq_rule)rule, cs->first, cs->last, 1,
                                        cs->in_flight));
  }
}

static void cell_init(struct cell_search *cs, const struct hx_ctx *ctx, struct hx_arena *a,
                      const struct hx_seq_frame *f, int c) {
  memset(cs, 0, sizeof *cs);
  cs->ctx = ctx;
  int s = c % f->pp, begin, end;
  hx_seq_frame_layers(f, c, &begin, &end);
  hx_stage_init(a, &cs->st, f->cell[c], f->units * f->tp, begin, end, f->recompute);
  cs->st.tp = f->tp;
  cs->first = s == 0;
  cs->last = s == f->pp - 1;
  cs->in_flight = hx_in_flight(ctx->train.schedule, s, f->pp, ctx->train.global_batch / f->dp);
  cs->best_s = cs->any_s = INFINITY;
  cs->miss = (struct miss){INFINITY, -1, NULL};
}

/* The best layout of cell c under the frame's layer bounds; `earlier` (may
 * be NULL) is the cell's layout under other bounds, refined again here. On
 * return *any is the fastest layout whether it fits memory or not, and
 * *miss what the closest of those that do not fit lacks. */
static const struct hx_seq_layout *cell_layout(const struct hx_ctx *ctx, struct hx_arena *a,
                                               const struct hx_seq_frame *f, int c,
                                               const struct hx_seq_layout *earlier,
                                               const struct hx_seq_layout **any,
                                               struct miss *miss) {
  struct cell_search cs;
  cell_init(&cs, ctx, a, f, c);
  /* the baselines' layouts, refined: HexiSeq starts from them too */
  for (int hp = 1; hp <= f->units; hp++)
    if (f->units % hp == 0)
      consider(&cs, hx_seq_symmetric_layout(a, ctx, f->cell[c], f->tp, f->units / hp, hp));
  grouped_candidates(&cs, a, f->units);
  if (earlier)
    consider(&cs, hx_seq_layout_copy(a, earlier));
  *any = cs.any;
  *miss = cs.miss;
  return cs.best;
}

/* ---- uneven layer split (HexiScale's idea, on CP x HP stages) ----------- */

/* The per-layer cost, fixed extra and most layers of cell c with layout l:
 * the layout's per-layer time does not depend on the layer count, memory
 * grows with it (weights and activations per layer). */
static void cell_cost(const struct hx_ctx *ctx, struct hx_arena *a, const struct hx_seq_frame *f,
                      int c, const struct hx_seq_layout *l, struct hx_stage_cost *out) {
  struct cell_search cs;
  cell_init(&cs, ctx, a, f, c);
  cs.st.seq_layout = l;
  struct hx_seq_stage_cost sc;
  hx_seq_stage_cost(ctx, &cs.st, 1, true, &sc);
  out->per_layer = sc.layer_fwd + sc.layer_bwd;
  out->extra = (cs.last ? sc.head_fwd + sc.head_bwd : 0) + (cs.first ? sc.embed_fwd : 0);
  out->max_layers = -1;
  for (int n = 0; n <= ctx->model.layers; n++) {
    cs.st.layer_end = cs.st.layer_begin + n;
    if (!hx_seq_stage_memory_fits(ctx, &cs.st, cs.first, cs.last, 1, cs.in_flight, NULL))
      break;
    out->max_layers = n;
  }
}

/* Sets every pipeline's bounds to the exact min-max split of the layers by
 * its cells' costs under `costed` layouts. False when no split fits or
 * nothing changed. */
static bool split_layers_by_cost(const struct hx_ctx *ctx, struct hx_arena *a,
                                 struct hx_seq_frame *f, const struct hx_seq_layout *const *costed) {
  struct hx_stage_cost *cost = HX_NEW_ARRAY(a, struct hx_stage_cost, f->pp);
  int *counts = HX_NEW_ARRAY(a, int, f->pp);
  bool changed = false;
  for (int i = 0; i < f->dp; i++) {
    for (int s = 0; s < f->pp; s++)
      cell_cost(ctx, a, f, i * f->pp + s, costed[i * f->pp + s], &cost[s]);
    if (hx_sched_split_layers(cost, f->pp, (int)ctx->model.layers, counts) < 0)
      return false;
    int *b = &f->bounds[i * (f->pp + 1)];
    for (int s = 0; s < f->pp; s++) {
      changed |= b[s + 1] - b[s] != counts[s];
      b[s + 1] = b[s] + counts[s];
    }
  }
  return changed;
}

static const char *layers_text(struct hx_arena *a, const struct hx_seq_frame *f) {
  const char *text = "";
  for (int i = 0; i < f->dp && f->pp > 1; i++)
    for (int s = 0; s < f->pp; s++) {
      int begin, end;
      hx_seq_frame_layers(f, i * f->pp + s, &begin, &end);
      text = hx_sprintf(a, "%s%s%d", text, s ? "+" : i ? " | " : " layers ", end - begin);
    }
  return text;
}

/* Layouts of every cell under the frame's bounds (earlier: the cells'
 * layouts under other bounds, or NULL). False when some cell fits nothing;
 * `any` gets each cell's fastest layout all the same, and *miss the largest
 * of the cells' least shortfalls (what the frame lacks at the least). */
static bool frame_layouts(const struct hx_ctx *ctx, struct hx_arena *a, const struct hx_seq_frame *f,
                          const struct hx_seq_layout **earlier, const struct hx_seq_layout **out,
                          const struct hx_seq_layout **any, struct miss *miss) {
  bool ok = true;
  *miss = (struct miss){-INFINITY, -1, NULL};
  for (int c = 0; c < f->dp * f->pp; c++) {
    struct miss m;
    out[c] = cell_layout(ctx, a, f, c, earlier ? earlier[c] : NULL, &any[c], &m);
    if (!out[c] && (m.rank < 0 || m.bytes > miss->bytes))
      *miss = m;
    if (!any[c])
      return false;
    ok &= out[c] != NULL;
  }
  return ok;
}

/* Keeps the frame's miss when it is the closest yet (the frame fits nothing). */
static void note_miss(struct search *s, struct hx_arena *a, const struct hx_seq_frame *f,
                      struct miss m) {
  if (m.rank < 0 || !(m.bytes < s->closest.bytes))
    return;
  m.frame = hx_sprintf(&s->ctx->arena, "%s%s", frame_text(a, f), layers_text(a, f));
  s->closest = m;
}

static void offer_frame(struct search *s, struct hx_arena *a, const struct hx_seq_frame *f,
                        const struct hx_seq_layout *const *layouts) {
  const char *text = hx_sprintf(a, "%s %s stages%s", frame_text(a, f),
                                f->mixed ? "mixed" : "megatron-order", layers_text(a, f));
  offer(s, KIND_HEXISEQ, hx_seq_plan_build(a, s->ctx, f, layouts, "hexiseq", text));
}

/* The frame with even layers, then (pipelines of several stages) with the
 * layers split by the stages' measured costs under those layouts, the
 * layouts searched again for the new bounds. Both are offered. */
static void hexiseq_of(struct search *s, struct hx_arena *a, struct hx_seq_frame *f) {
  int ncells = f->dp * f->pp;
  const struct hx_seq_layout **even = HX_NEW_ARRAY(a, const struct hx_seq_layout *, ncells);
  const struct hx_seq_layout **any = HX_NEW_ARRAY(a, const struct hx_seq_layout *, ncells);
  struct miss miss;
  bool fits = frame_layouts(s->ctx, a, f, NULL, even, any, &miss);
  if (fits)
    offer_frame(s, a, f, even);
  else
    note_miss(s, a, f, miss);
  if (f->pp == 1 || !any[0])
    return;
  for (int c = 0; c < ncells; c++)
    if (!even[c])
      even[c] = any[c]; /* priced all the same: the split may give it fewer layers */
  if (!split_layers_by_cost(s->ctx, a, f, even))
    return;
  const struct hx_seq_layout **uneven = HX_NEW_ARRAY(a, const struct hx_seq_layout *, ncells);
  if (frame_layouts(s->ctx, a, f, even, uneven, any, &miss))
    offer_frame(s, a, f, uneven);
  else
    note_miss(s, a, f, miss);
}

/* ---- frames ------------------------------------------------------------ */

struct frame_score {
  int dp, tp, pp;
  bool recompute;
  double est;
};

enum { MAX_FRAMES = 4096 };

static int enumerate_frames(struct search *s, struct frame_score *out) {
  struct hx_ctx *ctx = s->ctx;
  int n = ctx->cluster.ndevices, count = 0;
  for (int tp = 1; tp <= n; tp++)
    for (int pp = 1; pp * tp <= n; pp++)
      for (int dp = 1; dp * pp * tp <= n; dp++)
        for (int r = 0; r < 2 && count < MAX_FRAMES; r++) {
          if (!hx_sched_recompute_allowed(ctx, r == 1))
            continue;
          struct hx_arena a;
          hx_arena_init(&a);
          struct hx_seq_frame *f = hx_seq_frame_new(&a, ctx, dp, tp, pp, r == 1, false);
          if (f) {
            out[count] = (struct frame_score){dp, tp, pp, r == 1, baselines_of(s, &a, f)};
            count++;
          }
          hx_arena_free(&a);
        }
  return count;
}

/* The frames to refine: the best by baseline estimate; when no baseline
 * fits anywhere, the frames with the most units per stage (the sequence
 * split the finest) and full recompute. */
static void pick_frames(struct frame_score *fs, int n) {
  for (int i = 1; i < n; i++)
    for (int j = i; j > 0; j--) {
      const struct frame_score *x = &fs[j], *y = &fs[j - 1];
      bool before = x->est < y->est ||
                    (x->est == y->est && isinf(x->est) &&
                     (x->recompute > y->recompute ||
                      (x->recompute == y->recompute && x->tp * x->pp < y->tp * y->pp)));
      if (!before)
        break;
      struct frame_score t = fs[j];
      fs[j] = fs[j - 1];
      fs[j - 1] = t;
    }
}

/* Which frames to refine: those whose best baseline is within
 * FRAME_SLACK of the best frame's (a frame whose symmetric layouts are more
 * than twice as slow would need its asymmetric layout to gain more than 2x;
 * bench/hexiseq_bench.sh measures at most ~1.6x over the best baseline), the
 * best one always, and no more than a fixed amount of work. Refining a cell costs about
 * rounds x moves x one pricing, each growing with the cell's units, so a
 * frame costs ~ (all its units) x (units per cell); the budget counts that.
 * A count, not a clock: the same inputs always refine the same frames. */
enum { MIN_FRAMES = 1 };
static const double FRAME_SLACK = 2.0, REFINE_WORK_BUDGET = 40000;

static double frame_work(const struct frame_score *f, int n_devices) {
  double units = (double)n_devices / f->tp;
  return units * units / ((double)f->dp * f->pp);
}

static bool worth_refining(const struct frame_score *fs, int i, double spent, int n_devices) {
  if (i < MIN_FRAMES)
    return true;
  if (spent + frame_work(&fs[i], n_devices) > REFINE_WORK_BUDGET)
    return false;
  return isinf(fs[0].est) || fs[i].est <= fs[0].est * FRAME_SLACK;
}

static void refine_frames(struct search *s, const struct frame_score *fs, int n) {
  int ndev = s->ctx->cluster.ndevices;
  double spent = 0;
  for (int i = 0; i < n && worth_refining(fs, i, spent, ndev); i++) {
    /* the best frame always: the baselines are the first plans */
    if (i >= MIN_FRAMES && hx_search_limit_stop(&s->limit))
      break;
    spent += frame_work(&fs[i], ndev);
    for (int mixed = 1; mixed >= 0; mixed--) {
      struct hx_arena a;
      hx_arena_init(&a);
      struct hx_seq_frame *f =
          hx_seq_frame_new(&a, s->ctx, fs[i].dp, fs[i].tp, fs[i].pp, fs[i].recompute, mixed);
      if (f)
        hexiseq_of(s, &a, f);
      hx_arena_free(&a);
    }
  }
}

/* ---- choice ------------------------------------------------------------ */

static struct hx_plan *simulated(struct hx_ctx *ctx, const struct hx_plan *p) {
  struct hx_plan *q = hx_seq_plan_copy(&ctx->arena, p);
  hx_simulate(ctx, q, NULL);
  return q;
}

/* The kept plans simulated; returns the fastest of kind k (NULL if none). */
static struct hx_plan *fastest_of(struct search *s, enum kind k) {
  struct hx_plan *best = NULL;
  for (int j = 0; j < KEEP && s->best[k][j]; j++) {
    if (isinf(s->est[k][j]))
      break;
    struct hx_plan *p = simulated(s->ctx, s->best[k][j]);
    if (!p->sim.valid) /* too many micro-batches x stages to simulate */
      continue;
    if (!best || p->sim.iteration_s < best->sim.iteration_s)
      best = p;
  }
  return best;
}

static void attach_baselines(struct hx_ctx *ctx, struct hx_plan *plan, struct hx_plan **kinds) {
  plan->baselines = HX_NEW_ARRAY(&ctx->arena, struct hx_plan *, KIND_HEXISEQ + 1);
  struct hx_plan *best = ctx->baseline && ctx->baseline->sim.valid ? ctx->baseline : NULL;
  if (best)
    plan->baselines[plan->nbaselines++] = best;
  for (int k = 0; k < KIND_HEXISEQ; k++) {
    if (!kinds[k])
      continue;
    plan->baselines[plan->nbaselines++] = kinds[k];
    if (!best || kinds[k]->sim.iteration_s < best->sim.iteration_s)
      best = kinds[k];
  }
  ctx->baseline = best;
}

/* The search; *closest (may be NULL) gets the refined frame nearest to
 * fitting when no layout fits. */
static struct hx_plan *search_plan(struct hx_ctx *ctx, struct miss *closest) {
  struct search s;
  memset(&s, 0, sizeof s);
  s.ctx = ctx;
  s.closest = (struct miss){INFINITY, -1, NULL};
  hx_search_limit_init(&s.limit, &ctx->opt);
  hx_arena_init(&s.keep);
  for (int k = 0; k < NKINDS; k++)
    for (int j = 0; j < KEEP; j++)
      s.est[k][j] = INFINITY;
  struct frame_score *fs = HX_NEW_ARRAY(&s.keep, struct frame_score, MAX_FRAMES);
  int nframes = enumerate_frames(&s, fs);
  pick_frames(fs, nframes);
  refine_frames(&s, fs, nframes);
  hx_search_limit_report(&s.limit, "the HexiSeq search");
  struct hx_plan *kinds[NKINDS];
  for (int k = 0; k < NKINDS; k++)
    kinds[k] = fastest_of(&s, k);
  hx_arena_free(&s.keep);
  if (closest)
    *closest = s.closest;
  if (ctx->baseline && !ctx->baseline->sim.valid)
    hx_simulate(ctx, ctx->baseline, NULL);
  /* The baselines' layouts are candidates: hexic is never slower than them.
   * A baseline that ties HexiSeq's own layout wins (its layout is the one
   * both reach), and the plan keeps the winner's name (issue 15: the label
   * says where the plan came from). */
  int won = kinds[KIND_HEXISEQ] ? KIND_HEXISEQ : -1;
  for (int k = 0; k < KIND_HEXISEQ; k++) {
    if (!kinds[k])
      continue;
    double t = kinds[k]->sim.iteration_s;
    if (won < 0 || t < kinds[won]->sim.iteration_s ||
        (won == KIND_HEXISEQ && t == kinds[won]->sim.iteration_s))
      won = k;
  }
  if (won < 0)
    return NULL;
  struct hx_plan *plan =
      won == KIND_HEXISEQ ? kinds[won] : hx_seq_plan_copy(&ctx->arena, kinds[won]);
  plan->strategy = kind_names[won];
  attach_baselines(ctx, plan, kinds);
  return plan;
}

struct hx_plan *hx_hexiseq_try(struct hx_ctx *ctx) { return search_plan(ctx, NULL); }

struct hx_plan *hx_hexiseq_schedule(struct hx_ctx *ctx) {
  struct miss closest;
  struct hx_plan *plan = search_plan(ctx, &closest);
  if (plan)
    return plan;
  /* the binding device of the frame nearest to fitting, as HexiScale's
   * report names one: what the cluster lacks, not only that it lacks */
  const char *where =
      closest.rank < 0
          ? ""
          : hx_sprintf(&ctx->arena, ": the closest layout (%s) needs %s more on %s", closest.frame,
                       hx_bytes_text(&ctx->arena, closest.bytes),
                       ctx->cluster.devices[closest.rank].name);
  /* full recompute was tried already unless the train block rules it out */
  hx_error_plain("no context x head parallel layout fits in memory over %d devices for "
                 "%lld-token sequences%s; try %smore devices",
                 ctx->cluster.ndevices, (long long)ctx->model.seq_len, where,
                 hx_sched_recompute_allowed(ctx, true) ? "" : "recompute = full or ");
  return NULL;
}

static bool splits_sequences(const struct hx_plan *plan) {
  for (int i = 0; i < plan->npipelines; i++)
    for (int j = 0; j < plan->pipelines[i].nstages; j++)
      if (plan->pipelines[i].stages[j].seq_layout)
        return true;
  return false;
}

void hx_hexiseq_warn_micro_batch(const struct hx_ctx *ctx, const struct hx_plan *plan) {
  int64_t asked = ctx->train.micro_batch;
  if (!plan || asked <= 1 || !splits_sequences(plan))
    return;
  hx_warning(ctx->train.micro_batch_loc,
             "'micro_batch' (%lld) is not used: the plan splits sequences over devices "
             "(context x head parallel), one sequence per micro-batch",
             (long long)asked);
}
