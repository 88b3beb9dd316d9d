/* The CUDA backend's NCCL transport: one GPU per rank, device buffers
 * straight between GPUs (NVLink, PCIe, InfiniBand: whatever NCCL finds).
 *
 * Communicators. MPI stays for start-up, the world check, the stall
 * reports and the watchdog. Rank 0 makes NCCL's unique id and broadcasts
 * it over MPI_COMM_WORLD; every rank joins the world communicator with it.
 * From that, with ncclCommSplit (collective over the world, so every rank
 * makes the same calls in the same order, non-members with
 * NCCL_SPLIT_NOCOLOR):
 *   - the TP group of each stage (colour: the world rank of its TP rank 0);
 *   - per leader pair (stage s and s + 1 of a pipeline) two communicators,
 *     one per direction, activations forward and gradients back, made in
 *     two rounds (pairs from even stages, then from odd ones: a leader is in
 *     one pair per round). Each carries messages one way, in micro-batch
 *     order on both ends, on its own stream: a send never waits behind a
 *     receive of the other direction, as MPI's non-blocking sends never do;
 *   - a duplicate of the world for rtlib/seq's sendrecv and alltoallv.
 * The gradient-sync groups are opened by the executor on their members only
 * (in increasing group id order), so each is its own ncclCommInitRank with
 * an id broadcast over the group's MPI communicator: the grouped init the
 * issue allows where a world-collective split cannot be used.
 *
 * Streams and events. Kernels run on the device's stream (rt_cuda_stream).
 * TP broadcasts and all-reduces run on it too, in order with the layer
 * that needs them. A pipeline message or a gradient all-reduce runs on its
 * communicator's stream after an event of the compute stream (the buffer
 * is ready), and the compute stream waits for its completion event before
 * it touches the buffer again: sends and gradient all-reduces overlap the
 * compute; a receive is posted as soon as the executor asks for it and the
 * host then waits for it through hx_rt_wait_until, which names the peer, so
 * a stall is traced as on CPU.
 *
 * ZeRO-1 (a group with shard_ppm): NCCL has no reduce-scatter or
 * all-gather with per-member counts, so each is one rooted collective per
 * member's block (ncclReduce to it, ncclBroadcast from it) fused in one
 * ncclGroupStart/End on the group's communicator and the gradient stream,
 * completed like the all-reduce. Not yet run on a GPU. Sequence
 * parallelism's reduce-scatter and all-gather in the TP group (uneven row
 * blocks) are built the same way, on the compute stream.
 *
 * Tested without a GPU: tests/nccl/emulate_nccl.sh runs this file over a
 * test-only NCCL on MPI (tests/nccl/nccl_shim.c, which reports what NCCL
 * would deadlock on) on the host CUDA emulator, DP, TP, PP, ZeRO-1 and
 * HexiSeq plans against the CPU backend.
 *
 * Precision. Gradient sums are fp32 (ncclFloat). TP all-reduces of bf16
 * activations are widened to fp32 on the device (hxc_convert), summed in
 * fp32 and rounded once, as the staged transport does on the host; NCCL's
 * own bf16 sum would round at every hop of its ring.
 *
 * Faults. The watchdog thread polls ncclCommGetAsyncError on every
 * communicator (hx_rt_set_fault_hooks): an error (a peer that died or whose
 * connection broke) ends the rank with a message, after ncclCommAbort on
 * every communicator, so no kernel of this rank stays blocked; a stall
 * (HEXIC_TIMEOUT_S without progress) also aborts the communicators before
 * the rank exits, and mpirun ends the others. */
#ifdef HEXIC_HAVE_NCCL

#include <nccl.h> /* first: cuda_check.h's HXC_CHECK then knows ncclResult_t */

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#include <cuda_runtime_api.h>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/llama_cuda.h"
#include "rtlib/cuda/cuda_backend.h"
#include "rtlib/rt_init.h"

/* One direction of a leader pair: its communicator (NULL: no such peer)
 * and stream, and the peer's index in it. */
struct link {
  ncclComm_t comm;
  cudaStream_t stream;
  int peer; /* 0: the lower stage's leader, 1: the upper's */
};

/* Every communicator, for the watchdog: appended before the count grows. */
struct watched {
  ncclComm_t *comms;
  const char **names;
  int cap;
  atomic_int n;
};

