/* The cluster: GPU types, nodes (replicas expanded), devices, and the full
 * device-to-device bandwidth/latency table built by passes/cluster_table.c. */
#ifndef HX_CLUSTER_H
#define HX_CLUSTER_H

#include <stdbool.h>
#include <stdint.h>

#include "loc.h"

struct hx_gpu_type {
  struct location loc;
  const char *name;
  double tflops;        /* dense bf16 peak, in TFLOP/s */
  int64_t memory_bytes;
  double mem_bandwidth; /* bytes/s; 0 when not given */
  double efficiency;    /* reachable fraction of peak, (0, 1] */
  /* CUDA compute capability x 10 (90: sm_90): the block's cuda_arch when
   * given, else what the GPU's name says (sema's table), else 0 (unknown;
   * an error only for --target=cuda). */
  int cuda_arch;
  bool cuda_arch_given; /* written in the block, not read off the name */
};

struct hx_node {
  struct location loc;
  const char *name;      /* expanded name: "g4090-1"; the base name when replicas == 1 */
  const char *base_name; /* as written in the node block */
  int gpu_type;          /* index into cluster.gpus */
  int gpus;
  double bandwidth;      /* bytes/s between two GPUs of this node */
  double latency;        /* seconds */
  int replica;           /* 0..replicas-1 */
  int first_device;      /* rank of its first GPU */
};

struct hx_device {
  int rank;         /* global index, node-major */
  const char *name; /* "a800:0", "g4090-1:3" */
  int node;
  int gpu_type;
  int local_index;  /* GPU index inside its node */
};

struct hx_link {
  struct location loc;
  const char *a, *b; /* base names as written */
  double bandwidth, latency;
};

struct hx_cluster {
  struct hx_gpu_type *gpus;
  int ngpus;
  struct hx_node *nodes;
  int nnodes;
  struct hx_device *devices;
  int ndevices;
  struct hx_link *links;
  int nlinks;
  bool has_network;
  double network_bandwidth, network_latency;
  struct location network_loc;
  /* ndevices x ndevices, row-major. bandwidth in bytes/s, latency in seconds.
   * The diagonal holds 0 (a device never sends to itself). */
  double *bandwidth;
  double *latency;
  /* Node classes, set by the cluster-table pass (nclasses 0 for tables built
   * otherwise, e.g. by tests): the nodes of one class have the same figures
   * to every other node and between one another (the replicas of a node
   * block, unless a link names one of them), so two GPUs of distinct nodes
   * a, b have class_bandwidth / class_latency[class(a) * nclasses +
   * class(b)] and two GPUs of one node the node's own figures: all that the
   * device tables hold, in tables that stay in cache (a group of 4096
   * one-GPU machines reads 16 million device pairs, a few class pairs). */
  int nclasses;
  int *node_class; /* per node */
  double *class_bandwidth, *class_latency;
};

static inline double hx_bw(const struct hx_cluster *c, int a, int b) {
  return c->bandwidth[(long)a * c->ndevices + b];
}
static inline double hx_lat(const struct hx_cluster *c, int a, int b) {
  return c->latency[(long)a * c->ndevices + b];
}
static inline double hx_device_flops(const struct hx_cluster *c, int rank) {
  const struct hx_gpu_type *g = &c->gpus[c->devices[rank].gpu_type];
  return g->tflops * 1e12 * g->efficiency;
}

#endif
