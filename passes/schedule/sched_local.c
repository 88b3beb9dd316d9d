/* Local search over plan structures, for small clusters.
 *
 * The outer search builds plans from METIS partitions and a handful of TP
 * layouts and stage orders; the optimum of a small cluster is often one
 * structural step away from all of them (a TP group across two machines
 * when the network beats their own links, a device left out of a stage, two
 * pipelines where one pipeline of twice the width was built). This pass
 * hill-climbs from a completed plan over the structures one move away:
 *
 *   pipelines  split one in two (every stage halved, or its stages cut into
 *              a prefix and a suffix), merge two (stage by stage, or one
 *              after the other), drop one;
 *   stages     merge two into one TP group, move one to another position or
 *              pipeline, split one into two halves, drop one;
 *   devices    move one to another stage, to a new stage at any position or
 *              to a new pipeline; swap two of different machines; add an
 *              unused one the same ways; drop one.
 *
 * Every candidate is priced by the caller (completion by
 * hx_sched_complete_setting over all settings, simulated), so every plan this
 * pass can reach lies in the exhaustive planner's space. Devices of one
 * machine are interchangeable (same GPU, same links), so a candidate is
 * relabelled canonically before it is priced: pipelines sorted by their
 * per-stage machine counts, then each machine's devices handed out in order
 * of use. Equivalent candidates then share one key in the caller's memo.
 *
 * First improvement, moves in a fixed order, restarted after every
 * improvement; the budget counts fresh pricings. Deterministic. */
#include <math.h>
#include <string.h>

#include "ir/plan_util.h"
#include "passes/cost/cost.h"
#include "sched.h"

enum { MAXD = HX_LOCAL_MAX_DEVICES };

struct ls_stage {
  int n;
  int dev[MAXD];
};

struct ls_pipe {
  int nst;
  struct ls_stage st[MAXD];
};

/* A structure under edit; devices set to -1 are removed by normalize(). */
struct ls_plan {
  int np;
  struct ls_pipe p[MAXD];
};

struct ls {
  struct hx_ctx *ctx;
  hx_sched_price_fn price;
  void *cookie;
  int budget; /* fresh pricings left */
  struct ls_plan cur;
  double cur_s;
  /* Sampling mode (a kick): the moves are enumerated, not priced, and one
   * acceptable candidate is drawn uniformly (reservoir sampling). */
  bool sampling;
  long nsampled;
  struct ls_plan sample;
  struct hx_rng rng;
};

static int node_of(const struct ls *l, int rank) { return l->ctx->cluster.devices[rank].node; }

/* Copies of the used part only: a whole ls_plan is some 17 KB, nearly all
 * of it past np, nst and n, which nothing reads, and the climbs copy one
 * for every candidate they try. */
static void copy_pipe(struct ls_pipe *to, const struct ls_pipe *from) {
  to->nst = from->nst;
  memcpy(to->st, from->st, sizeof(struct ls_stage) * (size_t)from->nst);
}

static void copy_plan(struct ls_plan *to, const struct ls_plan *from) {
  to->np = from->np;
  for (int i = 0; i < from->np; i++)
    copy_pipe(&to->p[i], &from->p[i]);
}

/* ---- conversions ------------------------------------------------------------ */

static void from_plan(const struct hx_plan *p, struct ls_plan *out) {
  memset(out, 0, sizeof *out);
  out->np = p->npipelines;
  for (int i = 0; i < p->npipelines; i++) {
    out->p[i].nst = p->pipelines[i].nstages;
    for (int s = 0; s < p->pipelines[i].nstages; s++) {
      const struct hx_stage *st = &p->pipelines[i].stages[s];
      out->p[i].st[s].n = st->ndevices;
      memcpy(out->p[i].st[s].dev, st->devices, sizeof(int) * (size_t)st->ndevices);
    }
  }
}