static struct {
  const struct hx_rt_rank_config *cfg;
  ncclComm_t world, tp, seq; /* tp: NULL when tp == 1 */
  cudaStream_t seq_stream, grad_stream;
  struct link act_out, act_in, grad_out, grad_in;
  struct hx_rt_group_comms groups; /* MPI: the ids' broadcast and the stall reports */
  ncclComm_t *group_comms;         /* by the group's handle in `groups`; cfg->ngroups of them */
  float *wide;                     /* bf16 TP sums widened to fp32 */
  size_t wide_cap;
  cudaEvent_t recv_ready, recv_done, seq_done; /* for the blocking calls */
  struct watched watched;
} nc;

struct rt_send {
  cudaEvent_t ready, done;
  enum rt_dtype dt;
  long max_n;
};

struct rt_request {
  cudaEvent_t done;
  struct hx_rt_wait w;
};

static cudaStream_t compute(void) { return rt_cuda_stream(); }

static size_t bytes_of(long n, enum rt_dtype dt) { return (size_t)n * rt_dtype_bytes(dt); }

static cudaEvent_t new_event(void) {
  cudaEvent_t ev;
  HXC_CHECK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
  return ev;
}

static cudaStream_t new_stream(void) {
  cudaStream_t s;
  HXC_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  return s;
}

/* `to` runs what is queued after this only once `from`'s work so far is
 * done. */
static void order_after(cudaStream_t to, cudaStream_t from, cudaEvent_t ev) {
  HXC_CHECK(cudaEventRecord(ev, from));
  HXC_CHECK(cudaStreamWaitEvent(to, ev, 0));
}

/* ---- the watchdog's hooks (on its thread; never MPI) ---- */

static void watch(ncclComm_t comm, const char *name) {
  struct watched *w = &nc.watched;
  int n = atomic_load(&w->n);
  if (!comm)
    return;
  if (n == w->cap)
    hx_rt_fatal(HX_RT_EXIT_ERROR, "internal: more NCCL communicators than planned (%d)", w->cap);
  w->comms[n] = comm;
  w->names[n] = name;
  atomic_store(&w->n, n + 1);
}

static bool nccl_fault(char *msg, size_t size) {
  struct watched *w = &nc.watched;
  for (int i = 0, n = atomic_load(&w->n); i < n; i++) {
    ncclResult_t async = ncclSuccess;
    if (ncclCommGetAsyncError(w->comms[i], &async) != ncclSuccess)
      continue;
    if (async != ncclSuccess && async != ncclInProgress) {
      snprintf(msg, size,
               "NCCL: %s on the %s communicator (a peer rank died, hangs or lost its "
               "connection)",
               ncclGetErrorString(async), w->names[i]);
      return true;
    }
  }
  return false;
}

static void nccl_abort_all(void) {
  struct watched *w = &nc.watched;
  for (int i = 0, n = atomic_load(&w->n); i < n; i++)
    ncclCommAbort(w->comms[i]); /* the rank exits next: nothing to check */
}

/* ---- host waits that name their peer or group ---- */

static bool event_done(void *arg) {
  cudaError_t rc = cudaEventQuery(*(cudaEvent_t *)arg);
  if (rc == cudaErrorNotReady)
    return false;
  HXC_CHECK(rc);
  return true;
}

static void wait_event(cudaEvent_t ev, const struct hx_rt_wait *w) {
  hx_rt_wait_until(event_done, &ev, w);
}

/* ---- between stage leaders ---- */

static struct rt_send *nccl_send_new(long max_n, enum rt_dtype dt) {
  struct rt_send *s = hx_rt_calloc(1, sizeof *s);
  s->ready = new_event();
  s->done = new_event();
  s->dt = dt;
  s->max_n = max_n;
  return s;
}

/* The link that carries messages to (send) or from (receive) a world rank:
 * the executor's pipeline messages go to the next leader (activations) and
 * back to the previous one (gradients) only. */
