/* Phase 1: the cluster's devices into D_dp pipelines. METIS partitions the
 * device graph (vertex = compute, edge = bandwidth or its reciprocal) into
 * compute-balanced parts. Large clusters are partitioned by node (a machine
 * stays in one pipeline, so TP stays inside it); when there are fewer nodes
 * than pipelines the devices themselves are the vertices.
 *
 * The move/swap refinement driven by the estimator lives in sched_search.c,
 * where whole plans can be priced. */
#include <stdlib.h>

#include "sched.h"

/* Above this many devices the complete device graph (n^2 edges) gets slow to
 * build and check; nodes are the vertices then. */
enum { DEVICE_GRAPH_MAX = 128 };

static int cmp_int(const void *a, const void *b) {
  int x = *(const int *)a, y = *(const int *)b;
  return (x > y) - (x < y);
}

static struct hx_sched_split *split_new(struct hx_arena *a, int npipelines, const int *part,
                                        const int *vertex_first, const int *vertex_count,
                                        int nvertices) {
  struct hx_sched_split *s = HX_NEW(a, struct hx_sched_split);
  s->npipelines = npipelines;
  s->count = HX_NEW_ARRAY(a, int, npipelines);
  s->devices = HX_NEW_ARRAY(a, int *, npipelines);
  for (int v = 0; v < nvertices; v++)
    s->count[part[v]] += vertex_count[v];
  for (int p = 0; p < npipelines; p++)
    s->devices[p] = HX_NEW_ARRAY(a, int, s->count[p] > 0 ? s->count[p] : 1);
  int *fill = HX_NEW_ARRAY(a, int, npipelines);
  for (int v = 0; v < nvertices; v++)
    for (int k = 0; k < vertex_count[v]; k++)
      s->devices[part[v]][fill[part[v]]++] = vertex_first[v] + k;
  for (int p = 0; p < npipelines; p++)
    qsort(s->devices[p], (size_t)s->count[p], sizeof(int), cmp_int);
  return s;
}

struct hx_sched_split *hx_sched_phase1(struct hx_ctx *ctx, struct hx_arena *a, int npipelines,
                                       enum hx_edge_objective obj, uint64_t seed) {
  const struct hx_cluster *c = &ctx->cluster;
  if (npipelines < 1 || npipelines > c->ndevices)
    return NULL;
  bool by_node = c->ndevices > DEVICE_GRAPH_MAX && c->nnodes >= npipelines;
  int n = by_node ? c->nnodes : c->ndevices;
  int *first = HX_NEW_ARRAY(a, int, n), *count = HX_NEW_ARRAY(a, int, n);
  int *part = HX_NEW_ARRAY(a, int, n);
  double *compute = HX_NEW_ARRAY(a, double, n);
  for (int i = 0; i < n; i++) {
    first[i] = by_node ? c->nodes[i].first_device : i;
    count[i] = by_node ? c->nodes[i].gpus : 1;
    compute[i] = count[i] * hx_device_flops(c, first[i]);
  }
  struct hx_sched_graph *g = hx_sched_graph_build(a, c, first, compute, n, obj);
  hx_sched_partition(a, g, npipelines, NULL, seed, part);
  struct hx_sched_split *s = split_new(a, npipelines, part, first, count, n);
  for (int p = 0; p < npipelines; p++)
    if (s->count[p] == 0)
      return NULL;
  return s;
}
