/* The CPU backend's transport: MPI straight on the device's buffers, which
 * are host memory. What the executor did before it had a transport
 * interface, moved behind it: messages of any size travel as chunks
 * (hx_rt_post_chunks), every wait names its peer or group
 * (hx_rt_wait_all), and the communicators are created as before. */
#include <stdlib.h>

#include "rtlib/rt_backend.h"
#include "rtlib/rt_init.h"

static struct {
  const struct hx_rt_rank_config *cfg;
  MPI_Comm tp; /* MPI_COMM_NULL when tp == 1 */
  struct hx_rt_group_comms groups;
  MPI_Comm seq; /* a duplicate of the world for rtlib/seq's exchanges */
} mpi;

struct rt_send {
  MPI_Request *reqs; /* one per chunk of the largest message */
  int nreqs;
  enum rt_dtype dt;
  int peer, micro_batch; /* of the message in flight, for the stall report */
};

/* Elements travel as what they are; only fp32 is summed. */
static MPI_Datatype mpi_type(enum rt_dtype dt) { return dt == RT_BF16 ? MPI_UINT16_T : MPI_FLOAT; }

static struct rt_send *mpi_send_new(long max_n, enum rt_dtype dt) {
  struct rt_send *s = hx_rt_calloc(1, sizeof *s);
  s->reqs = hx_rt_send_requests(max_n, &s->nreqs);
  s->dt = dt;
  s->peer = s->micro_batch = -1;
  return s;
}

static void mpi_send_start(struct rt_send *s, const void *buf, long n, int peer, int tag,
                           int micro_batch, const char *what) {
  hx_rt_send_check_ready(s->reqs, s->nreqs, n, what);
  hx_rt_post_chunks((void *)buf, n, mpi_type(s->dt), peer, tag, true, MPI_COMM_WORLD, s->reqs,
                    what);
  s->peer = peer;
  s->micro_batch = micro_batch;
}

static void mpi_send_wait(struct rt_send *s, const char *what) {
  struct hx_rt_wait w = {what, s->micro_batch, s->peer, 0, NULL};
  hx_rt_wait_all(s->nreqs, s->reqs, &w);
}

static void mpi_recv(void *buf, long n, enum rt_dtype dt, int peer, int tag, int micro_batch,
                     const char *what) {
  struct hx_rt_wait w = {what, micro_batch, peer, 0, NULL};
  hx_rt_recv_chunks(buf, n, mpi_type(dt), peer, tag, MPI_COMM_WORLD, &w);
}

/* A receive posted ahead: MPI_Irecv chunk by chunk straight into the
 * device's buffer (host memory), waited on by name. */
struct rt_recv {
  MPI_Request *reqs; /* one per chunk of the largest message */
  int nreqs;
  enum rt_dtype dt;
  int peer, micro_batch; /* of the receive posted, for the stall report */
};

static struct rt_recv *mpi_recv_new(long max_n, enum rt_dtype dt) {
  struct rt_recv *r = hx_rt_calloc(1, sizeof *r);
  r->reqs = hx_rt_send_requests(max_n, &r->nreqs);
  r->dt = dt;
  r->peer = r->micro_batch = -1;
  return r;
}

static void mpi_recv_start(struct rt_recv *r, void *buf, long n, int peer, int tag,
                           int micro_batch, const char *what) {
  hx_rt_send_check_ready(r->reqs, r->nreqs, n, what);
  hx_rt_post_chunks(buf, n, mpi_type(r->dt), peer, tag, false, MPI_COMM_WORLD, r->reqs, what);
  r->peer = peer;
  r->micro_batch = micro_batch;
}

static void mpi_recv_wait(struct rt_recv *r, const char *what) {
  struct hx_rt_wait w = {what, r->micro_batch, r->peer, 0, NULL};
  hx_rt_wait_all(r->nreqs, r->reqs, &w);
}

static void mpi_tp_broadcast(void *buf, long n, enum rt_dtype dt, int micro_batch,
                             const char *what) {
  const struct hx_rt_rank_config *c = mpi.cfg;
  if (c->tp == 1)
    return;
  struct hx_rt_wait w = {what, micro_batch, -1, c->tp, c->tp_group};
  hx_rt_bcast_chunks(buf, n, mpi_type(dt), c->leader_tp_rank, mpi.tp, &w);
}