static const struct link *link_to(int peer, bool send, const char *what) {
  const struct hx_rt_rank_config *c = nc.cfg;
  const struct link *l = NULL;
  if (peer == c->next_leader && peer >= 0)
    l = send ? &nc.act_out : &nc.grad_in;
  else if (peer == c->prev_leader && peer >= 0)
    l = send ? &nc.grad_out : &nc.act_in;
  if (!l || !l->comm)
    hx_rt_fatal(HX_RT_EXIT_ERROR,
                "%s: the NCCL transport carries pipeline messages between neighbouring stage "
                "leaders only, not to rank %d (run with HEXIC_TRANSPORT=mpi)",
                what, peer);
  return l;
}

static void nccl_send_start(struct rt_send *s, const void *buf, long n, int peer, int tag,
                            int micro_batch, const char *what) {
  (void)tag, (void)micro_batch; /* one direction per communicator: order is the match */
  if (n > s->max_n)
    hx_rt_fatal(HX_RT_EXIT_ERROR, "internal: %s of %ld elements exceeds its handle", what, n);
  const struct link *l = link_to(peer, true, what);
  order_after(l->stream, compute(), s->ready);
  HXC_CHECK(ncclSend(buf, bytes_of(n, s->dt), ncclUint8, l->peer, l->comm, l->stream));
  HXC_CHECK(cudaEventRecord(s->done, l->stream));
}

/* The buffer is rewritten by work queued on the compute stream after this,
 * which then runs after the send: the host need not wait. */
static void nccl_send_wait(struct rt_send *s, const char *what) {
  (void)what;
  HXC_CHECK(cudaStreamWaitEvent(compute(), s->done, 0));
}

static void nccl_recv(void *buf, long n, enum rt_dtype dt, int peer, int tag, int micro_batch,
                      const char *what) {
  (void)tag;
  const struct link *l = link_to(peer, false, what);
  order_after(l->stream, compute(), nc.recv_ready); /* buf's readers are done */
  HXC_CHECK(ncclRecv(buf, bytes_of(n, dt), ncclUint8, l->peer, l->comm, l->stream));
  HXC_CHECK(cudaEventRecord(nc.recv_done, l->stream));
  wait_event(nc.recv_done, &(struct hx_rt_wait){what, micro_batch, peer, 0, NULL});
  HXC_CHECK(cudaStreamWaitEvent(compute(), nc.recv_done, 0));
}

/* A receive posted ahead: on its link's stream after the compute stream's
 * work so far (buf's earlier readers; not the compute queued after it,
 * which it overlaps), its completion an event. The wait makes the compute
 * stream wait for that event only; the host waits too, through
 * hx_rt_wait_until naming the peer, so a stall is traced as on CPU, but the
 * compute queued before the wait keeps running on the device meanwhile. */
struct rt_recv {
  cudaEvent_t ready, done;
  enum rt_dtype dt;
  long max_n;
  int peer, micro_batch;
};

static struct rt_recv *nccl_recv_new(long max_n, enum rt_dtype dt) {
  struct rt_recv *r = hx_rt_calloc(1, sizeof *r);
  r->ready = new_event();
  r->done = new_event();
  r->dt = dt;
  r->max_n = max_n;
  r->peer = r->micro_batch = -1;
  return r;
}

static void nccl_recv_start(struct rt_recv *r, void *buf, long n, int peer, int tag,
                            int micro_batch, const char *what) {
  (void)tag; /* one direction per communicator: order is the match */
  if (n > r->max_n)
    hx_rt_fatal(HX_RT_EXIT_ERROR, "internal: %s of %ld elements exceeds its handle", what, n);
  const struct link *l = link_to(peer, false, what);
  order_after(l->stream, compute(), r->ready);
  HXC_CHECK(ncclRecv(buf, bytes_of(n, r->dt), ncclUint8, l->peer, l->comm, l->stream));
  HXC_CHECK(cudaEventRecord(r->done, l->stream));
  r->peer = peer;
  r->micro_batch = micro_batch;
}

static void nccl_recv_wait(struct rt_recv *r, const char *what) {
  wait_event(r->done, &(struct hx_rt_wait){what, r->micro_batch, r->peer, 0, NULL});
  HXC_CHECK(cudaStreamWaitEvent(compute(), r->done, 0));
}

/* ---- the TP group, on the compute stream ---- */