static struct hx_plan *to_skeleton(const struct ls *l, struct hx_arena *a,
                                   const struct ls_plan *lp) {
  struct hx_plan *sk = hx_plan_new(a, l->ctx->cluster.ndevices, lp->np);
  sk->strategy = "hexiscale";
  sk->schedule = l->ctx->train.schedule;
  for (int i = 0; i < lp->np; i++) {
    hx_pipeline_init(a, &sk->pipelines[i], lp->p[i].nst);
    for (int s = 0; s < lp->p[i].nst; s++)
      hx_stage_init(a, &sk->pipelines[i].stages[s], lp->p[i].st[s].dev, lp->p[i].st[s].n, 0, 0,
                    false);
  }
  return sk;
}

/* The score of a canonical structure; the skeleton lives only for the call
 * (thousands are priced: none of them may stay in the caller's arena). */
static double price(struct ls *l, const struct ls_plan *lp, double beat) {
  struct hx_arena tmp;
  hx_arena_init(&tmp);
  bool fresh = false;
  double t = l->price(l->cookie, to_skeleton(l, &tmp, lp), beat, &fresh);
  hx_arena_free(&tmp);
  if (fresh)
    l->budget--;
  if (isnan(t)) { /* the caller's search has stopped */
    l->budget = 0;
    return INFINITY;
  }
  return t;
}

/* ---- normal form ------------------------------------------------------------ */

/* Drops removed devices (-1), then empty stages, then empty pipelines. */
static void normalize(struct ls_plan *lp) {
  int np = 0;
  for (int i = 0; i < lp->np; i++) {
    struct ls_pipe *p = &lp->p[i];
    int nst = 0;
    for (int s = 0; s < p->nst; s++) {
      struct ls_stage st = p->st[s];
      int n = 0;
      for (int k = 0; k < st.n; k++)
        if (st.dev[k] >= 0)
          st.dev[n++] = st.dev[k];
      st.n = n;
      if (n > 0)
        p->st[nst++] = st;
    }
    p->nst = nst;
    if (nst > 0 && np++ < i)
      copy_pipe(&lp->p[np - 1], p);
  }
  lp->np = np;
}

/* Whether the plan IR and the completion accept the structure: legal TP
 * degrees, no more stages than layers, no more pipelines than sequences. */
static bool acceptable(const struct ls *l, const struct ls_plan *lp) {
  const struct hx_ctx *ctx = l->ctx;
  if (lp->np < 1 || lp->np > ctx->train.global_batch)
    return false;
  for (int i = 0; i < lp->np; i++) {
    if (lp->p[i].nst > ctx->model.layers)
      return false;
    for (int s = 0; s < lp->p[i].nst; s++)
      if (!hx_sched_tp_legal(&ctx->model, lp->p[i].st[s].n))
        return false;
  }
  return true;
}

/* Sorts one stage's devices by machine (then rank). */
static void sort_stage(const struct ls *l, struct ls_stage *st) {
  for (int i = 1; i < st->n; i++)
    for (int k = i; k > 0; k--) {
      int a = st->dev[k - 1], b = st->dev[k];
      int na = node_of(l, a), nb = node_of(l, b);
      if (na < nb || (na == nb && a <= b))
        break;
      st->dev[k - 1] = b;
      st->dev[k] = a;
    }
}

/* Pipelines compared by their shape: stage count, then per stage its size
 * and machines. */
static int pipe_cmp(const struct ls *l, const struct ls_pipe *x, const struct ls_pipe *y) {
  if (x->nst != y->nst)
    return x->nst < y->nst ? -1 : 1;
  for (int s = 0; s < x->nst; s++) {
    if (x->st[s].n != y->st[s].n)
      return x->st[s].n < y->st[s].n ? -1 : 1;
    for (int k = 0; k < x->st[s].n; k++) {
      int a = node_of(l, x->st[s].dev[k]), b = node_of(l, y->st[s].dev[k]);
      if (a != b)
        return a < b ? -1 : 1;
    }
  }
  return 0;
}

