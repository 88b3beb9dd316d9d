/* Phase 2: inside one pipeline, devices -> groups -> islands -> TP stages,
 * then the stage order and the leaders.
 *
 *  - groups: METIS over the pipeline's devices with bandwidth weights, so a
 *    group is a well-connected set (k groups, compute-balanced);
 *  - islands: inside a group, devices that may share a TP group: the same
 *    machine, or machines joined by a link at least as fast as both
 *    machines' own (TP over a slower link would stall every layer);
 *  - TP layout: an island's devices split into stages whose degrees divide
 *    the query heads (even head shards), chosen by the cost model;
 *  - order: groups by the top-tau greedy path over summed inter-group
 *    bandwidth, islands and stages of a group in rank order. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "passes/cost/cost.h"
#include "ir/plan_util.h"
#include "sched.h"

bool hx_sched_tp_legal(const struct hx_model *m, int tp) { return tp >= 1 && m->heads % tp == 0; }

int hx_sched_tau(const struct hx_options *opt) {
  return opt->tau >= 1 && opt->tau <= HX_SCHED_TAU_MAX ? opt->tau : HX_SCHED_TAU_DEFAULT;
}

/* ---- groups -------------------------------------------------------------- */

/* Group of each device (index into devices[]), by METIS into k parts. Large
 * pipelines are partitioned by machine, as phase 1 does. */
static void make_groups(struct hx_ctx *ctx, struct hx_arena *a, const int *devices, int n, int k,
                        uint64_t seed, int *group) {
  const struct hx_cluster *c = &ctx->cluster;
  int *first = HX_NEW_ARRAY(a, int, n), *count = HX_NEW_ARRAY(a, int, n);
  int *rep = HX_NEW_ARRAY(a, int, n);
  int nv = hx_sched_vertices(c, devices, n, first, count, rep);
  double *compute = HX_NEW_ARRAY(a, double, nv);
  for (int v = 0; v < nv; v++)
    for (int i = first[v]; i < first[v] + count[v]; i++)
      compute[v] += hx_device_flops(c, devices[i]);
  if (k > nv)
    k = nv;
  int *part = HX_NEW_ARRAY(a, int, nv);
  struct hx_sched_graph *g = hx_sched_graph_build(a, c, rep, compute, nv, HX_EDGES_BANDWIDTH);
  hx_sched_partition(a, g, k, NULL, seed, part);
  for (int v = 0; v < nv; v++)
    for (int i = first[v]; i < first[v] + count[v]; i++)
      group[i] = part[v];
}

/* ---- islands ------------------------------------------------------------- */

static int find_root(int *parent, int x) {
  while (parent[x] != x)
    x = parent[x] = parent[parent[x]];
  return x;
}

bool hx_sched_may_share_tp(const struct hx_cluster *c, int a, int b) {
  int na = c->devices[a].node, nb = c->devices[b].node;
  if (na == nb)
    return true;
  double own = fmin(c->nodes[na].bandwidth, c->nodes[nb].bandwidth);
  return fmin(hx_pair_bw(c, a, b), hx_pair_bw(c, b, a)) >= own;
}

/* Island id (the smallest index in its island) of each member: each run of
 * members on one machine together (members come in rank order, so a
 * machine's are adjacent), then runs joined pairwise by fast links (checked
 * once per pair of runs, through their first members). */
static bool run_start(const struct hx_cluster *c, const int *members, int i) {
  return i == 0 || c->devices[members[i]].node != c->devices[members[i - 1]].node;
}

/* Whether a GPU of class x and one of class y on another node may share a
 * TP group: hx_sched_may_share_tp over the class tables (the nodes of a
 * class share their own figures). */
static bool classes_share_tp(const struct hx_cluster *c, int x, int y, int node_x, int node_y) {
  double own = fmin(c->nodes[node_x].bandwidth, c->nodes[node_y].bandwidth);
  long at = (long)x * c->nclasses + y, ta = (long)y * c->nclasses + x;
  return fmin(c->class_bandwidth[at], c->class_bandwidth[ta]) >= own;
}