static void nccl_tp_broadcast(void *buf, long n, enum rt_dtype dt, int micro_batch,
                              const char *what) {
  (void)micro_batch, (void)what;
  const struct hx_rt_rank_config *c = nc.cfg;
  if (c->tp == 1)
    return;
  HXC_CHECK(ncclBroadcast(buf, buf, bytes_of(n, dt), ncclUint8, c->leader_tp_rank, nc.tp,
                          compute()));
}

/* Device memory, counted as communication buffers (rt_backend.h's kinds;
 * the plan prices it: passes/cost/cost_memory.c). */
static float *wide_of(long n) {
  size_t bytes = (size_t)n * sizeof(float);
  if (bytes > nc.wide_cap) {
    if (nc.wide) {
      rt_mem_uncount(nc.wide);
      HXC_CHECK(cudaFreeAsync(nc.wide, compute()));
    }
    HXC_CHECK(cudaMallocAsync((void **)&nc.wide, bytes, compute()));
    rt_mem_count(nc.wide, bytes, RT_MEM_COMM);
    nc.wide_cap = bytes;
  }
  return nc.wide;
}

static void nccl_tp_allreduce(void *buf, long n, enum rt_dtype dt, const char *what) {
  (void)what;
  if (nc.cfg->tp == 1)
    return;
  if (dt == RT_FP32) {
    HXC_CHECK(ncclAllReduce(buf, buf, (size_t)n, ncclFloat, ncclSum, nc.tp, compute()));
    return;
  }
  float *wide = wide_of(n);
  hxc_convert(wide, HXC_FP32, buf, HXC_BF16, n, compute());
  HXC_CHECK(ncclAllReduce(wide, wide, (size_t)n, ncclFloat, ncclSum, nc.tp, compute()));
  hxc_convert(buf, HXC_BF16, wide, HXC_FP32, n, compute());
}

/* ---- sequence parallelism: uneven row blocks in the TP group ---- */

/* Every TP member's counts[i] elements together. */
static long tp_total(const long *counts) {
  long total = 0;
  for (int i = 0; i < nc.cfg->tp; i++)
    total += counts[i];
  return total;
}

/* NCCL's ncclReduceScatter and ncclAllGather take equal blocks only, and
 * the rows of a micro-batch split unevenly (hxk_sp_rows), so each is one
 * rooted collective per member's block fused in one ncclGroupStart/End,
 * as ZeRO-1's uneven_start, but on the compute stream in order with the
 * layer, like tp_allreduce. Every member derives the same counts, so
 * skipping the empty blocks leaves the same calls on every rank. The sum
 * is fp32: bf16 blocks are widened on the device first and this member's
 * sum rounded once, as tp_allreduce does. */
static void nccl_tp_reduce_scatter(const void *send, void *recv, const long *counts,
                                   enum rt_dtype dt, const char *what) {
  (void)what;
  const struct hx_rt_rank_config *c = nc.cfg;
  long total = tp_total(counts), own = counts[c->tp_rank];
  if (c->tp == 1) {
    HXC_CHECK(cudaMemcpyAsync(recv, send, bytes_of(own, dt), cudaMemcpyDeviceToDevice,
                              compute()));
    return;
  }
  const float *from = send;
  float *to = recv;
  if (dt != RT_FP32) { /* [total] widened, then this member's [own] sum */
    float *wide = wide_of(total + own);
    hxc_convert(wide, HXC_FP32, send, HXC_BF16, total, compute());
    from = wide;
    to = wide + total;
  }
  HXC_CHECK(ncclGroupStart());
  size_t block = 0; /* elements before member i's block */
  for (int i = 0; i < c->tp; block += (size_t)counts[i], i++)
    if (counts[i] > 0)
      HXC_CHECK(ncclReduce(from + block, i == c->tp_rank ? to : NULL, (size_t)counts[i],
                           ncclFloat, ncclSum, i, nc.tp, compute()));
  HXC_CHECK(ncclGroupEnd());
  if (dt != RT_FP32)
    hxc_convert(recv, HXC_BF16, to, HXC_FP32, own, compute());
}