/* The canonical relabelling (see the top of the file). */
static void canonicalize(const struct ls *l, struct ls_plan *lp) {
  for (int i = 0; i < lp->np; i++)
    for (int s = 0; s < lp->p[i].nst; s++)
      sort_stage(l, &lp->p[i].st[s]);
  for (int i = 1; i < lp->np; i++)
    for (int k = i; k > 0 && pipe_cmp(l, &lp->p[k - 1], &lp->p[k]) > 0; k--) {
      struct ls_pipe t = lp->p[k - 1];
      lp->p[k - 1] = lp->p[k];
      lp->p[k] = t;
    }
  const struct hx_cluster *c = &l->ctx->cluster;
  int next[MAXD] = {0};
  for (int i = 0; i < lp->np; i++)
    for (int s = 0; s < lp->p[i].nst; s++)
      for (int k = 0; k < lp->p[i].st[s].n; k++) {
        int node = node_of(l, lp->p[i].st[s].dev[k]);
        lp->p[i].st[s].dev[k] = c->nodes[node].first_device + next[node]++;
      }
}

/* ---- trying a candidate ----------------------------------------------------- */

/* Climbing: prices a candidate; true when it beats the current plan and
 * replaces it. Sampling: offers it to the reservoir; always false, so the
 * enumeration goes on. */
static bool try_plan(struct ls *l, struct ls_plan *nb) {
  if (l->budget <= 0)
    return false;
  normalize(nb);
  if (!acceptable(l, nb))
    return false;
  if (l->sampling) {
    if (hx_rng_below(&l->rng, (int)++l->nsampled) == 0)
      copy_plan(&l->sample, nb);
    return false;
  }
  canonicalize(l, nb);
  double beat = l->cur_s * (1 - 1e-9);
  double t = price(l, nb, beat);
  if (!(t < beat))
    return false;
  copy_plan(&l->cur, nb);
  l->cur_s = t;
  return true;
}

/* Inserts a stage at position `at` of pipeline i. */
static void insert_stage(struct ls_plan *lp, int i, int at, const struct ls_stage *st) {
  struct ls_pipe *p = &lp->p[i];
  memmove(&p->st[at + 1], &p->st[at], sizeof(struct ls_stage) * (size_t)(p->nst - at));
  p->st[at] = *st;
  p->nst++;
}

static void add_pipeline(struct ls_plan *lp, const struct ls_stage *st) {
  struct ls_pipe *p = &lp->p[lp->np++];
  p->nst = 1;
  p->st[0] = *st;
}

static int used_count(const struct ls_plan *lp) {
  int n = 0;
  for (int i = 0; i < lp->np; i++)
    for (int s = 0; s < lp->p[i].nst; s++)
      n += lp->p[i].st[s].n;
  return n;
}

/* used[r] set for every device r the structure uses. */
static void mark_used(const struct ls_plan *lp, bool used[MAXD]) {
  for (int i = 0; i < lp->np; i++)
    for (int s = 0; s < lp->p[i].nst; s++)
      for (int k = 0; k < lp->p[i].st[s].n; k++)
        used[lp->p[i].st[s].dev[k]] = true;
}

/* Takes stage s of pipeline i out; normalize() closes the gap. */
static void remove_stage(struct ls_plan *lp, int i, int s) {
  for (int k = 0; k < lp->p[i].st[s].n; k++)
    lp->p[i].st[s].dev[k] = -1;
}

/* ---- device moves ----------------------------------------------------------- */

/* Whether device k of a stage is the first of its machine there (devices of
 * one machine in one stage are interchangeable: one move stands for all). */
static bool machine_first(const struct ls *l, const struct ls_stage *st, int k) {
  for (int j = 0; j < k; j++)
    if (node_of(l, st->dev[j]) == node_of(l, st->dev[k]))
      return false;
  return true;
}

/* Puts device d (already taken out of cur, or unused) everywhere it can go:
 * into every stage, as a new stage at every position, as a new pipeline. */
