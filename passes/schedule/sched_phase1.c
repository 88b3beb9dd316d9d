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

struct hx_sched_split *hx_sched_phase1(struct hx_ctx *ctx, struct hx_arena *a, const int *pool,
                                       int npool, int npipelines, enum hx_edge_objective obj,
                                       uint64_t seed) {
  const struct hx_cluster *c = &ctx->cluster;
  if (npipelines < 1 || npipelines > npool)
    return NULL;
  int *first = HX_NEW_ARRAY(a, int, npool), *count = HX_NEW_ARRAY(a, int, npool);
  int *rep = HX_NEW_ARRAY(a, int, npool);
  int n = hx_sched_vertices(c, pool, npool, first, count, rep);
  if (n < npipelines) /* fewer machines than pipelines: devices as vertices */
    for (n = 0; n < npool; n++) {
      first[n] = n;
      rep[n] = pool[n];
      count[n] = 1;
    }
  int *part = HX_NEW_ARRAY(a, int, n);
  double *compute = HX_NEW_ARRAY(a, double, n);
  for (int i = 0; i < n; i++)
    compute[i] = count[i] * hx_device_flops(c, rep[i]);
  struct hx_sched_graph *g = hx_sched_graph_build(a, c, rep, compute, n, obj);
  hx_sched_partition(a, g, npipelines, NULL, seed, part);
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
    qsort(s->devices[p], (size_t)s->count[p], sizeof(int), cmp_int);
  return s;
}