/* make_islands over node classes: two runs (machines) are joined exactly
 * when their classes may share TP, so the islands are the components of
 * runs where each class's runs join each other (when the class may share
 * with itself) and every run of each class pair that may share; O(runs x
 * classes) instead of O(runs^2) (4096 one-GPU machines: 16 million). The
 * ids are the same: the smallest index in each island. */
static void islands_by_class(const struct hx_cluster *c, struct hx_arena *a, const int *members,
                             int n, int *island) {
  int k = c->nclasses;
  int *first = HX_NEW_ARRAY(a, int, k), *parent = HX_NEW_ARRAY(a, int, n);
  for (int x = 0; x < k; x++)
    first[x] = -1;
  for (int i = 0; i < n; i++) {
    parent[i] = i;
    if (run_start(c, members, i)) {
      int x = c->node_class[c->devices[members[i]].node];
      if (first[x] < 0)
        first[x] = i;
    }
  }
  for (int i = 0; i < n; i++) {
    if (!run_start(c, members, i))
      continue;
    int ni = c->devices[members[i]].node, x = c->node_class[ni];
    for (int y = 0; y < k; y++) {
      int j = first[y];
      if (j < 0 || j == i)
        continue;
      int nj = c->devices[members[j]].node;
      if (classes_share_tp(c, x, y, ni, nj)) {
        int ri = find_root(parent, i), rj = find_root(parent, j);
        if (ri != rj)
          parent[ri > rj ? ri : rj] = ri < rj ? ri : rj;
      }
    }
  }
  /* roots are the smallest index of their component (unions keep the
   * smaller), so each run's island is its root */
  for (int i = 0; i < n; i++)
    island[i] = run_start(c, members, i) ? find_root(parent, i) : island[i - 1];
}

static void make_islands(const struct hx_cluster *c, struct hx_arena *a, const int *members,
                         int n, int *island) {
  if (c->nclasses > 0) {
    islands_by_class(c, a, members, n, island);
    return;
  }
  for (int i = 0; i < n; i++)
    island[i] = run_start(c, members, i) ? i : island[i - 1];
  for (int i = 0; i < n; i++) {
    if (!run_start(c, members, i))
      continue;
    for (int j = i + 1; j < n; j++)
      if (run_start(c, members, j) && hx_sched_may_share_tp(c, members[i], members[j])) {
        int ri = find_root(island, i), rj = find_root(island, j);
        if (ri != rj)
          island[ri > rj ? ri : rj] = ri < rj ? ri : rj;
      }
  }
  for (int i = 0; i < n; i++)
    island[i] = find_root(island, i);
}

/* ---- TP layouts ---------------------------------------------------------- */

/* Islands larger than this are cut into chunks of it before their TP split:
 * a TP group beyond 8 GPUs is never fast, and the number of splits of a
 * larger island explodes. */
enum { MAX_TP_ISLAND = HX_SCHED_MAX_TP };

/* Forward + backward seconds of one layer for one sequence on a TP group of
 * devices[0..tp). */
static double layer_time(const struct hx_ctx *ctx, const int *devices, int tp) {
  struct hx_stage st;
  memset(&st, 0, sizeof st);
  st.ndevices = st.tp = tp;
  st.cp = st.hp = 1;
  st.devices = (int *)devices;
  st.leader = devices[0];
  st.layer_end = 1;
  return hx_layer_compute_s(ctx, &st, 1) + hx_layer_tp_comm_s(ctx, &st, 1) +
         hx_layer_bwd_s(ctx, &st, 1);
}

struct layout_search {
  const struct hx_ctx *ctx;
  const int *devices;
  int n;
  int cur[MAX_TP_ISLAND], ncur;
  int best[MAX_TP_ISLAND], nbest;
  double best_score;
};

/* Layers per second the island's stages add to the pipeline, with a 1%
 * charge per stage: more stages mean more hops and a longer fill. */