/* In place: member i's block goes out from it (bytes: a copy, any dtype). */
static void nccl_tp_allgather(void *buf, const long *counts, enum rt_dtype dt, const char *what) {
  (void)what;
  const struct hx_rt_rank_config *c = nc.cfg;
  if (c->tp == 1)
    return;
  HXC_CHECK(ncclGroupStart());
  size_t block = 0; /* bytes before member i's block */
  for (int i = 0; i < c->tp; block += bytes_of(counts[i], dt), i++)
    if (counts[i] > 0) {
      char *at = (char *)buf + block;
      HXC_CHECK(ncclBroadcast(at, at, bytes_of(counts[i], dt), ncclUint8, i, nc.tp, compute()));
    }
  HXC_CHECK(ncclGroupEnd());
}

/* ---- gradient-sync groups ---- */

/* Member index 0 makes the id; the group's MPI communicator carries it. */
static ncclComm_t init_over(MPI_Comm comm, int nranks, int index, const char *what) {
  ncclUniqueId id;
  if (index == 0)
    HXC_CHECK(ncclGetUniqueId(&id));
  hx_rt_mpi_check(MPI_Bcast(&id, (int)sizeof id, MPI_BYTE, 0, comm), what);
  ncclComm_t out;
  HXC_CHECK(ncclCommInitRank(&out, nranks, id, index));
  hx_rt_progress();
  return out;
}

static int index_in(const int *ranks, int n, int rank) {
  for (int i = 0; i < n; i++)
    if (ranks[i] == rank)
      return i;
  hx_rt_fatal(HX_RT_EXIT_ERROR, "internal: rank %d opens a group it is not in", rank);
}

static int nccl_group_open(const struct hx_rt_group *g) {
  int handle = hx_rt_group_comms_open(&nc.groups, g->ranks, g->nranks, g->id);
  if (handle >= nc.cfg->ngroups)
    hx_rt_fatal(HX_RT_EXIT_ERROR, "internal: more gradient-sync groups opened than the rank's %d",
                nc.cfg->ngroups);
  ncclComm_t comm = init_over(nc.groups.items[handle].comm, g->nranks,
                              index_in(g->ranks, g->nranks, nc.cfg->rank),
                              "share the NCCL id of a gradient-sync group");
  nc.group_comms[handle] = comm;
  watch(comm, "gradient-sync group");
  return handle;
}

static struct rt_request *nccl_group_allreduce_start(int group, float *buf, long n,
                                                     const char *what) {
  struct rt_request *r = hx_rt_calloc(1, sizeof *r);
  r->done = new_event();
  r->w = hx_rt_group_comms_wait(&nc.groups, group, what);
  order_after(nc.grad_stream, compute(), r->done); /* the pack is done */
  HXC_CHECK(ncclAllReduce(buf, buf, (size_t)n, ncclFloat, ncclSum, nc.group_comms[group],
                          nc.grad_stream));
  HXC_CHECK(cudaEventRecord(r->done, nc.grad_stream));
  return r;
}

static bool nccl_group_allreduce_test(struct rt_request *r) { return event_done(&r->done); }

static void nccl_group_allreduce_wait(struct rt_request *r) {
  wait_event(r->done, &r->w);
  HXC_CHECK(cudaStreamWaitEvent(compute(), r->done, 0));
  HXC_CHECK(cudaEventDestroy(r->done));
  free(r);
}

static void nccl_group_allreduce(int group, float *buf, long n, const char *what) {
  nccl_group_allreduce_wait(nccl_group_allreduce_start(group, buf, n, what));
}

/* ---- ZeRO-1: the uneven reduce-scatter and all-gather ---- */

/* One rooted collective per member's block (counts[i] floats of member i,
 * back to back, i its index in the group's ranks: its rank in the group's
 * communicator), fused in one ncclGroupStart/End on the gradient stream
 * after the compute stream's work so far (the pack). With send (the
 * reduce-scatter): block i of send is summed in fp32 into member i's recv
 * (ncclReduce rooted at i; recv is read on the root only and holds this
 * member's block alone; send and recv do not overlap). Without (the
 * all-gather, in place): block i of buf goes from member i to the others
 * (ncclBroadcast rooted at i). Every member derives the same counts from
 * the split rule (rt_exec_sync.c), so skipping the empty blocks leaves the
 * same sequence of calls on every rank, as NCCL needs. */