static bool place_device(struct ls *l, const struct ls_plan *base, int d) {
  for (int i = 0; i < base->np; i++)
    for (int s = 0; s < base->p[i].nst; s++) {
      if (base->p[i].st[s].n >= MAXD)
        continue;
      struct ls_plan nb;
      copy_plan(&nb, base);
      struct ls_stage *st = &nb.p[i].st[s];
      st->dev[st->n++] = d;
      if (try_plan(l, &nb))
        return true;
    }
  struct ls_stage one = {1, {d}};
  for (int i = 0; i < base->np; i++)
    for (int at = 0; at <= base->p[i].nst && base->p[i].nst < MAXD; at++) {
      struct ls_plan nb;
      copy_plan(&nb, base);
      insert_stage(&nb, i, at, &one);
      if (try_plan(l, &nb))
        return true;
    }
  if (base->np < MAXD) {
    struct ls_plan nb;
    copy_plan(&nb, base);
    add_pipeline(&nb, &one);
    if (try_plan(l, &nb))
      return true;
  }
  return false;
}

static bool move_devices(struct ls *l) {
  const struct ls_plan cur = l->cur;
  for (int i = 0; i < cur.np; i++)
    for (int s = 0; s < cur.p[i].nst; s++)
      for (int k = 0; k < cur.p[i].st[s].n; k++) {
        if (!machine_first(l, &cur.p[i].st[s], k))
          continue;
        struct ls_plan base;
        copy_plan(&base, &cur);
        int d = base.p[i].st[s].dev[k];
        base.p[i].st[s].dev[k] = -1; /* removed by normalize, positions kept */
        if (place_device(l, &base, d))
          return true;
        normalize(&base); /* or left out */
        if (base.np > 0 && try_plan(l, &base))
          return true;
      }
  return false;
}

static bool add_unused(struct ls *l) {
  const struct hx_cluster *c = &l->ctx->cluster;
  if (used_count(&l->cur) >= c->ndevices)
    return false;
  bool used[MAXD] = {false};
  mark_used(&l->cur, used);
  for (int node = 0; node < c->nnodes; node++)
    for (int r = c->nodes[node].first_device; r < c->nodes[node].first_device + c->nodes[node].gpus;
         r++)
      if (!used[r]) { /* one unused device stands for its machine's */
        const struct ls_plan base = l->cur;
        if (place_device(l, &base, r))
          return true;
        break;
      }
  return false;
}

/* Data-parallel moves need one change per pipeline at once (each alone
 * unbalances the pipelines): one unused device of a machine into every
 * pipeline, as a new stage at the same position (clamped to the pipeline's
 * length) or into the stage of the same index. */
static bool add_unused_everywhere(struct ls *l) {
  const struct hx_cluster *c = &l->ctx->cluster;
  const struct ls_plan cur = l->cur;
  if (cur.np < 2 || used_count(&cur) + cur.np > c->ndevices)
    return false;
  bool used[MAXD] = {false};
  mark_used(&cur, used);
  int shortest = MAXD;
  for (int i = 0; i < cur.np; i++)
    shortest = cur.p[i].nst < shortest ? cur.p[i].nst : shortest;
  for (int node = 0; node < c->nnodes; node++) {
    int unused[MAXD], n = 0;
    for (int k = 0; k < c->nodes[node].gpus; k++)
      if (!used[c->nodes[node].first_device + k])
        unused[n++] = c->nodes[node].first_device + k;
    if (n < cur.np)
      continue;
    for (int at = 0; at <= shortest; at++) {
      struct ls_plan nb;
      copy_plan(&nb, &cur);
      bool fits = true;
      for (int i = 0; i < cur.np; i++) {
        struct ls_stage one = {1, {unused[i]}};
        int pos = at < nb.p[i].nst ? at : nb.p[i].nst;
        fits = fits && nb.p[i].nst < MAXD;
        if (fits)
          insert_stage(&nb, i, pos, &one);
      }
      if (fits && try_plan(l, &nb))
        return true;
      if (at == shortest)
        break;
      copy_plan(&nb, &cur);
      for (int i = 0; i < cur.np; i++) {
        struct ls_stage *st = &nb.p[i].st[at];
        fits = fits && st->n < MAXD;
        if (fits)
          st->dev[st->n++] = unused[i];
      }
      if (fits && try_plan(l, &nb))
        return true;
    }
  }
  return false;
}