static double layout_score(struct layout_search *ls) {
  double rate = 0;
  int at = 0;
  for (int i = 0; i < ls->ncur; i++) {
    rate += 1.0 / layer_time(ls->ctx, ls->devices + at, ls->cur[i]);
    at += ls->cur[i];
  }
  return rate * (1.0 - 0.01 * ls->ncur);
}

/* Every split of the remaining devices into non-increasing legal degrees. */
static void enumerate_layouts(struct layout_search *ls, int left, int max_part) {
  if (left == 0) {
    double s = layout_score(ls);
    if (s > ls->best_score) {
      ls->best_score = s;
      ls->nbest = ls->ncur;
      memcpy(ls->best, ls->cur, sizeof(int) * (size_t)ls->ncur);
    }
    return;
  }
  for (int t = left < max_part ? left : max_part; t >= 1; t--) {
    if (!hx_sched_tp_legal(&ls->ctx->model, t))
      continue;
    ls->cur[ls->ncur++] = t;
    enumerate_layouts(ls, left - t, t);
    ls->ncur--;
  }
}

/* Degrees of the stages an island chunk of n <= MAX_TP_ISLAND devices becomes. */
static int chunk_layout(const struct hx_ctx *ctx, const int *devices, int n,
                        enum hx_tp_layout layout, int *degrees) {
  int count = 0;
  if (layout == HX_LAYOUT_NARROW) {
    for (int i = 0; i < n; i++)
      degrees[count++] = 1;
    return count;
  }
  if (layout == HX_LAYOUT_WIDE) {
    for (int left = n; left > 0;) {
      int t = left;
      while (!hx_sched_tp_legal(&ctx->model, t))
        t--;
      degrees[count++] = t;
      left -= t;
    }
    return count;
  }
  struct layout_search ls = {.ctx = ctx, .devices = devices, .n = n, .best_score = -1};
  enumerate_layouts(&ls, n, n);
  memcpy(degrees, ls.best, sizeof(int) * (size_t)ls.nbest);
  return ls.nbest;
}

/* ---- stage order --------------------------------------------------------- */

struct path_search {
  int k, tau;
  const double *w; /* k x k summed bandwidth */
  int *cur;
  bool *used;
  /* the HX_SCHED_ORDERS best distinct paths, best first (ties: found first) */
  int *paths; /* HX_SCHED_ORDERS x k */
  double sums[HX_SCHED_ORDERS];
  int npaths;
  long budget; /* expansions left: tau^k paths would not end for large k */
  long scans;  /* groups looked at so far (each expansion looks at k) */
};

/* Past this many groups looked at, the path being built follows only its
 * greedy branch, no other branch is tried and no new start once a path is
 * kept: one greedy path costs k^2 / 2 looks, one from every start k^3 / 2
 * (2048 machines: 4e9, half a minute), and a greedy completion of every
 * branch left open more. Orders of up to ~64 groups never get near it. */
enum { ORDER_SCAN_BUDGET = 4000000 };

/* The up-to-tau heaviest edges from `at` to unvisited groups, heaviest
 * first, ties to the lower index. Returns how many. */
static int heaviest_next(const struct path_search *ps, int at, int *next) {
  int count = 0;
  for (int g = 0; g < ps->k; g++) {
    if (ps->used[g])
      continue;
    double wg = ps->w[at * ps->k + g];
    int pos = count < ps->tau ? count++ : ps->tau;
    while (pos > 0 && ps->w[at * ps->k + next[pos - 1]] < wg) {
      if (pos < ps->tau)
        next[pos] = next[pos - 1];
      pos--;
    }
    if (pos < ps->tau)
      next[pos] = g;
  }
  return count;
}

static void keep_path(struct path_search *ps, double sum) {
  size_t row = sizeof(int) * (size_t)ps->k;
  for (int i = 0; i < ps->npaths; i++)
    if (!memcmp(ps->paths + i * ps->k, ps->cur, row))
      return;
  int at = ps->npaths;
  while (at > 0 && ps->sums[at - 1] < sum)
    at--;
  if (at >= HX_SCHED_ORDERS)
    return;
  int last = ps->npaths < HX_SCHED_ORDERS ? ps->npaths : HX_SCHED_ORDERS - 1;
  for (int i = last; i > at; i--) {
    memcpy(ps->paths + i * ps->k, ps->paths + (i - 1) * ps->k, row);
    ps->sums[i] = ps->sums[i - 1];
  }
  memcpy(ps->paths + at * ps->k, ps->cur, row);
  ps->sums[at] = sum;
  if (ps->npaths < HX_SCHED_ORDERS)
    ps->npaths++;
}

