/* HexiSeq stages of a plan.json (--plan=FILE, `hexic simulate`).
 *
 * plan.json carries a HexiSeq stage the way passes/hexiseq/hexiseq_plan.c builds it:
 * the stage's ranks (unit j = ranks [j*tp, (j+1)*tp)), per device its token
 * ranges and its heads, per TP rank one cp_ring listing the units in ring
 * order and one hp_a2a group per all-to-all group (a contiguous run of that
 * ring) with its split table. That is enough to rebuild the stage's
 * struct hx_seq_layout, so plan.json needs nothing more:
 *  - unit order and groups: the cp_ring of TP rank 0 and the hp_a2a groups
 *    along it;
 *  - tokens and front chunks: walking the ring, front chunks climb from
 *    token 0 and back chunks descend from the end (zig-zag), so each range a
 *    device holds is either the next front or the next back chunk;
 *  - heads: the TP rank 0 device's head count.
 * The tables are checked first (every token once per ring, every head of
 * the TP share once per all-to-all group, hx_seq_check_plan), then the
 * rebuilt layout must reproduce every device's ranges and heads and every
 * group and split table of the file: anything else is a plan the cost model
 * cannot price. Errors point at the offending member of the file. */
#include <stdlib.h>
#include <string.h>

#include "passes/cost/cost.h"
#include "plan_load.h"

struct seq_loader {
  struct hx_plan_loader *l;
  struct hx_ctx *ctx;
  struct hx_plan *plan;
  const struct hx_json **device_js; /* per rank: its devices[] entry */
  int *ring_of, *a2a_of;            /* per rank: its cp_ring / hp_a2a group, -1 if none */
  int *stage_pos;                   /* per rank of a HexiSeq stage: its index in the stage */
};

/* Here, not in plan_load.c, which calls this file: the two files must not
 * call into each other (plan_load.c asks it of the stages it reads). */
bool hx_plan_load_is_seq_stage(const struct hx_plan_loader *l, const int *ranks, int n) {
  for (int k = 0; k < n; k++)
    if (l->in_seq_group[ranks[k]])
      return true;
  return false;
}

static bool is_seq_group(const struct hx_group *g) {
  return g->kind == HX_GROUP_CP_RING || g->kind == HX_GROUP_HP_A2A;
}

static const char *group_noun(const struct hx_group *g) {
  return g->kind == HX_GROUP_CP_RING ? "cp ring" : "hp group";
}

/* Where member `key` of obj is (item k of it when it is an array and k >= 0),
 * else obj itself: the most precise place the file offers. */
static struct location where(const struct hx_json *obj, const char *key, int k) {
  const struct hx_json *v = hx_json_get(obj, key);
  if (!v)
    return obj->loc;
  if (k >= 0 && v->kind == HX_JSON_ARRAY && k < v->nitems)
    return v->items[k].loc;
  return v->loc;
}

static const struct hx_json *stage_json(const struct seq_loader *s, int i, int st) {
  const struct hx_json *pipes = hx_json_get(s->l->root, "pipelines");
  return &hx_json_get(&pipes->items[i], "stages")->items[st];
}

static bool stage_is_seq(const struct seq_loader *s, const struct hx_stage *st) {
  return hx_plan_load_is_seq_stage(s->l, st->devices, st->ndevices);
}

/* ---- the file's devices[] ---------------------------------------------- */

static bool index_devices(struct seq_loader *s) {
  const struct hx_json *devs = hx_json_get(s->l->root, "devices");
  if (!devs || devs->kind != HX_JSON_ARRAY) {
    hx_error(devs ? devs->loc : s->l->root->loc,
             "a plan with cp_ring or hp_a2a groups needs 'devices' with each rank's 'seq' and "
             "'heads'");
    return false;
  }
  for (int k = 0; k < devs->nitems; k++) {
    const struct hx_json *d = &devs->items[k];
    int64_t r;
    if (!hx_json_int(hx_json_get(d, "rank"), 0, s->plan->ndevices - 1, &r)) {
      hx_error(where(d, "rank", -1), "'rank' must be an integer in [0, %d]", s->plan->ndevices - 1);
      return false;
    }
    if (s->device_js[r]) {
      hx_error(where(d, "rank", -1), "rank %lld is listed twice in 'devices'", (long long)r);
      return false;
    }
    s->device_js[r] = d;
  }
  return true;
}