static void mpi_tp_allreduce(void *buf, long n, enum rt_dtype dt, const char *what) {
  const struct hx_rt_rank_config *c = mpi.cfg;
  if (dt != RT_FP32)
    hx_rt_fatal(HX_RT_EXIT_ERROR, "internal: the MPI transport sums fp32 only");
  struct hx_rt_wait w = {what, -1, -1, c->tp, c->tp_group};
  hx_rt_allreduce_floats(buf, n, mpi.tp, &w);
}

/* Sequence parallelism: the ZeRO-1 helpers' uneven collectives (one call, or
 * block by block past MPI's int counts), waited on at once. */
static void mpi_tp_reduce_scatter(const void *send, void *recv, const long *counts,
                                  enum rt_dtype dt, const char *what) {
  const struct hx_rt_rank_config *c = mpi.cfg;
  if (dt != RT_FP32)
    hx_rt_fatal(HX_RT_EXIT_ERROR, "internal: the MPI transport sums fp32 only");
  struct hx_rt_wait w = {what, -1, -1, c->tp, c->tp_group};
  int nreqs = 0;
  MPI_Request *reqs =
      hx_rt_reduce_scatter_floats_start(send, recv, counts, c->tp, mpi.tp, &nreqs, what);
  hx_rt_wait_all(nreqs, reqs, &w);
  free(reqs);
}

static void mpi_tp_allgather(void *buf, const long *counts, enum rt_dtype dt, const char *what) {
  const struct hx_rt_rank_config *c = mpi.cfg;
  if (dt != RT_FP32)
    hx_rt_fatal(HX_RT_EXIT_ERROR, "internal: the MPI transport gathers fp32 only");
  struct hx_rt_wait w = {what, -1, -1, c->tp, c->tp_group};
  int nreqs = 0;
  MPI_Request *reqs = hx_rt_allgather_floats_start(buf, counts, c->tp, mpi.tp, &nreqs, what);
  hx_rt_wait_all(nreqs, reqs, &w);
  free(reqs);
}

/* Collective over the group; every member opens its groups in increasing
 * id order (rt_exec_sync.c), which makes overlapping groups safe. */
static int mpi_group_open(const struct hx_rt_group *g) {
  return hx_rt_group_comms_open(&mpi.groups, g->ranks, g->nranks, g->id);
}

static void mpi_group_allreduce(int group, float *buf, long n, const char *what) {
  struct hx_rt_wait w = hx_rt_group_comms_wait(&mpi.groups, group, what);
  hx_rt_allreduce_floats(buf, n, mpi.groups.items[group].comm, &w);
}

/* The overlapped form: MPI_Iallreduce chunk by chunk (the chunks of
 * hx_rt_allreduce_floats, so the same sums bit for bit), waited on by name. */
struct rt_request {
  MPI_Request *reqs;
  int nreqs;
  struct hx_rt_wait w;
};

static struct rt_request *mpi_group_allreduce_start(int group, float *buf, long n,
                                                    const char *what) {
  struct rt_request *r = hx_rt_calloc(1, sizeof *r);
  r->w = hx_rt_group_comms_wait(&mpi.groups, group, what);
  r->reqs = hx_rt_allreduce_floats_start(buf, n, mpi.groups.items[group].comm, &r->nreqs, what);
  return r;
}

static bool mpi_group_allreduce_test(struct rt_request *r) {
  int done = 0;
  hx_rt_mpi_check(MPI_Testall(r->nreqs, r->reqs, &done, MPI_STATUSES_IGNORE), r->w.what);
  return done != 0;
}

static void mpi_group_allreduce_wait(struct rt_request *r) {
  hx_rt_wait_all(r->nreqs, r->reqs, &r->w);
  free(r->reqs);
  free(r);
}

/* ZeRO-1: MPI_Ireduce_scatter / MPI_Iallgatherv with the uneven counts
 * (or block by block past MPI's int counts: rt_init.h), completed by the
 * all-reduce's test and wait. */