static void extend_path(struct path_search *ps, int len, double sum) {
  if (len == ps->k) {
    keep_path(ps, sum);
    return;
  }
  /* past the budget only the greedy (first) branch is followed */
  bool greedy_only = --ps->budget <= 0;
  int next[16];
  ps->scans += ps->k;
  int count = heaviest_next(ps, ps->cur[len - 1], next);
  for (int i = 0; i < count && (i == 0 || (!greedy_only && ps->scans < ORDER_SCAN_BUDGET)); i++) {
    int g = next[i];
    ps->used[g] = true;
    ps->cur[len] = g;
    extend_path(ps, len + 1, sum + ps->w[ps->cur[len - 1] * ps->k + g]);
    ps->used[g] = false;
  }
}

/* The group orders: from every start, the paths that always take one of the
 * tau heaviest edges to a group not yet on them; the HX_SCHED_ORDERS best
 * distinct ones into orders (best first; ties in bandwidth are common:
 * every machine on one switch). Returns how many. */
static int order_groups(const double *w, int k, int tau, struct hx_arena *a, int *orders,
                        long *scans) {
  struct path_search ps = {.k = k, .tau = tau, .w = w, .budget = 20000};
  ps.cur = HX_NEW_ARRAY(a, int, k);
  ps.used = HX_NEW_ARRAY(a, bool, k);
  ps.paths = orders;
  for (int start = 0; start < k; start++) {
    if (ps.scans >= ORDER_SCAN_BUDGET && ps.npaths > 0)
      break;
    memset(ps.used, 0, sizeof(bool) * (size_t)k);
    ps.used[start] = true;
    ps.cur[0] = start;
    if (k == 1)
      keep_path(&ps, 0);
    else
      extend_path(&ps, 1, 0);
  }
  *scans = ps.scans;
  return ps.npaths;
}

/* ---- putting it together ------------------------------------------------- */

struct stage_list {
  int n, cap;
  int *first, *tp; /* index into the ordered device array, TP degree */
};

/* Orders an island's members (rank order on entry) as a chain that always
 * steps to the remaining member with the fastest link from the last one
 * (ties: the lowest rank). TP groups are cut from consecutive members, so on
 * an island of several machines joined by a link faster than their own
 * (a 25 GB/s network between PCIe machines) they pair devices of different
 * machines; on one machine the order stays the rank order. */
/* order_by_links over node classes: the same chain in O(n x classes)
 * instead of O(n^2). From the last member, a member of its own node has
 * the node's own link and one of another node its classes' link, so the
 * scan's pick is the fastest of: the lowest unplaced member of the last
 * member's node, and per class the lowest unplaced member on its first
 * node (other than the last member's) that has any left; ties to the
 * lowest rank. Every pick is the lowest unplaced member of its node, so
 * each node is placed in rank order (a head per node) and a class keeps a
 * list of its nodes with members left. members[] must be in rank order. */