/* A [begin, end) pair of integers with lo <= begin <= end <= hi. */
static bool read_range(const struct hx_json *v, int64_t lo, int64_t hi, struct hx_range *out) {
  int64_t b, e;
  if (!v || v->kind != HX_JSON_ARRAY || v->nitems != 2 || !hx_json_int(&v->items[0], lo, hi, &b) ||
      !hx_json_int(&v->items[1], b, hi, &e))
    return false;
  *out = (struct hx_range){b, e};
  return true;
}

/* devices[r].seq (at most a front and a back chunk) and devices[r].heads. */
static bool load_device_share(struct seq_loader *s, int r) {
  const struct hx_json *d = s->device_js[r];
  if (!d) {
    hx_error(where(s->l->root, "devices", -1), "'devices' has no entry for rank %d", r);
    return false;
  }
  const struct hx_json *seq = hx_json_get(d, "seq");
  int64_t len = s->ctx->model.seq_len;
  if (!seq || seq->kind != HX_JSON_ARRAY || seq->nitems > 2) {
    hx_error(where(d, "seq", -1),
             "'seq' of rank %d must list at most two token ranges (a front and a back chunk)", r);
    return false;
  }
  if (seq->nitems == 0) {
    /* the cost model would price it, but the generated programs cannot run
     * it: their kernels read a local length of 0 as the whole sequence */
    hx_error(seq->loc,
             "rank %d holds no tokens of the sequence: every unit of a context/head parallel "
             "stage needs at least one token",
             r);
    return false;
  }
  struct hx_device_plan *dp = &s->plan->devices[r];
  dp->nseq = seq->nitems;
  dp->seq = HX_NEW_ARRAY(&s->ctx->arena, struct hx_range, seq->nitems > 0 ? seq->nitems : 1);
  for (int k = 0; k < seq->nitems; k++)
    if (!read_range(&seq->items[k], 0, len, &dp->seq[k]) || dp->seq[k].begin == dp->seq[k].end) {
      hx_error(seq->items[k].loc,
               "a token range must be [begin, end) with 0 <= begin < end <= %lld", (long long)len);
      return false;
    }
  if (!read_range(hx_json_get(d, "heads"), 0, s->ctx->model.heads, &dp->heads)) {
    hx_error(where(d, "heads", -1), "'heads' of rank %d must be [begin, end) within 0..%lld", r,
             (long long)s->ctx->model.heads);
    return false;
  }
  return true;
}

/* Device table entries of a HexiSeq stage: TP rank = place in the unit. */
static bool load_stage_shares(struct seq_loader *s, const struct hx_stage *st) {
  for (int k = 0; k < st->ndevices; k++) {
    int r = st->devices[k];
    s->stage_pos[r] = k;
    s->plan->devices[r].tp_rank = k % st->tp;
    if (!load_device_share(s, r))
      return false;
  }
  return true;
}

/* ---- the CP / HP tables ------------------------------------------------ */

static bool check_group_members(struct seq_loader *s, int g) {
  const struct hx_group *gr = &s->plan->groups[g];
  const struct hx_json *js = s->l->group_js[g];
  int *slot = gr->kind == HX_GROUP_CP_RING ? s->ring_of : s->a2a_of;
  const struct hx_device_plan *d0 = &s->plan->devices[gr->ranks[0]];
  for (int k = 0; k < gr->nranks; k++) {
    int r = gr->ranks[k];
    const struct hx_device_plan *d = &s->plan->devices[r];
    const char *why = NULL;
    if (d->pipeline < 0)
      why = "is in no stage";
    else if (d->pipeline != d0->pipeline || d->stage != d0->stage)
      why = "sits in another stage than the group's first rank";
    else if (slot[r] == g)
      why = "appears twice in this group";
    else if (slot[r] >= 0)
      why = "is already in another group of this kind";
    if (why) {
      hx_error(where(js, "ranks", k), "rank %d of this %s %s", r, group_noun(gr), why);
      return false;
    }
    slot[r] = g;
  }
  return true;
}

