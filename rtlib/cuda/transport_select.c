/* The CUDA backend's rt_transport_open: NCCL (transport_nccl.c) when every
 * rank has a GPU of its own, else MPI staged through host memory
 * (transport_mpi_staged.c), which lets ranks share a GPU. The build picks
 * the default (the generated Makefile's TRANSPORT, default nccl:
 * -DHEXIC_TRANSPORT and -DHEXIC_HAVE_NCCL), HEXIC_TRANSPORT=nccl|mpi
 * overrides it at run time, and every rank takes the same one: whether
 * ranks share a GPU is agreed over the world (rt_cuda_pick_transport).
 * A ZeRO-1 plan (sharded gradient-sync groups) takes either: both have the
 * uneven reduce-scatter and all-gather. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

#include <cuda_runtime_api.h>

#include "kernels/cuda/cuda_check.h"
#include "rtlib/cuda/cuda_backend.h"
#include "rtlib/rt_init.h"

#ifdef HEXIC_HAVE_NCCL
#define HAVE_NCCL true
#else
#define HAVE_NCCL false
#endif
#ifndef HEXIC_TRANSPORT
#define HEXIC_TRANSPORT "mpi"
#endif

/* Whether some machine runs more ranks than it has GPUs (collective). */
static bool gpus_shared(void) {
  MPI_Comm node;
  int here = 0, gpus = 0;
  hx_rt_mpi_check(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, hx_rt_rank(),
                                      MPI_INFO_NULL, &node),
                  "count the ranks of this machine");
  MPI_Comm_size(node, &here);
  MPI_Comm_free(&node);
  HXC_CHECK(cudaGetDeviceCount(&gpus));
  int mine = here > gpus, any = 0;
  hx_rt_mpi_check(MPI_Allreduce(&mine, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD),
                  "agree on the transport");
  return any != 0;
}

const struct rt_transport *rt_transport_open(const struct hx_rt_rank_config *cfg,
                                             const struct rt_device *dev) {
  const char *want = getenv("HEXIC_TRANSPORT");
  if (!want || !*want)
    want = HEXIC_TRANSPORT;
  bool shared = gpus_shared();
  char note[256];
  int pick = rt_cuda_pick_transport(want, HAVE_NCCL, shared, note, sizeof note);
  if (pick < 0)
    hx_rt_fatal(HX_RT_EXIT_ERROR, "%s", note);
  /* Every rank must take the same one: where HEXIC_TRANSPORT differs
   * between hosts, the staged transport, which every build has. */
  int agreed = pick;
  hx_rt_mpi_check(MPI_Allreduce(&pick, &agreed, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD),
                  "agree on the transport");
  if (agreed != pick)
    snprintf(note, sizeof note, "another rank takes the staged MPI transport (HEXIC_TRANSPORT "
                                "differs between hosts?)");
  pick = agreed;
  if (cfg->rank == 0) /* one line, which tests/gpu/run.sh reads */
    hx_rt_log_banner("transport: %s%s%s%s", pick == RT_CUDA_NCCL ? "nccl" : "mpi-staged",
                     note[0] ? " (" : "", note, note[0] ? ")" : "");
#ifdef HEXIC_HAVE_NCCL
  if (pick == RT_CUDA_NCCL)
    return rt_cuda_nccl_open(cfg, dev);
#endif
  return rt_cuda_staged_open(cfg, dev);
}