static void chain_by_class(const struct hx_cluster *c, struct hx_arena *a, int *members, int n) {
  int k = c->nclasses;
  /* nodes in rank order: node v holds members[start[v] .. end[v]) */
  int *start = HX_NEW_ARRAY(a, int, n + 1), *head = HX_NEW_ARRAY(a, int, n);
  int *node_of = HX_NEW_ARRAY(a, int, n), nv = 0;
  for (int i = 0; i < n; i++) {
    if (i == 0 || c->devices[members[i]].node != c->devices[members[i - 1]].node)
      start[nv++] = i;
    node_of[i] = nv - 1;
  }
  start[nv] = n;
  /* per class, a doubly linked list of its nodes with members left */
  int *first = HX_NEW_ARRAY(a, int, k), *last = HX_NEW_ARRAY(a, int, k);
  int *next = HX_NEW_ARRAY(a, int, nv), *prev = HX_NEW_ARRAY(a, int, nv);
  for (int x = 0; x < k; x++)
    first[x] = last[x] = -1;
  for (int v = 0; v < nv; v++) {
    head[v] = start[v];
    int x = c->node_class[c->devices[members[start[v]]].node];
    prev[v] = last[x];
    next[v] = -1;
    if (last[x] >= 0)
      next[last[x]] = v;
    else
      first[x] = v;
    last[x] = v;
  }
  int *chain = HX_NEW_ARRAY(a, int, n);
  int at = 0; /* the first member stays first, as in the full scan */
  for (int i = 0; i < n; i++) {
    if (i > 0) {
      int lv = node_of[at], node = c->devices[members[at]].node, lx = c->node_class[node];
      int pick = -1;
      double pick_bw = -INFINITY;
      if (head[lv] < start[lv + 1]) {
        pick = head[lv];
        pick_bw = c->nodes[node].bandwidth;
      }
      for (int x = 0; x < k; x++) {
        int v = first[x] == lv ? next[lv] : first[x];
        if (v < 0)
          continue;
        int j = head[v];
        double bw = c->class_bandwidth[(long)lx * k + x];
        if (bw > pick_bw || (bw == pick_bw && members[j] < members[pick])) {
          pick = j;
          pick_bw = bw;
        }
      }
      at = pick;
    }
    chain[i] = members[at];
    int v = node_of[at];
    if (++head[v] == start[v + 1]) { /* node v has no member left */
      int x = c->node_class[c->devices[members[at]].node];
      if (prev[v] >= 0)
        next[prev[v]] = next[v];
      else
        first[x] = next[v];
      if (next[v] >= 0)
        prev[next[v]] = prev[v];
      else
        last[x] = prev[v];
    }
  }
  memcpy(members, chain, sizeof(int) * (size_t)n);
}

static void order_by_links(const struct hx_cluster *c, struct hx_arena *a, int *members, int n) {
  bool sorted = true;
  for (int i = 1; i < n && sorted; i++)
    sorted = members[i - 1] < members[i];
  if (c->nclasses > 0 && n > 2 && sorted) {
    chain_by_class(c, a, members, n);
    return;
  }
  for (int i = 1; i < n; i++) {
    int pick = i;
    for (int j = i + 1; j < n; j++) {
      double bj = hx_bw(c, members[i - 1], members[j]), bp = hx_bw(c, members[i - 1], members[pick]);
      if (bj > bp || (bj == bp && members[j] < members[pick]))
        pick = j;
    }
    int t = members[pick];
    memmove(members + i + 1, members + i, sizeof(int) * (size_t)(pick - i));
    members[i] = t;
  }
}

/* Appends the stages of one island (members[0..n), in the order TP groups
 * are cut from) to list. */
static void add_island_stages(const struct hx_ctx *ctx, const int *members, int n,
                              enum hx_tp_layout layout, struct stage_list *list, int base) {
  int degrees[MAX_TP_ISLAND];
  for (int at = 0; at < n; at += MAX_TP_ISLAND) {
    int chunk = n - at < MAX_TP_ISLAND ? n - at : MAX_TP_ISLAND;
    int nd = chunk_layout(ctx, members + at, chunk, layout, degrees);
    int off = at;
    for (int d = 0; d < nd; d++) {
      list->first[list->n] = base + off;
      list->tp[list->n++] = degrees[d];
      off += degrees[d];
    }
  }
}

/* The score of an island's stages (first indexes order[]): the layers per
 * second they add, 1% off per stage as layout_score charges (compounded, so
 * islands of many stages keep a positive score). */
static double island_score(const struct hx_ctx *ctx, const int *order,
                           const struct stage_list *stages) {
  double rate = 0;
  for (int s = 0; s < stages->n; s++)
    rate += 1.0 / layer_time(ctx, order + stages->first[s], stages->tp[s]);
  return rate * pow(0.99, stages->n);
}