static struct rt_request *mpi_group_reduce_scatter_start(int group, const float *send,
                                                         float *recv, const long *counts,
                                                         const char *what) {
  struct rt_request *r = hx_rt_calloc(1, sizeof *r);
  const struct hx_rt_group_comm *g = &mpi.groups.items[group];
  r->w = hx_rt_group_comms_wait(&mpi.groups, group, what);
  r->reqs = hx_rt_reduce_scatter_floats_start(send, recv, counts, g->nranks, g->comm, &r->nreqs,
                                              what);
  return r;
}

static struct rt_request *mpi_group_allgather_start(int group, float *buf, const long *counts,
                                                    const char *what) {
  struct rt_request *r = hx_rt_calloc(1, sizeof *r);
  const struct hx_rt_group_comm *g = &mpi.groups.items[group];
  r->w = hx_rt_group_comms_wait(&mpi.groups, group, what);
  r->reqs = hx_rt_allgather_floats_start(buf, counts, g->nranks, g->comm, &r->nreqs, what);
  return r;
}

/* ---- context and head parallelism (rtlib/seq/) ---- */

static void mpi_sendrecv(const void *sendbuf, long send_n, int dest, void *recvbuf, long recv_n,
                         int source, enum rt_dtype dt, const char *what) {
  struct hx_rt_msg send = {(void *)sendbuf, send_n, dest}, recv = {recvbuf, recv_n, source};
  int peers[2] = {source, dest};
  struct hx_rt_wait w = {what, -1, -1, 2, peers};
  hx_rt_exchange(&recv, 1, &send, 1, mpi_type(dt), 0, mpi.seq, &w);
}

static void mpi_alltoallv(const int *peers, int npeers, const void *sendbuf, const long *send_n,
                          const long *send_off, void *recvbuf, const long *recv_n,
                          const long *recv_off, enum rt_dtype dt, const char *what) {
  struct hx_rt_msg *msgs = hx_rt_calloc(2 * (size_t)npeers, sizeof *msgs);
  size_t bytes = rt_dtype_bytes(dt);
  for (int i = 0; i < npeers; i++) {
    msgs[i] =
        (struct hx_rt_msg){(char *)recvbuf + (size_t)recv_off[i] * bytes, recv_n[i], peers[i]};
    msgs[npeers + i] =
        (struct hx_rt_msg){(char *)sendbuf + (size_t)send_off[i] * bytes, send_n[i], peers[i]};
  }
  struct hx_rt_wait w = {what, -1, -1, npeers, peers};
  hx_rt_exchange(msgs, npeers, msgs + npeers, npeers, mpi_type(dt), 0, mpi.seq, &w);
  free(msgs);
}

static const struct rt_transport mpi_transport = {
    .name = "mpi",
    .send_new = mpi_send_new,
    .send_start = mpi_send_start,
    .send_wait = mpi_send_wait,
    .recv = mpi_recv,
    .recv_new = mpi_recv_new,
    .recv_start = mpi_recv_start,
    .recv_wait = mpi_recv_wait,
    .tp_broadcast = mpi_tp_broadcast,
    .tp_allreduce = mpi_tp_allreduce,
    .tp_reduce_scatter = mpi_tp_reduce_scatter,
    .tp_allgather = mpi_tp_allgather,
    .group_open = mpi_group_open,
    .group_allreduce = mpi_group_allreduce,
    .group_allreduce_start = mpi_group_allreduce_start,
    .group_allreduce_test = mpi_group_allreduce_test,
    .group_allreduce_wait = mpi_group_allreduce_wait,
    .group_reduce_scatter_start = mpi_group_reduce_scatter_start,
    .group_allgather_start = mpi_group_allgather_start,
    .sendrecv = mpi_sendrecv,
    .alltoallv = mpi_alltoallv,
};

const struct rt_transport *rt_transport_open(const struct hx_rt_rank_config *cfg,
                                             const struct rt_device *dev) {
  (void)dev; /* host memory: MPI reads and writes it directly */
  mpi.cfg = cfg;
  mpi.tp = hx_rt_split_comm(cfg->tp_group[0], cfg->tp_rank, cfg->tp,
                            "create the tensor-parallel communicator");
  hx_rt_mpi_check(MPI_Comm_dup(MPI_COMM_WORLD, &mpi.seq),
                  "create the context/head-parallel communicator");
  return &mpi_transport;
}