static int range_by_begin(const void *x, const void *y) {
  const struct hx_range *a = x, *b = y;
  return (a->begin > b->begin) - (a->begin < b->begin);
}

/* The first tokens a ring holds not exactly once: a gap (nobody) or an
 * overlap (two ranks), for the note under the error. */
static void note_ring_fault(struct seq_loader *s, const struct hx_group *ring,
                            const struct hx_json *js) {
  int total = 0;
  for (int k = 0; k < ring->nranks; k++)
    total += s->plan->devices[ring->ranks[k]].nseq;
  struct hx_range *r = HX_NEW_ARRAY(&s->ctx->arena, struct hx_range, total + 1);
  int n = 0;
  for (int k = 0; k < ring->nranks; k++)
    for (int i = 0; i < s->plan->devices[ring->ranks[k]].nseq; i++)
      r[n++] = s->plan->devices[ring->ranks[k]].seq[i];
  qsort(r, (size_t)n, sizeof r[0], range_by_begin);
  r[n++] = (struct hx_range){s->ctx->model.seq_len, s->ctx->model.seq_len}; /* the end */
  int64_t at = 0;
  for (int i = 0; i < n; i++) {
    if (r[i].begin > at) {
      hx_note(js->loc, "tokens [%lld, %lld) are held by no rank of this ring", (long long)at,
              (long long)r[i].begin);
      return;
    }
    if (r[i].begin < at) {
      hx_note(js->loc, "tokens from %lld on are held twice", (long long)r[i].begin);
      return;
    }
    at = r[i].end;
  }
}

/* hx_seq_check_plan's coverage rules on this one group (no stage has a
 * layout yet, so only the group's own tokens and heads are checked). */
static bool check_group_cover(struct seq_loader *s, int g) {
  struct hx_plan view = *s->plan;
  view.ngroups = 1;
  view.groups = &s->plan->groups[g];
  const char *why = hx_seq_check_plan(&s->ctx->arena, s->ctx, &view);
  if (!why)
    return true;
  hx_error(s->l->group_js[g]->loc, "%s", why);
  if (view.groups->kind == HX_GROUP_CP_RING)
    note_ring_fault(s, view.groups, s->l->group_js[g]);
  return false;
}

static bool check_membership(struct seq_loader *s, const struct hx_stage *st,
                             const struct hx_json *st_js) {
  for (int k = 0; k < st->ndevices; k++) {
    int r = st->devices[k];
    if (s->ring_of[r] < 0 || s->a2a_of[r] < 0) {
      hx_error(where(st_js, "ranks", k), "rank %d of this context/head parallel stage is in no %s",
               r, s->ring_of[r] < 0 ? "cp_ring group" : "hp_a2a group");
      return false;
    }
  }
  return true;
}

/* ---- rebuilding a stage's layout --------------------------------------- */

/* The ring of TP rank 0 names each unit once by its first device: the
 * order of the units. */
static bool ring_order(struct seq_loader *s, const struct hx_stage *st, int *order) {
  int nunits = st->ndevices / st->tp, g = s->ring_of[st->devices[0]];
  const struct hx_group *ring = &s->plan->groups[g];
  bool ok = ring->nranks == nunits;
  for (int k = 0; ok && k < nunits; k++) {
    ok = s->stage_pos[ring->ranks[k]] % st->tp == 0;
    order[k] = s->stage_pos[ring->ranks[k]] / st->tp;
  }
  if (!ok)
    hx_error(where(s->l->group_js[g], "ranks", -1),
             "the cp ring of rank %d must name each of the stage's %d units once, by its TP "
             "rank 0 device",
             st->devices[0], nunits);
  return ok;
}

/* Splits the ring into its hp groups; each must be a contiguous run of the
 * ring listing its ranks in ring order. Returns the number of groups (0 after
 * an error); group_start gets nunits + 1 entries at most. */