/* One way to lay out an island: its members in the order TP groups are cut
 * from, and the stages (first indexes order[]). */
struct island_layout {
  int *order;
  struct stage_list stages;
};

static struct island_layout *new_island_layout(struct hx_arena *a, const int *members, int n) {
  struct island_layout *l = HX_NEW(a, struct island_layout);
  l->order = HX_NEW_ARRAY(a, int, n);
  memcpy(l->order, members, sizeof(int) * (size_t)n);
  l->stages = (struct stage_list){0, n, HX_NEW_ARRAY(a, int, n), HX_NEW_ARRAY(a, int, n)};
  return l;
}

/* Each machine laid out on its own: every TP group inside one node
 * (members[] in rank order, so a machine's are adjacent). */
static struct island_layout *machine_by_machine(const struct hx_ctx *ctx, struct hx_arena *a,
                                                const int *members, int n,
                                                enum hx_tp_layout layout) {
  const struct hx_cluster *c = &ctx->cluster;
  struct island_layout *l = new_island_layout(a, members, n);
  for (int at = 0, end; at < n; at = end) {
    for (end = at + 1; end < n && c->devices[members[end]].node == c->devices[members[at]].node;)
      end++;
    add_island_stages(ctx, l->order + at, end - at, layout, &l->stages, at);
  }
  return l;
}

/* Group indices sorted by degree, largest first, ties by index (qsort
 * with the degrees beside: a file-scope pointer would not be reentrant). */
struct degree_key {
  int tp, index;
};

static int cmp_degree_key(const void *x, const void *y) {
  const struct degree_key *a = x, *b = y;
  return a->tp != b->tp ? b->tp - a->tp : a->index - b->index;
}

static int cmp_int_pair(const void *x, const void *y) {
  const int *a = x, *b = y;
  return (a[0] > b[0]) - (a[0] < b[0]);
}

/* The degrees of `like` laid out node-locally: each group, largest first,
 * on the first machine (rank order) with that many GPUs left, then the
 * groups in rank order. NULL when a group fits no machine. Rooms only
 * shrink, so the first machine with room for a degree only moves forward:
 * one cursor per degree keeps this O(machines x degrees + groups log). */
static struct island_layout *pack_in_machines(const struct hx_cluster *c, struct hx_arena *a,
                                              const int *members, int n,
                                              const struct island_layout *like) {
  int nd = like->stages.n, nm = 0;
  int *start = HX_NEW_ARRAY(a, int, n + 1), *room = HX_NEW_ARRAY(a, int, n);
  for (int i = 0; i < n; i++)
    if (i == 0 || c->devices[members[i]].node != c->devices[members[i - 1]].node)
      start[nm++] = i;
  start[nm] = n;
  for (int m = 0; m < nm; m++)
    room[m] = start[m + 1] - start[m];
  struct degree_key *keys = HX_NEW_ARRAY(a, struct degree_key, nd);
  for (int g = 0; g < nd; g++)
    keys[g] = (struct degree_key){like->stages.tp[g], g};
  qsort(keys, (size_t)nd, sizeof *keys, cmp_degree_key);
  int cursor[MAX_TP_ISLAND + 1] = {0};
  int *placed = HX_NEW_ARRAY(a, int, 2 * nd); /* (where it starts, degree) per group */
  for (int k = 0; k < nd; k++) {
    int t = keys[k].tp, *m = &cursor[t];
    while (*m < nm && room[*m] < t)
      (*m)++;
    if (*m == nm)
      return NULL;
    placed[2 * k] = start[*m + 1] - room[*m];
    placed[2 * k + 1] = t;
    room[*m] -= t;
  }
  qsort(placed, (size_t)nd, 2 * sizeof(int), cmp_int_pair); /* rank order */
  struct island_layout *l = new_island_layout(a, members, n);
  for (int k = 0; k < nd; k++) {
    l->stages.first[k] = placed[2 * k];
    l->stages.tp[k] = placed[2 * k + 1];
  }
  l->stages.n = nd;
  return l;
}

