/* Phase 1: the cluster's devices into D_dp pipelines. METIS partitions the
 * device graph (vertex = compute, edge = bandwidth or its reciprocal) into
 * compute-balanced parts. Large clusters are partitioned by node (a machine
 * stays in one pipeline, so TP stays inside it); when there are fewer nodes
 * than pipelines the devices themselves are the vertices. The devices are
 * those of a pool the search chose (all, or a well-connected / fast subset).
 *
 * The move/swap refinement driven by the estimator lives in sched_search.c,
 * where whole plans can be priced. */
#include <stdlib.h>

#include "sched.h"

static int cmp_int(const void *a, const void *b) {
  int x = *(const int *)a, y = *(const int *)b;
  return (x > y) - (x < y);
}

void hx_sched_sort_ranks(int *ranks, int n) { qsort(ranks, (size_t)n, sizeof(int), cmp_int); }

/* Many pipelines over many devices (more pipelines than graph vertices):
 * the devices in rank order, machine by machine, cut into npipelines runs of
 * about equal compute, every run non-empty. Pipelines that small are a
 * machine or a part of one, which the rank order keeps together; a graph of
 * every device would be too large to partition. */
static void contiguous_split(const double *compute, int n, int npipelines, int *part) {
  double total = 0;
  for (int i = 0; i < n; i++)
    total += compute[i];
  double done = 0;
  int p = 0;
  for (int i = 0; i < n; i++) {
    /* next run when this one has its share, or when the devices left are
     * just enough for the runs left */
    bool full = done >= total * (p + 1) / npipelines - compute[i] / 2;
    bool must = n - i <= npipelines - 1 - p;
    if (i > 0 && p + 1 < npipelines && (full || must))
      p++;
    part[i] = p;
    done += compute[i];
  }
}

struct hx_sched_split *hx_sched_phase1(struct hx_ctx *ctx, struct hx_arena *a, const int *pool,
                                       int npool, int npipelines, enum hx_edge_objective obj,
                                       uint64_t seed) {
  const struct hx_cluster *c = &ctx->cluster;
  if (npipelines < 1 || npipelines > npool)
    return NULL;
  int *first = HX_NEW_ARRAY(a, int, npool), *count = HX_NEW_ARRAY(a, int, npool);
  int *rep = HX_NEW_ARRAY(a, int, npool);
  int n = hx_sched_vertices(c, pool, npool, first, count, rep);
  bool contiguous = false;
  if (n < npipelines) { /* fewer vertices than pipelines: devices as vertices */
    for (n = 0; n < npool; n++) {
      first[n] = n;
      rep[n] = pool[n];
      count[n] = 1;
    }
    contiguous = npool > HX_SCHED_GRAPH_MAX_VERTICES;
  }
  int *part = HX_NEW_ARRAY(a, int, n);
  double *compute = HX_NEW_ARRAY(a, double, n);
  for (int i = 0; i < n; i++)
    compute[i] = count[i] * hx_device_flops(c, rep[i]);
  if (contiguous) {
    contiguous_split(compute, n, npipelines, part);
  } else {
    struct hx_sched_graph *g = hx_sched_graph_build(a, c, rep, compute, n, obj);
    hx_sched_partition(a, g, npipelines, NULL, seed, part);
  }
  struct hx_sched_split *s = HX_NEW(a, struct hx_sched_split);
  s->npipelines = npipelines;
  s->count = HX_NEW_ARRAY(a, int, npipelines);
  s->devices = HX_NEW_ARRAY(a, int *, npipelines);
  for (int v = 0; v < n; v++)
    s->count[part[v]] += count[v];
  for (int p = 0; p < npipelines; p++) {
    if (s->count[p] == 0)
      return NULL;
    s->devices[p] = HX_NEW_ARRAY(a, int, s->count[p]);
    s->count[p] = 0;
  }
  for (int v = 0; v < n; v++)
    for (int k = 0; k < count[v]; k++)
      s->devices[part[v]][s->count[part[v]]++] = pool[first[v] + k];
  for (int p = 0; p < npipelines; p++)
    hx_sched_sort_ranks(s->devices[p], s->count[p]);
  return s;
}