static bool swap_devices(struct ls *l) {
  const struct ls_plan cur = l->cur;
  for (int i = 0; i < cur.np; i++)
    for (int s = 0; s < cur.p[i].nst; s++)
      for (int k = 0; k < cur.p[i].st[s].n; k++)
        for (int j = i; j < cur.np; j++)
          for (int t = j == i ? s + 1 : 0; t < cur.p[j].nst; t++)
            for (int m = 0; m < cur.p[j].st[t].n; m++) {
              const struct ls_stage *a = &cur.p[i].st[s], *b = &cur.p[j].st[t];
              if (node_of(l, a->dev[k]) == node_of(l, b->dev[m]) || !machine_first(l, a, k) ||
                  !machine_first(l, b, m))
                continue;
              struct ls_plan nb;
              copy_plan(&nb, &cur);
              nb.p[i].st[s].dev[k] = b->dev[m];
              nb.p[j].st[t].dev[m] = a->dev[k];
              if (try_plan(l, &nb))
                return true;
            }
  return false;
}

/* ---- stage moves ------------------------------------------------------------ */

/* Ways of halving a stage: devices sorted by machine, then dealt
 * alternately (each half spans the same machines: pipelines of equal
 * speed) or cut in the middle (each half on as few machines as it can:
 * a TP pair inside a node rather than across the network). */
enum halving { HALVES_ALTERNATE, HALVES_BY_MACHINE, NHALVINGS };

static void halves(const struct ls *l, const struct ls_stage *st, enum halving how,
                   struct ls_stage *x, struct ls_stage *y) {
  struct ls_stage sorted = *st;
  sort_stage(l, &sorted);
  x->n = y->n = 0;
  for (int k = 0; k < sorted.n; k++) {
    bool second = how == HALVES_ALTERNATE ? k % 2 : k >= (sorted.n + 1) / 2;
    struct ls_stage *h = second ? y : x;
    h->dev[h->n++] = sorted.dev[k];
  }
}

static bool merge_stages(struct ls *l) {
  const struct ls_plan cur = l->cur;
  for (int i = 0; i < cur.np; i++)
    for (int s = 0; s < cur.p[i].nst; s++)
      for (int j = 0; j < cur.np; j++)
        for (int t = 0; t < cur.p[j].nst; t++) {
          const struct ls_stage *a = &cur.p[i].st[s], *b = &cur.p[j].st[t];
          if ((i == j && s == t) || a->n + b->n > MAXD)
            continue;
          struct ls_plan nb; /* stage (i, s) joins stage (j, t) in its place */
          copy_plan(&nb, &cur);
          struct ls_stage *into = &nb.p[j].st[t];
          memcpy(into->dev + into->n, a->dev, sizeof(int) * (size_t)a->n);
          into->n += a->n;
          remove_stage(&nb, i, s);
          if (try_plan(l, &nb))
            return true;
        }
  return false;
}

static bool relocate_stages(struct ls *l) {
  const struct ls_plan cur = l->cur;
  for (int i = 0; i < cur.np; i++)
    for (int s = 0; s < cur.p[i].nst; s++)
      for (int j = 0; j < cur.np; j++)
        for (int at = 0; at <= cur.p[j].nst && cur.p[j].nst < MAXD; at++) {
          if (j == i && (at == s || at == s + 1))
            continue; /* where it is */
          struct ls_plan nb;
          copy_plan(&nb, &cur);
          struct ls_stage st = nb.p[i].st[s];
          remove_stage(&nb, i, s);
          insert_stage(&nb, j, at, &st);
          if (try_plan(l, &nb))
            return true;
        }
  return false;
}