/* Lays out one island at laid[base..base + n) (members[] in rank order).
 * An island of several machines (joined by links as fast as their own) is
 * laid out three ways: along the link-ordered chain (TP groups may span
 * machines), machine by machine, and with the chain's degrees packed into
 * machines; the layout of the highest score is kept, a node-local one on a
 * tie. A chain that follows bandwidth alone pairs GPUs across nodes whose
 * link is faster but of higher latency, which every TP all-reduce pays. */
static void add_island(const struct hx_ctx *ctx, struct hx_arena *a, const int *members, int n,
                       enum hx_tp_layout layout, bool chain_only, int *laid, int base,
                       struct stage_list *list) {
  const struct hx_cluster *c = &ctx->cluster;
  struct island_layout *best = new_island_layout(a, members, n);
  order_by_links(c, a, best->order, n);
  add_island_stages(ctx, best->order, n, layout, &best->stages, 0);
  if (!chain_only && c->devices[members[0]].node != c->devices[members[n - 1]].node) {
    double best_score = island_score(ctx, best->order, &best->stages);
    struct island_layout *local[2] = {machine_by_machine(ctx, a, members, n, layout),
                                      pack_in_machines(c, a, members, n, best)};
    bool chain_best = true;
    for (int k = 0; k < 2; k++) {
      double score = local[k] ? island_score(ctx, local[k]->order, &local[k]->stages) : -1;
      if (local[k] && (chain_best ? score >= best_score : score > best_score)) {
        best = local[k];
        best_score = score;
        chain_best = false;
      }
    }
  }
  memcpy(laid + base, best->order, sizeof(int) * (size_t)n);
  for (int s = 0; s < best->stages.n; s++) {
    list->first[list->n] = base + best->stages.first[s];
    list->tp[list->n++] = best->stages.tp[s];
  }
}

/* Summed bandwidth between every pair of groups (k x k). */
static double *group_bandwidth(const struct hx_cluster *c, struct hx_arena *a, const int *devices,
                               int n, const int *group, int k) {
  double *w = HX_NEW_ARRAY(a, double, (long)k * k);
  if (k <= 1)
    return w; /* no two groups: nothing to sum (n^2 pairs on 4096 devices) */
  for (int i = 0; i < n; i++)
    for (int j = 0; j < n; j++)
      if (group[i] != group[j])
        w[group[i] * k + group[j]] += hx_pair_bw(c, devices[i], devices[j]);
  return w;
}

/* Groups by machine: the k of "one group per machine", without METIS.
 * Beyond HX_SCHED_GRAPH_MAX_VERTICES machines, consecutive machines share a
 * group (as graph vertices do): the orders are searched over a k x k matrix
 * (4096 machines: 134 MB). */
static int groups_by_machine(const struct hx_cluster *c, const int *devices, int n, int *group) {
  int k = 0;
  int *of_node = malloc(sizeof(int) * (size_t)c->nnodes); /* group of each node */
  if (!of_node)
    hx_internal_error("out of memory grouping a pipeline");
  for (int v = 0; v < c->nnodes; v++)
    of_node[v] = -1;
  for (int i = 0; i < n; i++) {
    int v = c->devices[devices[i]].node;
    if (of_node[v] < 0)
      of_node[v] = k++;
    group[i] = of_node[v];
  }
  free(of_node);
  if (k > HX_SCHED_GRAPH_MAX_VERTICES) {
    int per = (k + HX_SCHED_GRAPH_MAX_VERTICES - 1) / HX_SCHED_GRAPH_MAX_VERTICES;
    for (int i = 0; i < n; i++)
      group[i] /= per;
    k = (k + per - 1) / per;
  }
  return k;
}