static struct rt_request *uneven_start(int group, const float *send, float *buf,
                                       const long *counts, const char *what) {
  ncclComm_t comm = nc.group_comms[group];
  int members = nc.groups.items[group].nranks, me = -1;
  HXC_CHECK(ncclCommUserRank(comm, &me));
  struct rt_request *r = hx_rt_calloc(1, sizeof *r);
  r->done = new_event();
  r->w = hx_rt_group_comms_wait(&nc.groups, group, what);
  order_after(nc.grad_stream, compute(), r->done); /* the pack is done */
  HXC_CHECK(ncclGroupStart());
  size_t at = 0; /* floats before member i's block */
  for (int i = 0; i < members; at += (size_t)counts[i], i++) {
    if (counts[i] <= 0)
      continue;
    if (send)
      HXC_CHECK(ncclReduce(send + at, i == me ? buf : NULL, (size_t)counts[i], ncclFloat, ncclSum,
                           i, comm, nc.grad_stream));
    else
      HXC_CHECK(ncclBroadcast(buf + at, buf + at, (size_t)counts[i], ncclFloat, i, comm,
                              nc.grad_stream));
  }
  HXC_CHECK(ncclGroupEnd());
  HXC_CHECK(cudaEventRecord(r->done, nc.grad_stream));
  return r;
}

static struct rt_request *nccl_group_reduce_scatter_start(int group, const float *send,
                                                          float *recv, const long *counts,
                                                          const char *what) {
  return uneven_start(group, send, recv, counts, what);
}

static struct rt_request *nccl_group_allgather_start(int group, float *buf, const long *counts,
                                                     const char *what) {
  return uneven_start(group, NULL, buf, counts, what);
}

/* ---- context and head parallelism (rtlib/seq/): grouped sends and receives ---- */

static void nccl_alltoallv(const int *peers, int npeers, const void *sendbuf, const long *send_n,
                           const long *send_off, void *recvbuf, const long *recv_n,
                           const long *recv_off, enum rt_dtype dt, const char *what) {
  cudaEvent_t ev = nc.seq_done; /* the call blocks: one event serves every call */
  order_after(nc.seq_stream, compute(), ev);
  HXC_CHECK(ncclGroupStart());
  for (int i = 0; i < npeers; i++)
    if (recv_n[i] > 0)
      HXC_CHECK(ncclRecv((char *)recvbuf + bytes_of(recv_off[i], dt), bytes_of(recv_n[i], dt),
                         ncclUint8, peers[i], nc.seq, nc.seq_stream));
  for (int i = 0; i < npeers; i++)
    if (send_n[i] > 0)
      HXC_CHECK(ncclSend((const char *)sendbuf + bytes_of(send_off[i], dt),
                         bytes_of(send_n[i], dt), ncclUint8, peers[i], nc.seq, nc.seq_stream));
  HXC_CHECK(ncclGroupEnd());
  HXC_CHECK(cudaEventRecord(ev, nc.seq_stream));
  wait_event(ev, &(struct hx_rt_wait){what, -1, -1, npeers, peers});
  HXC_CHECK(cudaStreamWaitEvent(compute(), ev, 0));
}

static void nccl_sendrecv(const void *sendbuf, long send_n, int dest, void *recvbuf, long recv_n,
                          int source, enum rt_dtype dt, const char *what) {
  int peers[2] = {dest, source};
  long send_ns[2] = {send_n, 0}, recv_ns[2] = {0, recv_n}, offs[2] = {0, 0};
  nccl_alltoallv(peers, 2, sendbuf, send_ns, offs, recvbuf, recv_ns, offs, dt, what);
}

static const struct rt_transport nccl_transport = {
    .name = "nccl",
    .send_new = nccl_send_new,
    .send_start = nccl_send_start,
    .send_wait = nccl_send_wait,
    .recv = nccl_recv,
    .recv_new = nccl_recv_new,
    .recv_start = nccl_recv_start,
    .recv_wait = nccl_recv_wait,
    .tp_broadcast = nccl_tp_broadcast,
    .tp_allreduce = nccl_tp_allreduce,
    .tp_reduce_scatter = nccl_tp_reduce_scatter,
    .tp_allgather = nccl_tp_allgather,
    .group_open = nccl_group_open,
    .group_allreduce = nccl_group_allreduce,
    .group_allreduce_start = nccl_group_allreduce_start,
    .group_allreduce_test = nccl_group_allreduce_test,
    .group_allreduce_wait = nccl_group_allreduce_wait,
    .group_reduce_scatter_start = nccl_group_reduce_scatter_start,
    .group_allgather_start = nccl_group_allgather_start,
    .sendrecv = nccl_sendrecv,
    .alltoallv = nccl_alltoallv,
};