static int ring_groups(struct seq_loader *s, const struct hx_stage *st, const int *order,
                       int *group_start) {
  int nunits = st->ndevices / st->tp, ngroups = 0;
  for (int k = 0; k < nunits;) {
    int r = st->devices[order[k] * st->tp], g = s->a2a_of[r];
    const struct hx_group *hp = &s->plan->groups[g];
    group_start[ngroups++] = k;
    for (int j = 0; j < hp->nranks; j++, k++)
      if (k >= nunits || hp->ranks[j] != st->devices[order[k] * st->tp]) {
        hx_error(where(s->l->group_js[g], "ranks", j),
                 "this hp group must be a contiguous run of the cp ring of rank %d, in ring order",
                 st->devices[0]);
        return 0;
      }
  }
  group_start[ngroups] = nunits;
  return ngroups;
}

/* A unit's tokens and front chunk from its first device's ranges, walking
 * the zig-zag cursors (*front_at climbs, *back_at descends). A lone range
 * where both cursors meet is read as a front chunk: either reading gives
 * the same ranges. */
static bool unit_tokens(struct seq_loader *s, int r, int64_t *front_at, int64_t *back_at,
                        int64_t *tokens, int64_t *first) {
  const struct hx_device_plan *d = &s->plan->devices[r];
  struct hx_range rs[2];
  memcpy(rs, d->seq, sizeof rs[0] * (size_t)d->nseq);
  qsort(rs, (size_t)d->nseq, sizeof rs[0], range_by_begin);
  *tokens = *first = 0;
  bool took_back = false;
  for (int k = 0; k < d->nseq; k++) {
    int64_t len = rs[k].end - rs[k].begin;
    if (k == 0 && rs[k].begin == *front_at) {
      *first = len;
      *front_at += len;
    } else if (!took_back && rs[k].end == *back_at) {
      took_back = true;
      *back_at -= len;
    } else {
      hx_error(where(s->device_js[r], "seq", k),
               "rank %d's token range [%lld, %lld) is not the next zig-zag chunk of its cp ring "
               "(the front continues at %lld, the back at %lld)",
               r, (long long)rs[k].begin, (long long)rs[k].end, (long long)*front_at,
               (long long)*back_at);
      return false;
    }
    *tokens += len;
  }
  return true;
}

static struct hx_seq_layout *rebuild_layout(struct seq_loader *s, const struct hx_stage *st) {
  struct hx_arena *a = &s->ctx->arena;
  int tp = st->tp, nunits = st->ndevices / tp;
  int *order = HX_NEW_ARRAY(a, int, nunits), *starts = HX_NEW_ARRAY(a, int, nunits + 1);
  if (!ring_order(s, st, order))
    return NULL;
  int ngroups = ring_groups(s, st, order, starts);
  if (!ngroups)
    return NULL;
  struct hx_seq_layout *l = hx_seq_layout_new(a, tp, nunits, ngroups);
  memcpy(l->order, order, sizeof order[0] * (size_t)nunits);
  memcpy(l->group_start, starts, sizeof starts[0] * (size_t)(ngroups + 1));
  int64_t front_at = 0, back_at = s->ctx->model.seq_len;
  for (int g = 0; g < ngroups; g++)
    for (int k = starts[g]; k < starts[g + 1]; k++) {
      int u = order[k], r = st->devices[u * tp];
      l->group_of[u] = g;
      l->heads[u] = (int)(s->plan->devices[r].heads.end - s->plan->devices[r].heads.begin);
      if (!unit_tokens(s, r, &front_at, &back_at, &l->tokens[u], &l->first[u]))
        return NULL;
    }
  return l;
}

static bool same_ranges(const struct hx_range *a, int na, const struct hx_range *b, int nb) {
  if (na != nb)
    return false;
  for (int k = 0; k < na; k++) {
    bool found = false;
    for (int j = 0; j < nb; j++)
      found |= a[k].begin == b[j].begin && a[k].end == b[j].end;
    if (!found)
      return false;
  }
  return true;
}

/* Every device of the stage must hold what the layout gives its unit and
 * TP rank; the device table then takes the layout's canonical form. */
