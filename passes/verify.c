/* Invariants of the model and cluster IR that later passes rely on. A failure
 * here is a bug in hexic (sema let something through), not an input error:
 * it aborts with exit code 70. */
#include <math.h>

#include "passes.h"

void hx_verify_model(const struct hx_ctx *ctx) {
  if (!ctx->has_model)
    return;
  const struct hx_model *m = &ctx->model;
  if (m->layers < 1 || m->hidden < 1 || m->ffn < 1 || m->heads < 1 || m->kv_heads < 1 || m->vocab < 1 ||
      m->seq_len < 1)
    hx_internal_error("model '%s': a size is not positive", m->name);
  if (m->hidden % m->heads || m->heads % m->kv_heads || (m->hidden / m->heads) % 2)
    hx_internal_error("model '%s': heads/kv_heads do not divide evenly", m->name);
  if (!(m->rope_theta > 0) || !(m->norm_eps > 0))
    hx_internal_error("model '%s': rope_theta or norm_eps not positive", m->name);
  /* Derived figures are zero until model-stats runs, never negative. */
  if (m->params_layer < 0 || m->params_total < 0 || m->flops_layer_fwd < 0 || m->act_bytes_layer < 0)
    hx_internal_error("model '%s': a derived figure is negative", m->name);
  if (m->head_dim && m->head_dim * m->heads != m->hidden)
    hx_internal_error("model '%s': head_dim * heads != hidden", m->name);
  if (ctx->has_train) {
    const struct hx_train *t = &ctx->train;
    if (t->global_batch < 1 || t->micro_batch < 0 || t->micro_batch > t->global_batch || t->steps < 1)
      hx_internal_error("train: batch sizes or steps out of range");
  }
}

static void verify_nodes_and_devices(const struct hx_cluster *c) {
  int rank = 0;
  for (int i = 0; i < c->nnodes; i++) {
    const struct hx_node *n = &c->nodes[i];
    if (n->gpu_type < 0 || n->gpu_type >= c->ngpus || n->gpus < 1 || n->first_device != rank)
      hx_internal_error("cluster: node %d ('%s') is inconsistent", i, n->name);
    if (n->gpus > 1 && !(n->bandwidth > 0))
      hx_internal_error("cluster: node '%s' has several GPUs and no bandwidth", n->name);
    rank += n->gpus;
  }
  if (rank != c->ndevices)
    hx_internal_error("cluster: %d devices, but nodes hold %d", c->ndevices, rank);
  for (int r = 0; r < c->ndevices; r++) {
    const struct hx_device *d = &c->devices[r];
    if (d->rank != r || d->node < 0 || d->node >= c->nnodes || d->gpu_type != c->nodes[d->node].gpu_type ||
        d->local_index != r - c->nodes[d->node].first_device)
      hx_internal_error("cluster: device %d is inconsistent with its node", r);
  }
  for (int g = 0; g < c->ngpus; g++) {
    const struct hx_gpu_type *t = &c->gpus[g];
    if (!(t->tflops > 0) || t->memory_bytes <= 0 || !(t->efficiency > 0 && t->efficiency <= 1))
      hx_internal_error("cluster: GPU type '%s' has a non-positive figure", t->name);
  }
}

/* With node classes (cluster-table sets them), group costs read the class
 * tables: every device entry must be its nodes' own or classes' figure,
 * and the class tables valid and symmetric, which makes the device table
 * so (read row by row, not a column stride over 134 MB at 4096 devices). */
static bool verify_classes(const struct hx_cluster *c) {
  if (c->nclasses <= 0)
    return false;
  int n = c->ndevices, k = c->nclasses;
  for (int x = 0; x < c->nnodes; x++)
    if (c->node_class[x] < 0 || c->node_class[x] >= k)
      hx_internal_error("cluster: node %d has no class", x);
  for (int a = 0; a < n; a++)
    for (int b = 0; b < n; b++) {
      int na = c->devices[a].node, nb = c->devices[b].node;
      long at = (long)c->node_class[na] * k + c->node_class[nb];
      double bw = a == b ? 0 : na == nb ? c->nodes[na].bandwidth : c->class_bandwidth[at];
      double lat = a == b ? 0 : na == nb ? c->nodes[na].latency : c->class_latency[at];
      if (hx_bw(c, a, b) != bw || hx_lat(c, a, b) != lat)
        hx_internal_error("cluster table: entry [%d][%d] differs from its nodes' figures", a, b);
      if (a != b && (!(bw > 0) || !isfinite(bw) || !(lat >= 0) || !isfinite(lat)))
        hx_internal_error("cluster table: bad entry [%d][%d] (bandwidth %g, latency %g)", a, b,
                          bw, lat);
    }
  for (int x = 0; x < k; x++)
    for (int y = 0; y < x; y++)
      if (c->class_bandwidth[(long)x * k + y] != c->class_bandwidth[(long)y * k + x] ||
          c->class_latency[(long)x * k + y] != c->class_latency[(long)y * k + x])
        hx_internal_error("cluster class table: not symmetric at [%d][%d]", x, y);
  return true;
}

static void verify_table(const struct hx_cluster *c) {
  if (verify_classes(c))
    return;
  int n = c->ndevices;
  for (int a = 0; a < n; a++)
    for (int b = 0; b < n; b++) {
      double bw = hx_bw(c, a, b), lat = hx_lat(c, a, b);
      if (a == b ? bw != 0 || lat != 0 : !(bw > 0) || !isfinite(bw) || !(lat >= 0) || !isfinite(lat))
        hx_internal_error("cluster table: bad entry [%d][%d] (bandwidth %g, latency %g)", a, b, bw, lat);
      if (bw != hx_bw(c, b, a) || lat != hx_lat(c, b, a))
        hx_internal_error("cluster table: not symmetric at [%d][%d]", a, b);
    }
}

void hx_verify_cluster(const struct hx_ctx *ctx) {
  const struct hx_cluster *c = &ctx->cluster;
  if (c->nnodes == 0)
    return;
  verify_nodes_and_devices(c);
  /* The table exists only once cluster-table has run. */
  if (c->bandwidth && c->latency)
    verify_table(c);
}