struct hx_sched_grouping *hx_sched_grouping(struct hx_ctx *ctx, struct hx_arena *a,
                                            const int *devices, int n, int k, int tau,
                                            uint64_t seed) {
  const struct hx_cluster *c = &ctx->cluster;
  struct hx_sched_grouping *g = HX_NEW(a, struct hx_sched_grouping);
  g->group = HX_NEW_ARRAY(a, int, n);
  if (k == HX_SCHED_K_MACHINES) {
    k = groups_by_machine(c, devices, n, g->group);
  } else {
    if (k < 1)
      k = 1;
    if (k > n)
      k = n;
    if (k > 1)
      make_groups(ctx, a, devices, n, k, seed, g->group);
  }
  g->k = k;
  g->orders = HX_NEW_ARRAY(a, int, (long)HX_SCHED_ORDERS * k);
  g->norders = order_groups(group_bandwidth(c, a, devices, n, g->group, k), k, tau, a, g->orders,
                            &g->order_scans);
  return g;
}

bool hx_sched_stages(struct hx_ctx *ctx, struct hx_arena *a, const int *devices, int n,
                     const struct hx_sched_grouping *g, enum hx_tp_layout layout, int variant,
                     struct hx_pipeline *p) {
  const struct hx_cluster *c = &ctx->cluster;
  if (variant >= g->norders)
    return false;
  const int *order = g->orders + (long)variant * g->k;
  /* devices laid out group by group (path order), island by island */
  int *laid = HX_NEW_ARRAY(a, int, n), *members = HX_NEW_ARRAY(a, int, n);
  int *island = HX_NEW_ARRAY(a, int, n), *isl_members = HX_NEW_ARRAY(a, int, n);
  struct stage_list list = {0, n, HX_NEW_ARRAY(a, int, n), HX_NEW_ARRAY(a, int, n)};
  int nlaid = 0;
  for (int oi = 0; oi < g->k; oi++) {
    int m = 0;
    for (int i = 0; i < n; i++)
      if (g->group[i] == order[oi])
        members[m++] = devices[i];
    if (g->tp_any_link) /* the whole group is one island: TP over any link */
      memset(island, 0, sizeof(int) * (size_t)m);
    else
      make_islands(c, a, members, m, island);
    for (int root = 0; root < m; root++) {
      if (island[root] != root)
        continue;
      int im = 0;
      for (int i = root; i < m; i++)
        if (island[i] == root)
          isl_members[im++] = members[i];
      /* with TP over any link, node-local layouts are what did not fit */
      add_island(ctx, a, isl_members, im, layout, g->tp_any_link, laid, nlaid, &list);
      nlaid += im;
    }
  }
  if (nlaid != n)
    return false;
  hx_pipeline_init(a, p, list.n);
  for (int s = 0; s < list.n; s++)
    hx_stage_init(a, &p->stages[s], laid + list.first[s], list.tp[s], 0, 0, false);
  return true;
}

bool hx_sched_phase2(struct hx_ctx *ctx, struct hx_arena *a, const int *devices, int n, int k,
                     enum hx_tp_layout layout, int tau, int variant, uint64_t seed,
                     struct hx_pipeline *p) {
  const struct hx_sched_grouping *g = hx_sched_grouping(ctx, a, devices, n, k, tau, seed);
  return hx_sched_stages(ctx, a, devices, n, g, layout, variant, p);
}

void hx_sched_set_leaders(const struct hx_ctx *ctx, struct hx_pipeline *p) {
  if (p->nstages < 2) {
    if (p->nstages == 1)
      p->stages[0].leader = p->stages[0].devices[0];
    return;
  }
  int64_t mbs = p->micro_batch_size > 0 ? p->micro_batch_size : 1;
  /* stage 0: the member whose best hop to stage 1 is cheapest */
  struct hx_stage *s0 = &p->stages[0], *s1 = &p->stages[1];
  double best = INFINITY;
  int pick = s0->devices[0];
  for (int i = 0; i < s0->ndevices; i++) {
    s0->leader = s0->devices[i];
    s1->leader = hx_best_leader(ctx, s0, s1, mbs);
    double t = hx_hop_s(ctx, s0, s1, mbs);
    if (t < best) {
      best = t;
      pick = s0->devices[i];
    }
  }
  s0->leader = pick;
  for (int s = 1; s < p->nstages; s++)
    p->stages[s].leader = hx_best_leader(ctx, &p->stages[s - 1], &p->stages[s], mbs);
}