static bool check_stage_devices(struct seq_loader *s, const struct hx_stage *st,
                                const struct hx_seq_layout *l) {
  const struct hx_model *m = &s->ctx->model;
  for (int k = 0; k < st->ndevices; k++) {
    int r = st->devices[k], u = k / l->tp, t = k % l->tp;
    struct hx_device_plan *d = &s->plan->devices[r];
    struct hx_range want[2];
    int n = hx_seq_unit_ranges(l, m->seq_len, u, want);
    if (!same_ranges(d->seq, d->nseq, want, n)) {
      hx_error(where(s->device_js[r], "seq", -1),
               "rank %d's token ranges differ from those of rank %d, the first device of its unit",
               r, st->devices[u * l->tp]);
      return false;
    }
    memcpy(d->seq, want, sizeof want[0] * (size_t)n);
    struct hx_range heads = hx_seq_device_heads(l, m, u, t);
    if (d->heads.begin != heads.begin || d->heads.end != heads.end) {
      hx_error(where(s->device_js[r], "heads", -1),
               "rank %d (TP rank %d) holds heads [%lld, %lld); its hp group gives it [%lld, %lld)",
               r, t, (long long)d->heads.begin, (long long)d->heads.end, (long long)heads.begin,
               (long long)heads.end);
      return false;
    }
    d->cp_rank = l->group_of[u];
    d->hp_rank = 0;
    while (l->order[l->group_start[d->cp_rank] + d->hp_rank] != u)
      d->hp_rank++;
  }
  return true;
}

/* ---- the stage's groups against the layout ----------------------------- */

static bool same_ranks_as(struct seq_loader *s, int g, const int *want, int n,
                          const struct hx_stage *st) {
  const struct hx_group *gr = &s->plan->groups[g];
  const struct hx_json *js = s->l->group_js[g];
  bool ok = gr->nranks == n;
  for (int k = 0; ok && k < n; k++)
    ok = gr->ranks[k] == want[k];
  if (!ok) {
    hx_error(where(js, "ranks", -1),
             "this %s must list its ranks in the order of the TP rank 0 %s (rank %d first)",
             group_noun(gr), group_noun(gr), want[0]);
    return false;
  }
  if (gr->layer_begin != st->layer_begin || gr->layer_end != st->layer_end) {
    hx_error(where(js, "layers", -1), "this %s serves its stage's layers [%d, %d)", group_noun(gr),
             st->layer_begin, st->layer_end);
    return false;
  }
  return true;
}

/* Sender tokens x receiver heads: filled when the file has no table,
 * checked when it has one. */
static bool check_split_table(struct seq_loader *s, int g, const struct hx_seq_layout *l,
                              const int *units) {
  struct hx_group *gr = &s->plan->groups[g];
  int n = gr->nranks;
  bool given = gr->split_table != NULL;
  if (!given)
    gr->split_table = HX_NEW_ARRAY(&s->ctx->arena, int64_t, (long)n * n);
  for (int x = 0; x < n; x++)
    for (int y = 0; y < n; y++) {
      int64_t want = l->tokens[units[x]] * l->heads[units[y]];
      int64_t *cell = &gr->split_table[(long)x * n + y];
      if (given && *cell != want) {
        hx_error(where(s->l->group_js[g], "split_table", x * n + y),
                 "split_table row %d column %d is %lld; %lld tokens x %d heads make %lld", x, y,
                 (long long)*cell, (long long)l->tokens[units[x]], l->heads[units[y]],
                 (long long)want);
        return false;
      }
      *cell = want;
    }
  return true;
}

/* Per TP rank t: the ring over every unit in ring order, and each hp group
 * in order, as passes/hexiseq/hexiseq_plan.c builds them. */
static bool check_stage_groups(struct seq_loader *s, const struct hx_stage *st,
                               const struct hx_seq_layout *l) {
  int *want = HX_NEW_ARRAY(&s->ctx->arena, int, l->nunits);
  for (int t = 0; t < l->tp; t++) {
    for (int k = 0; k < l->nunits; k++)
      want[k] = st->devices[l->order[k] * l->tp + t];
    if (!same_ranks_as(s, s->ring_of[want[0]], want, l->nunits, st))
      return false;
    for (int g = 0; g < l->ngroups; g++) {
      const int *units = l->order + l->group_start[g];
      int n = l->group_start[g + 1] - l->group_start[g];
      for (int k = 0; k < n; k++)
        want[k] = st->devices[units[k] * l->tp + t];
      int hp = s->a2a_of[want[0]];
      if (!same_ranks_as(s, hp, want, n, st) || !check_split_table(s, hp, l, units))
        return false;
    }
  }
  return true;
}