static bool split_or_drop_stages(struct ls *l) {
  const struct ls_plan cur = l->cur;
  for (int i = 0; i < cur.np; i++)
    for (int s = 0; s < cur.p[i].nst; s++) {
      const struct ls_stage *st = &cur.p[i].st[s];
      for (int how = 0; how < NHALVINGS && st->n > 1 && cur.p[i].nst < MAXD; how++) {
        struct ls_plan nb;
        copy_plan(&nb, &cur);
        struct ls_stage x, y;
        halves(l, st, (enum halving)how, &x, &y);
        nb.p[i].st[s] = x;
        insert_stage(&nb, i, s + 1, &y);
        if (try_plan(l, &nb))
          return true;
      }
      struct ls_plan nb;
      copy_plan(&nb, &cur);
      remove_stage(&nb, i, s);
      normalize(&nb);
      if (nb.np > 0 && try_plan(l, &nb))
        return true;
    }
  return false;
}

/* ---- pipeline moves --------------------------------------------------------- */

/* Pipelines of at most this many stages are split every way their stages
 * can be shared out (2^(n-1) - 1 ways); longer ones into prefix and suffix. */
enum { MAX_SUBSET_STAGES = 8 };

/* Pipeline i's stages shared out over two pipelines, each keeping their
 * order; stage 0 stays in the first (the other half of the subsets names the
 * same pair). */
static bool split_by_stages(struct ls *l, const struct ls_plan *cur, int i) {
  const struct ls_pipe *p = &cur->p[i];
  for (unsigned mask = 1; mask < (1u << (p->nst - 1)); mask++) {
    struct ls_plan nb;
    copy_plan(&nb, cur);
    struct ls_pipe *x = &nb.p[i], *y = &nb.p[nb.np++];
    x->nst = y->nst = 0;
    for (int s = 0; s < p->nst; s++) {
      struct ls_pipe *to = s > 0 && (mask >> (s - 1)) & 1 ? y : x;
      to->st[to->nst++] = p->st[s];
    }
    if (try_plan(l, &nb))
      return true;
  }
  return false;
}

static bool split_pipelines(struct ls *l) {
  const struct ls_plan cur = l->cur;
  if (cur.np >= MAXD)
    return false;
  for (int i = 0; i < cur.np; i++) {
    const struct ls_pipe *p = &cur.p[i];
    bool all_split = true; /* every stage halved: two pipelines of half width */
    for (int s = 0; s < p->nst; s++)
      all_split = all_split && p->st[s].n > 1;
    for (int how = 0; how < NHALVINGS && all_split; how++) {
      struct ls_plan nb;
      copy_plan(&nb, &cur);
      struct ls_pipe *x = &nb.p[i], *y = &nb.p[nb.np++];
      y->nst = p->nst;
      for (int s = 0; s < p->nst; s++)
        halves(l, &p->st[s], (enum halving)how, &x->st[s], &y->st[s]);
      if (try_plan(l, &nb))
        return true;
    }
    if (p->nst <= MAX_SUBSET_STAGES) {
      if (split_by_stages(l, &cur, i))
        return true;
      continue;
    }
    for (int cut = 1; cut < p->nst; cut++) { /* long pipelines: a prefix and a suffix */
      struct ls_plan nb;
      copy_plan(&nb, &cur);
      struct ls_pipe *x = &nb.p[i], *y = &nb.p[nb.np++];
      x->nst = cut;
      y->nst = p->nst - cut;
      memcpy(y->st, p->st + cut, sizeof(struct ls_stage) * (size_t)y->nst);
      if (try_plan(l, &nb))
        return true;
    }
  }
  return false;
}

/* Pipeline j joins pipeline i: stage by stage when they have as many
 * stages, else (and also) j's stages after i's. */
