/* Device graphs for METIS: building, validating and partitioning. METIS is
 * handed only graphs that passed hx_sched_graph_check, always with an
 * explicit seed, and every return code is checked. */
#include <math.h>
#include <metis.h>
#include <stdlib.h>
#include <string.h>

#include "passes/cost/cost.h"
#include "sched.h"

uint64_t hx_rng_next(struct hx_rng *r) {
  uint64_t z = (r->state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

int hx_rng_below(struct hx_rng *r, int n) { return (int)(hx_rng_next(r) % (uint64_t)n); }

/* Weights as graphs carry them: at most MAX_WEIGHT each. METIS sums them in
 * idx_t (32 bits here), so run_metis narrows them (hx_sched_narrow_weights) until the
 * total edge weight and the total vertex weight are each at most
 * HX_SCHED_METIS_TOTAL, far below 2^31: a complete graph of 500 vertices
 * with every edge at 5e5 sums to 1.25e11, which overflowed inside METIS
 * (issue 10). */
#define MAX_WEIGHT 1000000

/* Whether v's neighbours are listed in strictly increasing order (as
 * hx_sched_graph_build writes them): then duplicates cannot occur and edges
 * are found by bisection, which keeps checking a complete graph of a few
 * hundred vertices cheap enough to do on every partition. */
static bool sorted_row(const struct hx_sched_graph *g, int64_t v) {
  for (int64_t e = g->xadj[v] + 1; e < g->xadj[v + 1]; e++)
    if (g->adjncy[e] <= g->adjncy[e - 1])
      return false;
  return true;
}

static int64_t find_edge(const struct hx_sched_graph *g, const bool *sorted, int64_t from,
                         int64_t to) {
  int64_t lo = g->xadj[from], hi = g->xadj[from + 1];
  if (sorted[from]) {
    while (lo < hi) {
      int64_t mid = lo + (hi - lo) / 2;
      if (g->adjncy[mid] < to)
        lo = mid + 1;
      else
        hi = mid;
    }
    return lo < g->xadj[from + 1] && g->adjncy[lo] == to ? lo : -1;
  }
  for (int64_t e = lo; e < hi; e++)
    if (g->adjncy[e] == to)
      return e;
  return -1;
}

static const char *check_vertex(const struct hx_sched_graph *g, const bool *sorted_rows, int v) {
  if (g->vwgt[v] <= 0 || g->vwgt[v] > MAX_WEIGHT)
    return "vertex weight not in [1, 1e6]";
  bool sorted = sorted_rows[v];
  for (int64_t e = g->xadj[v]; e < g->xadj[v + 1]; e++) {
    int64_t u = g->adjncy[e];
    if (u < 0 || u >= g->nvertices)
      return "edge to a vertex out of range";
    if (u == v)
      return "self-loop";
    if (g->adjwgt[e] <= 0 || g->adjwgt[e] > MAX_WEIGHT)
      return "edge weight not in [1, 1e6]";
    for (int64_t f = g->xadj[v]; !sorted && f < e; f++)
      if (g->adjncy[f] == u)
        return "duplicate edge";
    int64_t back = find_edge(g, sorted_rows, u, v);
    if (back < 0)
      return "edge without its reverse (adjacency not symmetric)";
    if (g->adjwgt[back] != g->adjwgt[e])
      return "edge weights differ in the two directions";
  }
  return NULL;
}

const char *hx_sched_graph_check(const struct hx_sched_graph *g) {
  if (g->nvertices <= 0)
    return "no vertices";
  /* every weight narrows to at least 1: more vertices or edges than the
   * total allows cannot be narrowed (nor indexed by idx_t) */
  if (g->nvertices > HX_SCHED_METIS_TOTAL / 2 || g->xadj[g->nvertices] > HX_SCHED_METIS_TOTAL / 2)
    return "graph too large for METIS";
  if (g->xadj[0] != 0)
    return "xadj[0] is not 0";
  for (int v = 0; v < g->nvertices; v++)
    if (g->xadj[v + 1] < g->xadj[v])
      return "xadj not increasing";
  bool *sorted = malloc(sizeof(bool) * (size_t)g->nvertices);
  if (!sorted)
    hx_internal_error("out of memory checking a graph");
  for (int v = 0; v < g->nvertices; v++)
    sorted[v] = sorted_row(g, v);
  const char *why = NULL;
  for (int v = 0; v < g->nvertices && !why; v++)
    why = check_vertex(g, sorted, v);
  free(sorted);
  return why;
}

/* Whether two devices' machines come from one node block (replicas: the
 * same GPUs, count and links). */
static bool same_kind(const struct hx_cluster *c, int a, int b) {
  const struct hx_node *na = &c->nodes[c->devices[a].node], *nb = &c->nodes[c->devices[b].node];
  return na->gpu_type == nb->gpu_type && na->gpus == nb->gpus &&
         na->bandwidth == nb->bandwidth && !strcmp(na->base_name, nb->base_name);
}

/* Merges runs of consecutive vertices (of one kind, when kind_only) into
 * vertices of up to ceil(nv / HX_SCHED_GRAPH_MAX_VERTICES) of them. Returns
 * the new count. */
static int merge_vertices(const struct hx_cluster *c, int nv, int *first, int *count, int *rep,
                          bool kind_only) {
  int per = (nv + HX_SCHED_GRAPH_MAX_VERTICES - 1) / HX_SCHED_GRAPH_MAX_VERTICES;
  int out = 0, run = 0;
  for (int v = 0; v < nv; v++) {
    bool join = out > 0 && run < per && (!kind_only || same_kind(c, rep[out - 1], rep[v]));
    if (join) {
      count[out - 1] += count[v];
      run++;
      continue;
    }
    first[out] = first[v];
    count[out] = count[v];
    rep[out++] = rep[v];
    run = 1;
  }
  return out;
}

int hx_sched_vertices(const struct hx_cluster *c, const int *devices, int n, int *first,
                      int *count, int *rep) {
  bool by_node = n > HX_SCHED_DEVICE_GRAPH_MAX;
  int nv = 0;
  for (int i = 0; i < n; i++) {
    bool join = by_node && nv > 0 && c->devices[devices[i]].node == c->devices[rep[nv - 1]].node;
    if (!join) {
      first[nv] = i;
      rep[nv] = devices[i];
      count[nv++] = 0;
    }
    count[nv - 1]++;
  }
  /* many machines: consecutive replicas together, then any neighbours */
  if (nv > HX_SCHED_GRAPH_MAX_VERTICES)
    nv = merge_vertices(c, nv, first, count, rep, true);
  if (nv > HX_SCHED_GRAPH_MAX_VERTICES)
    nv = merge_vertices(c, nv, first, count, rep, false);
  return nv;
}

/* Scales x in [lo, hi] into an integer in [1, MAX_WEIGHT], monotone. */
static int64_t scale_weight(double x, double lo, double hi) {
  if (!(hi > lo))
    return MAX_WEIGHT / 2;
  double w = 1.0 + (x - lo) / (hi - lo) * (MAX_WEIGHT - 1);
  return (int64_t)llround(w);
}

static void fill_vertex_weights(struct hx_sched_graph *g, const double *compute) {
  double top = 0;
  for (int i = 0; i < g->nvertices; i++)
    top = fmax(top, compute[i]);
  /* compute relative to the strongest item, 1000 units for it: enough
   * resolution for balance, far from idx_t overflow */
  for (int i = 0; i < g->nvertices; i++) {
    int64_t w = (int64_t)llround(1000.0 * compute[i] / top);
    g->vwgt[i] = w < 1 ? 1 : w;
  }
}

/* The raw weight of the edge i-j under the objective: symmetric because the
 * larger bandwidth of the two directions is taken. */
static double raw_edge(const struct hx_cluster *c, const int *rep, int i, int j,
                       enum hx_edge_objective obj) {
  int a = rep[i], b = rep[j];
  double bw = fmax(hx_pair_bw(c, a, b), hx_pair_bw(c, b, a));
  if (!(bw > 0))
    bw = 1.0;
  return obj == HX_EDGES_BANDWIDTH ? bw : 1.0 / bw;
}

struct hx_sched_graph *hx_sched_graph_build(struct hx_arena *a, const struct hx_cluster *c,
                                            const int *rep, const double *compute, int n,
                                            enum hx_edge_objective obj) {
  struct hx_sched_graph *g = HX_NEW(a, struct hx_sched_graph);
  int64_t nedges = (int64_t)n * (n - 1);
  g->nvertices = n;
  g->xadj = HX_NEW_ARRAY(a, int64_t, n + 1);
  g->adjncy = HX_NEW_ARRAY(a, int64_t, nedges > 0 ? nedges : 1);
  g->adjwgt = HX_NEW_ARRAY(a, int64_t, nedges > 0 ? nedges : 1);
  g->vwgt = HX_NEW_ARRAY(a, int64_t, n);
  fill_vertex_weights(g, compute);
  /* logarithmic scale: bandwidths span 1 Gbps .. 900 GB/s, and a linear
   * scale would flatten every slow link to weight 1 */
  double lo = INFINITY, hi = -INFINITY;
  for (int i = 0; i < n; i++)
    for (int j = i + 1; j < n; j++) {
      double w = log(raw_edge(c, rep, i, j, obj));
      lo = fmin(lo, w);
      hi = fmax(hi, w);
    }
  int64_t e = 0;
  for (int i = 0; i < n; i++) {
    g->xadj[i] = e;
    for (int j = 0; j < n; j++) {
      if (j == i)
        continue;
      g->adjncy[e] = j;
      g->adjwgt[e] = scale_weight(log(raw_edge(c, rep, i, j, obj)), lo, hi);
      e++;
    }
  }
  g->xadj[n] = e;
  return g;
}

/* Moves the lightest vertex of the heaviest part into each empty part. */
static void fill_empty_parts(const struct hx_sched_graph *g, int nparts, int *part) {
  int64_t *load = calloc((size_t)nparts, sizeof *load);
  int *count = calloc((size_t)nparts, sizeof *count);
  if (!load || !count)
    hx_internal_error("out of memory");
  for (int v = 0; v < g->nvertices; v++) {
    load[part[v]] += g->vwgt[v];
    count[part[v]]++;
  }
  for (int p = 0; p < nparts; p++) {
    if (count[p])
      continue;
    int heavy = -1;
    for (int q = 0; q < nparts; q++)
      if (count[q] > 1 && (heavy < 0 || load[q] > load[heavy]))
        heavy = q;
    if (heavy < 0)
      break;
    int light = -1;
    for (int v = 0; v < g->nvertices; v++)
      if (part[v] == heavy && (light < 0 || g->vwgt[v] < g->vwgt[light]))
        light = v;
    part[light] = p;
    load[heavy] -= g->vwgt[light];
    load[p] += g->vwgt[light];
    count[heavy]--;
    count[p]++;
  }
  free(load);
  free(count);
}

int64_t hx_sched_narrow_weights(const int64_t *w, int64_t n, int32_t *out) {
  int64_t total = 0;
  for (int64_t i = 0; i < n; i++)
    total += w[i];
  /* w -> 1 + floor((w - 1) * f): monotone, equal weights stay equal (the two
   * directions of an edge), never below 1, and the sum is at most
   * n + (total - n) * f = HX_SCHED_METIS_TOTAL, f = num / den
   * (integers: (w - 1) * num < 1e6 * 2^26 fits in 64 bits) */
  bool scale = total > HX_SCHED_METIS_TOTAL;
  int64_t num = HX_SCHED_METIS_TOTAL - n, den = total - n;
  int64_t sum = 0;
  for (int64_t i = 0; i < n; i++) {
    out[i] = (int32_t)(scale ? 1 + (w[i] - 1) * num / den : w[i]);
    sum += out[i];
  }
  return sum;
}

_Static_assert(sizeof(idx_t) == sizeof(int32_t), "METIS built with 32-bit idx_t");

/* METIS's answers of this run (run_metis), in an arena of their own that
 * lives as long as the process; at most METIS_KEPT_MAX of them. */
static struct hx_arena metis_arena;
static bool metis_arena_ready;
static struct hx_sched_memo metis_answers;
enum { METIS_KEPT_MAX = 1 << 16 };

/* Everything METIS_PartGraphKway reads as ints, malloc'ed (the memo keeps
 * its own copy). */
static int *metis_key(idx_t n, const idx_t *xadj, const idx_t *adjncy, const idx_t *vwgt,
                      const idx_t *adjwgt, const real_t *tpwgts, int nparts, uint64_t seed,
                      int *nkey) {
  idx_t m = xadj[n];
  int reals = nparts * (int)(sizeof(real_t) / sizeof(int)); /* float or double */
  int *key = malloc(sizeof(int) * (size_t)(4 + (n + 1) + 2 * (int64_t)m + n + reals));
  if (!key)
    hx_internal_error("out of memory keying a METIS partition");
  int k = 0;
  key[k++] = (int)n;
  key[k++] = nparts;
  key[k++] = (int)(uint32_t)seed;
  key[k++] = (int)(uint32_t)(seed >> 32);
  memcpy(key + k, xadj, sizeof(int) * (size_t)(n + 1));
  k += n + 1;
  memcpy(key + k, adjncy, sizeof(int) * (size_t)m);
  k += m;
  memcpy(key + k, adjwgt, sizeof(int) * (size_t)m);
  k += m;
  memcpy(key + k, vwgt, sizeof(int) * (size_t)n);
  k += n;
  memcpy(key + k, tpwgts, sizeof(real_t) * (size_t)nparts);
  k += reals;
  *nkey = k;
  return key;
}

static void run_metis(struct hx_arena *a, const struct hx_sched_graph *g, int nparts,
                      const double *target, uint64_t seed, int *part) {
  idx_t n = g->nvertices, ncon = 1, np = nparts, objval = 0;
  int64_t m = g->xadj[g->nvertices];
  idx_t *xadj = HX_NEW_ARRAY(a, idx_t, n + 1), *adjncy = HX_NEW_ARRAY(a, idx_t, m + 1);
  idx_t *vwgt = HX_NEW_ARRAY(a, idx_t, n), *adjwgt = HX_NEW_ARRAY(a, idx_t, m + 1);
  idx_t *out = HX_NEW_ARRAY(a, idx_t, n);
  real_t *tpwgts = HX_NEW_ARRAY(a, real_t, nparts);
  for (idx_t v = 0; v <= n; v++)
    xadj[v] = (idx_t)g->xadj[v];
  for (int64_t e = 0; e < m; e++)
    adjncy[e] = (idx_t)g->adjncy[e];
  int64_t vtotal = hx_sched_narrow_weights(g->vwgt, n, vwgt);
  int64_t etotal = hx_sched_narrow_weights(g->adjwgt, m, adjwgt);
  if (vtotal > HX_SCHED_METIS_TOTAL || etotal > HX_SCHED_METIS_TOTAL)
    hx_internal_error("scheduler: METIS weights sum to %lld (vertices) and %lld (edges), over "
                      "%d",
                      (long long)vtotal, (long long)etotal, HX_SCHED_METIS_TOTAL);
  double sum = 0;
  for (int p = 0; p < nparts; p++)
    sum += target ? target[p] : 1.0;
  for (int p = 0; p < nparts; p++)
    tpwgts[p] = (real_t)((target ? target[p] : 1.0) / sum);
  /* METIS is a function of what it is given: a search asks it the same
   * question again and again (pipelines on machines alike build the same
   * graph; llama2-13b on hetero-64: 331 of 779 calls), so its answers are
   * kept for the run, keyed by every input it reads */
  struct hx_sched_memo_entry *kept = NULL;
  if (metis_answers.n < METIS_KEPT_MAX) {
    if (!metis_arena_ready) {
      hx_arena_init(&metis_arena);
      metis_arena_ready = true;
    }
    int nkey = 0;
    int *key = metis_key(n, xadj, adjncy, vwgt, adjwgt, tpwgts, nparts, seed, &nkey);
    kept = hx_sched_memo_get(&metis_arena, &metis_answers, key, nkey);
    free(key);
    if (kept->set) {
      memcpy(part, kept->value, sizeof(int) * (size_t)n);
      return;
    }
  }
  idx_t options[METIS_NOPTIONS];
  if (METIS_SetDefaultOptions(options) != METIS_OK)
    hx_internal_error("METIS_SetDefaultOptions failed");
  options[METIS_OPTION_SEED] = (idx_t)(seed & 0x3fffffff);
  options[METIS_OPTION_NUMBERING] = 0;
  int rc = METIS_PartGraphKway(&n, &ncon, xadj, adjncy, vwgt, NULL, adjwgt, &np, tpwgts, NULL,
                               options, &objval, out);
  if (rc != METIS_OK)
    hx_internal_error("METIS_PartGraphKway failed (code %d) on a graph of %d vertices into %d "
                      "parts",
                      rc, (int)n, nparts);
  for (idx_t v = 0; v < n; v++) {
    if (out[v] < 0 || out[v] >= nparts)
      hx_internal_error("METIS returned part %d of %d", (int)out[v], nparts);
    part[v] = (int)out[v];
  }
  if (kept) {
    int *answer = HX_NEW_ARRAY(&metis_arena, int, n);
    memcpy(answer, part, sizeof(int) * (size_t)n);
    kept->value = answer;
    kept->set = true;
  }
}

void hx_sched_partition_forget(void) {
  if (metis_arena_ready)
    hx_arena_free(&metis_arena);
  metis_arena_ready = false;
  memset(&metis_answers, 0, sizeof metis_answers);
}

void hx_sched_partition(struct hx_arena *a, const struct hx_sched_graph *g, int nparts,
                        const double *target, uint64_t seed, int *part) {
  const char *why = hx_sched_graph_check(g);
  if (why)
    hx_internal_error("scheduler: bad graph for METIS: %s", why);
  if (nparts <= 1 || g->nvertices == 1) {
    for (int v = 0; v < g->nvertices; v++)
      part[v] = 0;
    return;
  }
  if (nparts >= g->nvertices) {
    /* one vertex per part: METIS would refuse or leave parts empty */
    for (int v = 0; v < g->nvertices; v++)
      part[v] = v;
    return;
  }
  run_metis(a, g, nparts, target, seed, part);
  fill_empty_parts(g, nparts, part);
}
