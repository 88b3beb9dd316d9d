/* The cluster: GPU types, nodes (replicas expanded), devices, and the full
 * device-to-device bandwidth/latency table built by passes/cluster_table.c. */
#ifndef HX_CLUSTER_H
#define HX_CLUSTER_H

#include <stdbool.h>
#include <stdint.h>

#include "loc.h"

/* Points of a TP efficiency curve: degrees 1, 2, 4, 8, 16. */
enum { HX_TP_CURVE_POINTS = 5 };

struct hx_gpu_type {
  struct location loc;
  const char *name;
  double tflops;        /* dense bf16 peak, in TFLOP/s */
  int64_t memory_bytes;
  double mem_bandwidth; /* bytes/s; 0 when not given */
  /* Bytes/s of a copy within the device's memory (ZeRO-1's weight pack and
   * unpack); 0 when not given: the optimizer's rate (mem_bandwidth). */
  double copy_bandwidth;
  double efficiency;    /* reachable fraction of peak, (0, 1]: the forward's */
  /* The backward's reachable fraction of peak, on its 2x the forward's
   * FLOPs, (0, 1]: sema fills it with the block's backward_efficiency, else
   * efficiency (a backward 2x the forward's time, the model before it was
   * measured apart); 0 (IR built by hand) means efficiency. */
  double backward_efficiency;
  /* The LM head's (final norm, head GEMM, cross-entropy) reachable fraction
   * of peak, forward and backward alike, (0, 1]; 0 when not given: its
   * forward at efficiency, its backward at backward_efficiency. */
  double head_efficiency;
  /* CUDA compute capability x 10 (90: sm_90): the block's cuda_arch when
   * given, else what the GPU's name says (sema's table), else 0 (unknown;
   * an error only for --target=cuda). */
  int cuda_arch;
  bool cuda_arch_given; /* written in the block, not read off the name */
  struct location cuda_arch_loc; /* the value written, when given */
  /* Tensor parallelism (issue 18). tp_efficiency[k] is the fraction of the
   * TP 1 rate (tflops x efficiency) each device keeps in a TP group of
   * degree 2^k (k = 0: degree 1, always 1.0), non-increasing; degrees
   * between two points are interpolated in log2(degree), past the last the
   * last point holds. ntp_efficiency 0 (IR built by hand, e.g. in tests):
   * TP scales perfectly; sema always fills it (the gpu block's list, else
   * the default curve of passes/cost/cost.h). */
  double tp_efficiency[HX_TP_CURVE_POINTS];
  int ntp_efficiency;
  /* Seconds per decoder layer forward that TP does not shrink (kernel
   * launches and synchronisation; backward 2x); 0 when not given. */
  double layer_overhead;
  /* This type's measured profiles: cluster.profiles[profile_first ..
   * profile_first + nprofiles), sorted by TP degree (nprofiles 0: none). */
  int profile_first, nprofiles;
};

/* A measured profile of one decoder layer on one device of a TP group of
 * degree `tp` of one GPU type (a `profile` block), at increasing
 * micro-batch sizes: the layer's compute without its TP collectives, which
 * hexic prices on the group's links. */
struct hx_profile {
  struct location loc;
  int gpu_type;
  int tp;
  int npoints;
  int64_t *micro_batch;      /* increasing, >= 1 */
  double *fwd_s, *bwd_s;     /* > 0 */
  double *act_bytes;         /* activations the layer keeps for its backward, >= 0 */
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
  /* The emulation block: the GPU type of the machine --emulate runs on, so
   * each device's slowdown is host speed / its own speed. has_emulation_host
   * false (no block, or a cluster built by hand, zeroed): the cluster's
   * fastest device is taken to be the machine. emulation_host_loc is the
   * block's host field. */
  bool has_emulation_host;
  int emulation_host; /* index into gpus */
  struct location emulation_host_loc;
  /* Measured profiles (profile blocks), grouped by GPU type, each type's by
   * TP degree (struct hx_gpu_type says where a type's start). */
  struct hx_profile *profiles;
  int nprofiles;
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
/* FLOP/s a device reaches in a backward: its type's backward_efficiency of
 * peak, the forward's where none is set (0: IR built by hand), so that a
 * backward then costs exactly 2x a forward. */
static inline double hx_device_backward_flops(const struct hx_cluster *c, int rank) {
  const struct hx_gpu_type *g = &c->gpus[c->devices[rank].gpu_type];
  return g->tflops * 1e12 * (g->backward_efficiency > 0 ? g->backward_efficiency : g->efficiency);
}
/* FLOP/s a device reaches in the LM head's forward or backward: its type's
 * head_efficiency of peak, else the forward's or the backward's rate. */
static inline double hx_device_head_flops(const struct hx_cluster *c, int rank, bool backward) {
  const struct hx_gpu_type *g = &c->gpus[c->devices[rank].gpu_type];
  if (g->head_efficiency > 0)
    return g->tflops * 1e12 * g->head_efficiency;
  return backward ? hx_device_backward_flops(c, rank) : hx_device_flops(c, rank);
}

#endif