static bool merge_pipelines(struct ls *l) {
  const struct ls_plan cur = l->cur;
  for (int i = 0; i < cur.np; i++)
    for (int j = 0; j < cur.np; j++) {
      if (i == j)
        continue;
      const struct ls_pipe *x = &cur.p[i], *y = &cur.p[j];
      if (i < j && x->nst == y->nst) {
        struct ls_plan nb;
        copy_plan(&nb, &cur);
        bool fits = true;
        for (int s = 0; s < x->nst && fits; s++) {
          struct ls_stage *into = &nb.p[i].st[s];
          fits = into->n + y->st[s].n <= MAXD;
          if (fits) {
            memcpy(into->dev + into->n, y->st[s].dev, sizeof(int) * (size_t)y->st[s].n);
            into->n += y->st[s].n;
          }
        }
        nb.p[j].nst = 0;
        if (fits && try_plan(l, &nb))
          return true;
      }
      if (x->nst + y->nst <= MAXD) {
        struct ls_plan nb;
        copy_plan(&nb, &cur);
        memcpy(nb.p[i].st + x->nst, y->st, sizeof(struct ls_stage) * (size_t)y->nst);
        nb.p[i].nst += y->nst;
        nb.p[j].nst = 0;
        if (try_plan(l, &nb))
          return true;
      }
    }
  return false;
}

static bool drop_pipelines(struct ls *l) {
  const struct ls_plan cur = l->cur;
  for (int i = 0; i < cur.np && cur.np > 1; i++) {
    struct ls_plan nb;
    copy_plan(&nb, &cur);
    nb.p[i].nst = 0;
    if (try_plan(l, &nb))
      return true;
  }
  return false;
}

/* ---- the climb --------------------------------------------------------------- */

typedef bool (*move_fn)(struct ls *l);

static const move_fn moves[] = {split_pipelines, merge_pipelines, drop_pipelines,
                                merge_stages,    relocate_stages, split_or_drop_stages,
                                move_devices,    swap_devices,    add_unused,
                                add_unused_everywhere};
enum { NMOVES = sizeof moves / sizeof moves[0] };

/* First-improvement hill climbing from l->cur until no move improves it or
 * the budget is spent. */
static void climb(struct ls *l) {
  bool improved = true;
  while (improved && l->budget > 0) {
    improved = false;
    for (int m = 0; m < NMOVES && !improved; m++)
      improved = moves[m](l);
  }
}

/* Replaces l->cur by a random neighbour that completes (whatever its time):
 * a kind of move drawn uniformly, then one of its candidates (so the few
 * pipeline moves are drawn as often as the many device moves); false when
 * none was found. */
static bool kick(struct ls *l) {
  for (int attempt = 0; attempt < 2 * NMOVES && l->budget > 0; attempt++) {
    l->sampling = true;
    l->nsampled = 0;
    moves[hx_rng_below(&l->rng, NMOVES)](l);
    l->sampling = false;
    if (l->nsampled == 0)
      continue;
    struct ls_plan nb = l->sample;
    canonicalize(l, &nb);
    double t = price(l, &nb, INFINITY);
    if (t < INFINITY) {
      l->cur = nb;
      l->cur_s = t;
      return true;
    }
  }
  return false;
}

/* Iterated local search: climb, then repeatedly kick the best structure by
 * one or two random moves and climb again, keeping the best (local optima of
 * single moves are common: a better structure can be two moves away, each
 * move alone slower). */
struct hx_plan *hx_sched_local_search(struct hx_ctx *ctx, struct hx_arena *a,
                                      const struct hx_plan *start, int budget, int kicks,
                                      hx_sched_price_fn price_fn, void *cookie) {
  if (!start || ctx->cluster.ndevices > MAXD)
    return NULL;
  struct ls *l = HX_NEW(a, struct ls); /* large: keep it off the stack */
  l->ctx = ctx;
  l->price = price_fn;
  l->cookie = cookie;
  l->budget = budget;
  l->rng.state = 0x6c6f63616cull; /* fixed: same inputs, same plan */
  from_plan(start, &l->cur);
  l->cur_s = start->sim.iteration_s;
  climb(l);
  struct ls_plan *best = HX_NEW(a, struct ls_plan);
  *best = l->cur;
  double best_s = l->cur_s;
  for (int k = 0; k < kicks && l->budget > 0; k++) {
    l->cur = *best;
    l->cur_s = best_s;
    bool kicked = kick(l);
    if (kicked && k % 2)
      kicked = kick(l);
    if (!kicked)
      break;
    climb(l);
    if (l->cur_s < best_s * (1 - 1e-9)) {
      *best = l->cur;
      best_s = l->cur_s;
    }
  }
  if (!(best_s < start->sim.iteration_s * (1 - 1e-9)))
    return NULL;
  return to_skeleton(l, a, best);
}

