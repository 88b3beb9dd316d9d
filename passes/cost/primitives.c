/* The cost model's primitives: an element's bytes, a GPU type's TP
 * efficiency, a group's slowest link. cost.c, cost_seq.c, cost_memory.c and
 * sim.c all price through them, and they call none of those files: kept
 * here, below them, so that cost.c and cost_seq.c (which cost.c calls for
 * HexiSeq stages) do not call into each other. */
#include <math.h>
#include <stdlib.h>

#include "cost.h"

/* ---- sizes ------------------------------------------------------------- */

double hx_elem_bytes(const struct hx_train *train) {
  return train->precision == HX_PREC_FP32 ? 4.0 : 2.0;
}

/* ---- tensor parallelism ------------------------------------------------ */

double hx_tp_efficiency(const struct hx_gpu_type *g, int tp) {
  if (g->ntp_efficiency <= 0 || tp <= 1)
    return 1.0;
  double k = log2((double)tp);
  int below = (int)floor(k), last = g->ntp_efficiency - 1;
  if (below >= last)
    return g->tp_efficiency[last];
  double frac = k - below;
  return g->tp_efficiency[below] + frac * (g->tp_efficiency[below + 1] - g->tp_efficiency[below]);
}

/* ---- a group's links --------------------------------------------------- */

static int cmp_int64(const void *x, const void *y) {
  int64_t a = *(const int64_t *)x, b = *(const int64_t *)y;
  return (a > b) - (a < b);
}

/* hx_group_links over the node classes (ir/cluster.h): two distinct members
 * on one node have the node's own figures, on distinct nodes their
 * classes' figures, so the pairs' extremes are those of each node holding
 * two distinct members, each class holding two distinct nodes, and every
 * ordered pair of classes present: the same figures as the device tables
 * give every pair, in O(n log n + classes^2) instead of O(n^2) reads of
 * tables that do not stay in cache (a gradient group of 4096 one-GPU
 * pipelines: 16 million). */
/* A small group's figures pair by pair: for two distinct members, their
 * node's own when they share one, else both orders of their classes'
 * figures. Those are the values the sort below takes its extremes of (each
 * node holding two distinct members, each class holding two distinct nodes,
 * every ordered pair of classes present), and a minimum or maximum does not
 * depend on the order it is taken in, so the figures are the same to the
 * bit; the sort cost more than the pairs below PAIRWISE_MAX members (a
 * gradient group spans one member per pipeline). */
enum { PAIRWISE_MAX = 8 };

static void pairs_by_class(const struct hx_cluster *c, const int *ranks, int n, double *min_bw,
                           double *max_lat) {
  double bw = INFINITY, lat = 0;
  int nc = c->nclasses;
  for (int i = 0; i < n; i++) {
    int ni = c->devices[ranks[i]].node, ci = c->node_class[ni];
    for (int j = i + 1; j < n; j++) {
      if (ranks[j] == ranks[i])
        continue;
      int nj = c->devices[ranks[j]].node, cj = c->node_class[nj];
      if (nj == ni) {
        bw = fmin(bw, c->nodes[ni].bandwidth);
        lat = fmax(lat, c->nodes[ni].latency);
        continue;
      }
      bw = fmin(
          bw, fmin(c->class_bandwidth[(long)ci * nc + cj], c->class_bandwidth[(long)cj * nc + ci]));
      lat = fmax(lat,
                 fmax(c->class_latency[(long)ci * nc + cj], c->class_latency[(long)cj * nc + ci]));
    }
  }
  *min_bw = bw;
  *max_lat = lat;
}

static void group_links_by_class(const struct hx_cluster *c, const int *ranks, int n,
                                 double *min_bw, double *max_lat) {
  double bw = INFINITY, lat = 0;
  int first = c->devices[ranks[0]].node;
  bool one_node = true, distinct = false;
  for (int i = 1; i < n; i++) {
    one_node = one_node && c->devices[ranks[i]].node == first;
    distinct = distinct || ranks[i] != ranks[0];
  }
  if (one_node) { /* a TP group: the common case, no sort */
    *min_bw = distinct ? c->nodes[first].bandwidth : bw;
    *max_lat = distinct ? c->nodes[first].latency : lat;
    return;
  }
  if (n <= PAIRWISE_MAX) {
    pairs_by_class(c, ranks, n, min_bw, max_lat);
    return;
  }
  enum { STACK = 512 };
  int64_t key_stack[STACK];
  int class_stack[STACK];
  bool two_stack[STACK];
  bool heap = n > STACK;
  int64_t *key = heap ? malloc(sizeof(int64_t) * (size_t)n) : key_stack;
  int *cls = heap ? malloc(sizeof(int) * (size_t)n) : class_stack;
  bool *two_nodes = heap ? malloc(sizeof(bool) * (size_t)n) : two_stack;
  if (!key || !cls || !two_nodes)
    hx_internal_error("out of memory pricing a group");
  /* (class, node, rank) in 20 bits each: at most 4096 of any */
  for (int i = 0; i < n; i++) {
    int nd = c->devices[ranks[i]].node;
    key[i] = (int64_t)c->node_class[nd] << 40 | (int64_t)nd << 20 | ranks[i];
  }
  qsort(key, (size_t)n, sizeof *key, cmp_int64);
  int k = 0;
  for (int i = 0; i < n; i++) {
    int cl = (int)(key[i] >> 40), nd = (int)(key[i] >> 20 & 0xfffff);
    bool same_class = k > 0 && cls[k - 1] == cl;
    bool same_node = same_class && (int)(key[i - 1] >> 20 & 0xfffff) == nd;
    if (same_node && key[i] != key[i - 1]) { /* two distinct members on node nd */
      bw = fmin(bw, c->nodes[nd].bandwidth);
      lat = fmax(lat, c->nodes[nd].latency);
    }
    if (same_class) {
      two_nodes[k - 1] = two_nodes[k - 1] || !same_node;
      continue;
    }
    cls[k] = cl;
    two_nodes[k++] = false;
  }
  int nc = c->nclasses;
  for (int x = 0; x < k; x++)
    for (int y = 0; y < k; y++) {
      if (x == y && !two_nodes[x])
        continue;
      bw = fmin(bw, c->class_bandwidth[(long)cls[x] * nc + cls[y]]);
      lat = fmax(lat, c->class_latency[(long)cls[x] * nc + cls[y]]);
    }
  if (heap) {
    free(key);
    free(cls);
    free(two_nodes);
  }
  *min_bw = bw;
  *max_lat = lat;
}

void hx_group_links(const struct hx_cluster *c, const int *ranks, int n, double *min_bw,
                    double *max_lat) {
  if (c->nclasses > 0 && n > 2) {
    group_links_by_class(c, ranks, n, min_bw, max_lat);
    return;
  }
  double bw = INFINITY, lat = 0;
  for (int i = 0; i < n; i++)
    for (int j = 0; j < n; j++) {
      if (ranks[i] == ranks[j])
        continue;
      double b = hx_bw(c, ranks[i], ranks[j]), l = hx_lat(c, ranks[i], ranks[j]);
      if (b < bw)
        bw = b;
      if (l > lat)
        lat = l;
    }
  *min_bw = bw;
  *max_lat = lat;
}