/* ---- opening: the world, then the splits, the same calls on every rank ---- */

static ncclComm_t split(int color, int key, const char *name) {
  ncclComm_t out = NULL;
  HXC_CHECK(ncclCommSplit(nc.world, color, key, &out, NULL));
  hx_rt_progress();
  watch(out, name);
  return out;
}

/* The stage's leader: its TP contact, and on a HexiSeq stage of several units
 * (every unit has a contact) the one the plan names, as rt_exec_ops.c's
 * is_leader decides; the other contacts reach it through sendrecv. */
static bool is_leader(const struct hx_rt_rank_config *c) {
  return c->tp_rank == c->leader_tp_rank && (!c->seq || c->stage_leader == c->rank);
}

/* One round of leader pairs: those whose lower stage has the given parity.
 * A leader is in at most one pair of a round; the pair's colour is its
 * lower leader's world rank, which is index 0 in it. Returns the pair's
 * communicator (NULL: none this round) and sets *lower. */
static ncclComm_t pair_round(int parity, bool *lower, const char *name) {
  const struct hx_rt_rank_config *c = nc.cfg;
  int color = NCCL_SPLIT_NOCOLOR, key = 0;
  if (is_leader(c) && c->stage % 2 == parity && c->next_leader >= 0) {
    color = c->rank, key = 0, *lower = true;
  } else if (is_leader(c) && c->stage % 2 != parity && c->prev_leader >= 0) {
    color = c->prev_leader, key = 1, *lower = false;
  }
  return split(color, key, name);
}

/* Activations go up (lower stage to upper), gradients down: one
 * communicator per direction and pair, each with its own stream. */
static void open_links(void) {
  for (int parity = 0; parity < 2; parity++)
    for (int dir = 0; dir < 2; dir++) { /* 0: activations, 1: gradients */
      bool lower = false;
      ncclComm_t comm =
          pair_round(parity, &lower, dir == 0 ? "activation link" : "gradient link");
      if (!comm)
        continue;
      struct link *l = dir == 0 ? (lower ? &nc.act_out : &nc.act_in)
                                : (lower ? &nc.grad_in : &nc.grad_out);
      *l = (struct link){comm, new_stream(), lower ? 1 : 0};
    }
}

const struct rt_transport *rt_cuda_nccl_open(const struct hx_rt_rank_config *cfg,
                                             const struct rt_device *dev) {
  (void)dev; /* its stream: rt_cuda_stream() */
  nc.cfg = cfg;
  int planned = 8 + cfg->ngroups;
  nc.watched.comms = hx_rt_calloc((size_t)planned, sizeof *nc.watched.comms);
  nc.watched.names = hx_rt_calloc((size_t)planned, sizeof *nc.watched.names);
  nc.watched.cap = planned;
  nc.group_comms =
      hx_rt_calloc(cfg->ngroups > 0 ? (size_t)cfg->ngroups : 1, sizeof *nc.group_comms);
  nc.world = init_over(MPI_COMM_WORLD, cfg->world_size, cfg->rank, "share the NCCL id");
  watch(nc.world, "world");
  hx_rt_set_fault_hooks(nccl_fault, nccl_abort_all);
  nc.tp = split(cfg->tp > 1 ? cfg->tp_group[0] : NCCL_SPLIT_NOCOLOR, cfg->tp_rank,
                "tensor-parallel");
  open_links();
  nc.seq = split(0, cfg->rank, "context/head-parallel");
  nc.seq_stream = new_stream();
  nc.grad_stream = new_stream();
  nc.recv_ready = new_event();
  nc.recv_done = new_event();
  nc.seq_done = new_event();
  return &nccl_transport;
}

#else
/* Built without NCCL (no -DHEXIC_HAVE_NCCL): transport_select.c opens the
 * staged MPI transport, and this file holds only this declaration (C wants
 * one per translation unit). */
extern int hx_rt_nccl_missing;
#endif /* HEXIC_HAVE_NCCL */