/* ---- relabelling a completed plan ------------------------------------------- */

/* plan with devices d and e exchanged in every stage (TP ranks in ascending
 * order, as hx_sched_complete_mixed leaves them), leaders, devices and
 * gradient groups rebuilt; NULL when it does not fit in memory. */
static struct hx_plan *with_swapped(struct hx_ctx *ctx, struct hx_arena *a,
                                    const struct hx_plan *plan, int d, int e) {
  struct hx_plan *p = hx_plan_copy(a, plan);
  p->groups = NULL;
  p->ngroups = 0;
  for (int i = 0; i < p->npipelines; i++) {
    struct hx_pipeline *pl = &p->pipelines[i];
    for (int s = 0; s < pl->nstages; s++) {
      struct hx_stage *st = &pl->stages[s];
      for (int k = 0; k < st->ndevices; k++)
        st->devices[k] = st->devices[k] == d ? e : st->devices[k] == e ? d : st->devices[k];
      hx_sched_sort_ranks(st->devices, st->ndevices);
    }
    hx_sched_set_leaders(ctx, pl);
  }
  hx_plan_fill_devices(a, p, &ctx->model);
  hx_sched_build_groups(ctx, a, p);
  return hx_plan_memory_fits(ctx, p, NULL, NULL) ? p : NULL;
}

/* Whether exchanging d and e can change the plan: the same GPU type (so
 * every stage keeps its speed and memory, and the layer and batch splits
 * stay as good), on different machines (devices of one machine are
 * interchangeable), at least one of them used, and not in one stage. */
static bool swap_matters(const struct hx_ctx *ctx, const struct hx_plan *plan, int d, int e) {
  const struct hx_device *dd = &ctx->cluster.devices[d], *de = &ctx->cluster.devices[e];
  if (dd->gpu_type != de->gpu_type || dd->node == de->node)
    return false;
  const struct hx_device_plan *pd = &plan->devices[d], *pe = &plan->devices[e];
  if (pd->pipeline < 0 && pe->pipeline < 0)
    return false;
  return pd->pipeline != pe->pipeline || pd->stage != pe->stage;
}

static bool has_seq_layout(const struct hx_plan *plan) {
  for (int i = 0; i < plan->npipelines; i++)
    for (int s = 0; s < plan->pipelines[i].nstages; s++)
      if (plan->pipelines[i].stages[s].seq_layout)
        return true;
  return false;
}

struct hx_plan *hx_sched_relabel(struct hx_ctx *ctx, struct hx_arena *a, struct hx_plan *plan,
                                 int budget) {
  if (!plan || !plan->sim.valid || has_seq_layout(plan) || ctx->cluster.ndevices > MAXD)
    return plan;
  int n = ctx->cluster.ndevices;
  bool improved = true;
  while (improved && budget > 0) {
    improved = false;
    for (int d = 0; d < n && !improved && budget > 0; d++)
      for (int e = d + 1; e < n && !improved && budget > 0; e++) {
        if (!swap_matters(ctx, plan, d, e))
          continue;
        struct hx_plan *p = with_swapped(ctx, a, plan, d, e);
        budget--;
        /* the quick bound never exceeds the full one: it rules out first */
        if (!p || hx_sim_quick_bound(ctx, p) >= plan->sim.iteration_s ||
            hx_sim_lower_bound(ctx, p) >= plan->sim.iteration_s)
          continue;
        hx_simulate(ctx, p, NULL);
        if (p->sim.valid && p->sim.iteration_s < plan->sim.iteration_s * (1 - 1e-9)) {
          plan = p;
          improved = true;
        }
      }
  }
  return plan;
}