/* The file's cp / hp, when given, must be the layout's: its group count and
 * its largest group. */
static bool check_shape(const struct hx_stage *st, const struct hx_json *st_js,
                        const struct hx_seq_layout *l, int largest) {
  const char *keys[] = {"cp", "hp"};
  int want[] = {l->ngroups, largest};
  for (int k = 0; k < 2; k++) {
    const struct hx_json *v = hx_json_get(st_js, keys[k]);
    int64_t got;
    if (v && (!hx_json_int(v, 1, st->ndevices, &got) || got != want[k])) {
      hx_error(v->loc, "'%s' of this stage must be %d: its cp ring and hp groups make %d x %d",
               keys[k], want[k], l->ngroups, largest);
      return false;
    }
  }
  return true;
}

static bool load_stage_layout(struct seq_loader *s, struct hx_stage *st,
                              const struct hx_json *st_js) {
  if (s->ctx->model.kv_heads % st->tp) {
    /* every TP share must start on a K/V head boundary (passes/cost/cost.h) */
    hx_error(where(st_js, "tp", -1),
             "tp %d of a context/head parallel stage must divide the %lld K/V heads", st->tp,
             (long long)s->ctx->model.kv_heads);
    return false;
  }
  struct hx_seq_layout *l = rebuild_layout(s, st);
  if (!l || !check_stage_devices(s, st, l) || !check_stage_groups(s, st, l))
    return false;
  int largest = hx_seq_largest_group(l);
  if (!check_shape(st, st_js, l, largest))
    return false;
  hx_seq_layout_links(s->ctx, st->devices, l);
  st->cp = l->ngroups;
  st->hp = largest;
  st->seq_layout = l;
  return true;
}

/* ---- driver ------------------------------------------------------------ */

static bool has_seq_groups(const struct hx_plan *p) {
  for (int g = 0; g < p->ngroups; g++)
    if (is_seq_group(&p->groups[g]))
      return true;
  return false;
}

/* Every HexiSeq stage's device shares, in file order. */
static bool load_shares(struct seq_loader *s) {
  for (int i = 0; i < s->plan->npipelines; i++)
    for (int k = 0; k < s->plan->pipelines[i].nstages; k++) {
      const struct hx_stage *st = &s->plan->pipelines[i].stages[k];
      if (stage_is_seq(s, st) && !load_stage_shares(s, st))
        return false;
    }
  return true;
}

static bool load_tables(struct seq_loader *s) {
  for (int g = 0; g < s->plan->ngroups; g++)
    if (is_seq_group(&s->plan->groups[g]) &&
        (!check_group_members(s, g) || !check_group_cover(s, g)))
      return false;
  return true;
}

static bool load_layouts(struct seq_loader *s) {
  for (int i = 0; i < s->plan->npipelines; i++)
    for (int k = 0; k < s->plan->pipelines[i].nstages; k++) {
      struct hx_stage *st = &s->plan->pipelines[i].stages[k];
      const struct hx_json *st_js = stage_json(s, i, k);
      if (stage_is_seq(s, st) &&
          (!check_membership(s, st, st_js) || !load_stage_layout(s, st, st_js)))
        return false;
    }
  return true;
}

bool hx_plan_load_seq(struct hx_plan_loader *l) {
  if (!has_seq_groups(l->plan))
    return true;
  struct hx_arena *a = &l->ctx->arena;
  int n = l->plan->ndevices;
  struct seq_loader s = {l,
                         l->ctx,
                         l->plan,
                         HX_NEW_ARRAY(a, const struct hx_json *, n),
                         HX_NEW_ARRAY(a, int, n),
                         HX_NEW_ARRAY(a, int, n),
                         HX_NEW_ARRAY(a, int, n)};
  for (int r = 0; r < n; r++)
    s.ring_of[r] = s.a2a_of[r] = s.stage_pos[r] = -1;
  if (!index_devices(&s) || !load_shares(&s) || !load_tables(&s) || !load_layouts(&s))
    return false;
  /* the whole plan, membership included: what hx_verify_plan will demand */
  const char *why = hx_seq_check_plan(a, l->ctx, l->plan);
  if (why)
    hx_error(l->root->loc, "%s", why);
  return why == NULL;
}
