/* The CUDA backend's transport for part 1: MPI on device buffers staged
 * through pinned host memory. Slower than NCCL, but it works for several
 * ranks on one GPU (NCCL refuses two ranks of one communicator on the same
 * GPU), which is how the multi-rank plans are tested on a one-GPU machine.
 *
 * - A send copies the device buffer into its handle's pinned buffer (after
 *   the work queued before it on the device's stream) and posts MPI sends
 *   from there, so the device buffer is free at once and the send stays
 *   non-blocking.
 * - A receive or broadcast lands in a pinned staging buffer of the whole
 *   message (the receiver must post the chunks the sender sent) and is
 *   copied up.
 * - An all-reduce goes in pieces through the staging buffer, at most
 *   HEXIC_STAGE_BYTES (default 64 MiB) at a time, so gradient buffers of any
 *   size need no pinned copy of their own; bf16 elements are summed in fp32
 *   on the host and rounded once. HEXIC_STAGE_BYTES must be the same on
 *   every rank: it sets the pieces, and each piece is one collective. */
#include <errno.h>
#include <stdlib.h>

#include <cuda_runtime_api.h>

#include "kernels/cuda/cuda_check.h"
#include "rtlib/cuda/cuda_backend.h"
#include "rtlib/rt_init.h"

#define DEFAULT_STAGE_BYTES (INT64_C(64) << 20)

static struct {
  const struct hx_rt_rank_config *cfg;
  MPI_Comm tp; /* MPI_COMM_NULL when tp == 1 */
  struct hx_rt_group_comms groups;
  MPI_Comm seq; /* a duplicate of the world for rtlib/seq's exchanges */
  void *stage;  /* pinned; grows to the largest message or piece */
  size_t stage_cap;
  int64_t stage_bytes; /* HEXIC_STAGE_BYTES */
} st;

struct rt_send {
  void *host; /* pinned copy of the message in flight */
  MPI_Request *reqs;
  int nreqs;
  enum rt_dtype dt;
  int peer, micro_batch;
};

static void *pinned(size_t bytes) {
  void *p = NULL;
  HXC_CHECK(cudaMallocHost(&p, bytes ? bytes : 1));
  return p;
}

static void *stage_of(size_t bytes) {
  if (bytes > st.stage_cap) {
    if (st.stage)
      HXC_CHECK(cudaFreeHost(st.stage));
    st.stage = pinned(bytes);
    st.stage_cap = bytes;
  }
  return st.stage;
}

/* Copies after the work queued on the device's stream, and returns when the
 * bytes are there. */
static void to_host(void *host, const void *dev, size_t bytes) {
  HXC_CHECK(cudaMemcpyAsync(host, dev, bytes, cudaMemcpyDeviceToHost, rt_cuda_stream()));
  HXC_CHECK(cudaStreamSynchronize(rt_cuda_stream()));
}

static void to_device(void *dev, const void *host, size_t bytes) {
  HXC_CHECK(cudaMemcpyAsync(dev, host, bytes, cudaMemcpyHostToDevice, rt_cuda_stream()));
  HXC_CHECK(cudaStreamSynchronize(rt_cuda_stream()));
}

static MPI_Datatype mpi_type(enum rt_dtype dt) { return dt == RT_BF16 ? MPI_UINT16_T : MPI_FLOAT; }

static size_t bytes_of(long n, enum rt_dtype dt) { return (size_t)n * rt_dtype_bytes(dt); }

/* ---- between stage leaders ---- */

static struct rt_send *staged_send_new(long max_n, enum rt_dtype dt) {
  struct rt_send *s = hx_rt_calloc(1, sizeof *s);
  s->host = pinned(bytes_of(max_n, dt));
  s->reqs = hx_rt_send_requests(max_n, &s->nreqs);
  s->dt = dt;
  s->peer = s->micro_batch = -1;
  return s;
}

static void staged_send_start(struct rt_send *s, const void *buf, long n, int peer, int tag,
                              int micro_batch, const char *what) {
  hx_rt_send_check_ready(s->reqs, s->nreqs, n, what); /* before the pinned copy is rewritten */
  to_host(s->host, buf, bytes_of(n, s->dt));
  hx_rt_post_chunks(s->host, n, mpi_type(s->dt), peer, tag, true, MPI_COMM_WORLD, s->reqs, what);
  s->peer = peer;
  s->micro_batch = micro_batch;
}

static void staged_send_wait(struct rt_send *s, const char *what) {
  struct hx_rt_wait w = {what, s->micro_batch, s->peer, 0, NULL};
  hx_rt_wait_all(s->nreqs, s->reqs, &w);
}

static void staged_recv(void *buf, long n, enum rt_dtype dt, int peer, int tag, int micro_batch,
                        const char *what) {
  void *host = stage_of(bytes_of(n, dt));
  struct hx_rt_wait w = {what, micro_batch, peer, 0, NULL};
  hx_rt_recv_chunks(host, n, mpi_type(dt), peer, tag, MPI_COMM_WORLD, &w);
  to_device(buf, host, bytes_of(n, dt));
}

/* A receive posted ahead lands in its handle's own pinned buffer (the
 * staging buffer is the blocking calls'), and is copied up once waited. */
struct rt_recv {
  void *host;
  MPI_Request *reqs;
  int nreqs;
  enum rt_dtype dt;
  void *dev; /* where the message goes */
  long n;
  int peer, micro_batch;
};

static struct rt_recv *staged_recv_new(long max_n, enum rt_dtype dt) {
  struct rt_recv *r = hx_rt_calloc(1, sizeof *r);
  r->host = pinned(bytes_of(max_n, dt));
  r->reqs = hx_rt_send_requests(max_n, &r->nreqs);
  r->dt = dt;
  r->peer = r->micro_batch = -1;
  return r;
}

static void staged_recv_start(struct rt_recv *r, void *buf, long n, int peer, int tag,
                              int micro_batch, const char *what) {
  hx_rt_send_check_ready(r->reqs, r->nreqs, n, what); /* before the pinned copy is rewritten */
  hx_rt_post_chunks(r->host, n, mpi_type(r->dt), peer, tag, false, MPI_COMM_WORLD, r->reqs, what);
  r->dev = buf;
  r->n = n;
  r->peer = peer;
  r->micro_batch = micro_batch;
}

/* The copy up is queued after the work before it on the device's stream:
 * buf's earlier readers are done by then. */
static void staged_recv_wait(struct rt_recv *r, const char *what) {
  struct hx_rt_wait w = {what, r->micro_batch, r->peer, 0, NULL};
  hx_rt_wait_all(r->nreqs, r->reqs, &w);
  to_device(r->dev, r->host, bytes_of(r->n, r->dt));
}

/* ---- collectives ---- */

static void staged_tp_broadcast(void *buf, long n, enum rt_dtype dt, int micro_batch,
                                const char *what) {
  const struct hx_rt_rank_config *c = st.cfg;
  if (c->tp == 1)
    return;
  bool root = c->tp_rank == c->leader_tp_rank;
  void *host = stage_of(bytes_of(n, dt));
  if (root)
    to_host(host, buf, bytes_of(n, dt));
  struct hx_rt_wait w = {what, micro_batch, -1, c->tp, c->tp_group};
  hx_rt_bcast_chunks(host, n, mpi_type(dt), c->leader_tp_rank, st.tp, &w);
  if (!root)
    to_device(buf, host, bytes_of(n, dt));
}

/* buf[0..n) of dt summed over comm, piece by piece through the staging
 * buffer: fp32 pieces as they are, bf16 ones widened to fp32 on the host. */
static void staged_allreduce(void *buf, long n, enum rt_dtype dt, MPI_Comm comm,
                             const struct hx_rt_wait *w) {
  int64_t per_elem = (int64_t)sizeof(float) + (dt == RT_BF16 ? 2 : 0);
  int64_t piece = rt_stage_piece_elems(st.stage_bytes, per_elem);
  int64_t most = n < piece ? n : piece;
  float *sum = stage_of((size_t)(most * per_elem));
  uint16_t *narrow = (uint16_t *)(sum + most); /* bf16 only */
  for (int64_t k = 0, nk = hx_rt_chunk_count(n, piece); k < nk; k++) {
    int64_t off;
    int count;
    hx_rt_chunk_at(n, piece, k, &off, &count);
    char *at = (char *)buf + (size_t)off * rt_dtype_bytes(dt);
    if (dt == RT_BF16) {
      to_host(narrow, at, bytes_of(count, dt));
      rt_f32_from_bf16(sum, narrow, count);
    } else {
      to_host(sum, at, bytes_of(count, dt));
    }
    hx_rt_allreduce_floats(sum, count, comm, w);
    if (dt == RT_BF16) {
      rt_bf16_from_f32(narrow, sum, count);
      to_device(at, narrow, bytes_of(count, dt));
    } else {
      to_device(at, sum, bytes_of(count, dt));
    }
  }
}

static void staged_tp_allreduce(void *buf, long n, enum rt_dtype dt, const char *what) {
  const struct hx_rt_rank_config *c = st.cfg;
  struct hx_rt_wait w = {what, -1, -1, c->tp, c->tp_group};
  staged_allreduce(buf, n, dt, st.tp, &w);
}

/* ---- sequence parallelism: uneven row blocks in the TP group ----
 * The whole [n, width] tensor through the staging buffer (an activation,
 * not a gradient bucket), on rt_init's uneven MPI collectives (ZeRO-1's),
 * in fp32 on the host: bf16 blocks widened there, this member's sum rounded
 * once (as staged_allreduce), and a gathered bf16 block widened and
 * narrowed back, which gives its bits back exactly. */

/* counts[i] elements of TP member i, back to back: where this member's
 * block starts, and every block's total. */
static long tp_block_at(const long *counts, long *total) {
  const struct hx_rt_rank_config *c = st.cfg;
  long at = 0;
  *total = 0;
  for (int i = 0; i < c->tp; i++) {
    at += i < c->tp_rank ? counts[i] : 0;
    *total += counts[i];
  }
  return at;
}

/* n device elements of dt into floats on the host (narrow: n uint16s of
 * room for bf16), and back. */
static void floats_to_host(float *host, uint16_t *narrow, const void *dev, long n,
                           enum rt_dtype dt) {
  if (dt == RT_FP32) {
    to_host(host, dev, bytes_of(n, dt));
    return;
  }
  to_host(narrow, dev, bytes_of(n, dt));
  rt_f32_from_bf16(host, narrow, n);
}

static void floats_to_device(void *dev, const float *host, uint16_t *narrow, long n,
                             enum rt_dtype dt) {
  if (dt == RT_FP32) {
    to_device(dev, host, bytes_of(n, dt));
    return;
  }
  rt_bf16_from_f32(narrow, host, n);
  to_device(dev, narrow, bytes_of(n, dt));
}

/* The staging buffer as floats [total + extra] and, for bf16, uint16s
 * [total] behind them. */
static float *tp_stage(long total, long extra, enum rt_dtype dt, uint16_t **narrow) {
  size_t floats = (size_t)(total + extra) * sizeof(float);
  char *host = stage_of(floats + (dt == RT_FP32 ? 0 : (size_t)total * sizeof(uint16_t)));
  *narrow = (uint16_t *)(host + floats);
  return (float *)host;
}

static void staged_tp_reduce_scatter(const void *send, void *recv, const long *counts,
                                     enum rt_dtype dt, const char *what) {
  const struct hx_rt_rank_config *c = st.cfg;
  long total = 0, own = counts[c->tp_rank];
  tp_block_at(counts, &total);
  if (c->tp == 1) {
    HXC_CHECK(cudaMemcpyAsync(recv, send, bytes_of(own, dt), cudaMemcpyDeviceToDevice,
                              rt_cuda_stream()));
    return;
  }
  uint16_t *narrow = NULL;
  float *host = tp_stage(total, own, dt, &narrow);
  floats_to_host(host, narrow, send, total, dt);
  struct hx_rt_wait w = {what, -1, -1, c->tp, c->tp_group};
  int nreqs = 0;
  MPI_Request *reqs = hx_rt_reduce_scatter_floats_start(host, host + total, counts, c->tp, st.tp,
                                                        &nreqs, what);
  hx_rt_wait_all(nreqs, reqs, &w);
  free(reqs);
  floats_to_device(recv, host + total, narrow, own, dt);
}

static void staged_tp_allgather(void *buf, const long *counts, enum rt_dtype dt,
                                const char *what) {
  const struct hx_rt_rank_config *c = st.cfg;
  if (c->tp == 1)
    return;
  long total = 0, at = tp_block_at(counts, &total), own = counts[c->tp_rank];
  uint16_t *narrow = NULL;
  float *host = tp_stage(total, 0, dt, &narrow);
  floats_to_host(host + at, narrow, (const char *)buf + bytes_of(at, dt), own, dt);
  struct hx_rt_wait w = {what, -1, -1, c->tp, c->tp_group};
  int nreqs = 0;
  MPI_Request *reqs = hx_rt_allgather_floats_start(host, counts, c->tp, st.tp, &nreqs, what);
  hx_rt_wait_all(nreqs, reqs, &w);
  free(reqs);
  floats_to_device(buf, host, narrow, total, dt);
}

/* Collective over the group; every member opens its groups in increasing
 * id order, which makes overlapping groups safe. */
static int staged_group_open(const struct hx_rt_group *g) {
  return hx_rt_group_comms_open(&st.groups, g->ranks, g->nranks, g->id);
}

static void staged_group_allreduce(int group, float *buf, long n, const char *what) {
  struct hx_rt_wait w = hx_rt_group_comms_wait(&st.groups, group, what);
  staged_allreduce(buf, n, RT_FP32, st.groups.items[group].comm, &w);
}

/* The overlapped form does the whole all-reduce in wait: start only notes
 * it. Staging blocks the host twice per piece (the copies down and up
 * synchronise the device's one stream) and shares one staging buffer, so
 * run during the backward it would stall the backward rather than hide
 * behind it; this transport is for ranks sharing a GPU, where nothing
 * overlaps anyway. The executor waits in its one global order, so these
 * blocking all-reduces keep the deadlock-free order of the blocking path. */
enum request_kind { ALLREDUCE, REDUCE_SCATTER, ALLGATHER };

struct rt_request {
  int group;
  float *buf; /* summed or gathered in place; the reduce-scatter's recv */
  long n;     /* the all-reduce's floats */
  const char *what;
  enum request_kind kind;
  const float *send;  /* the reduce-scatter's blocks */
  const long *counts; /* ZeRO-1: floats per member, back to back */
};

static struct rt_request *staged_group_allreduce_start(int group, float *buf, long n,
                                                       const char *what) {
  struct rt_request *r = hx_rt_calloc(1, sizeof *r);
  *r = (struct rt_request){group, buf, n, what, ALLREDUCE, NULL, NULL};
  return r;
}

/* ZeRO-1's collectives, done in wait like the all-reduce (the executor
 * keeps the counts until then): the whole bucket through the staging
 * buffer, then rt_init's uneven MPI collectives on the host copy. */
static struct rt_request *staged_group_reduce_scatter_start(int group, const float *send,
                                                            float *recv, const long *counts,
                                                            const char *what) {
  struct rt_request *r = hx_rt_calloc(1, sizeof *r);
  *r = (struct rt_request){group, recv, 0, what, REDUCE_SCATTER, send, counts};
  return r;
}

static struct rt_request *staged_group_allgather_start(int group, float *buf, const long *counts,
                                                       const char *what) {
  struct rt_request *r = hx_rt_calloc(1, sizeof *r);
  *r = (struct rt_request){group, buf, 0, what, ALLGATHER, NULL, counts};
  return r;
}

static void staged_uneven(const struct rt_request *r) {
  const struct hx_rt_group_comm *g = &st.groups.items[r->group];
  struct hx_rt_wait w = hx_rt_group_comms_wait(&st.groups, r->group, r->what);
  long total = 0, at = 0; /* at: where this member's block starts */
  int me = 0;
  hx_rt_mpi_check(MPI_Comm_rank(g->comm, &me), r->what);
  for (int i = 0; i < g->nranks; i++) {
    at += i < me ? r->counts[i] : 0;
    total += r->counts[i];
  }
  long own = r->counts[me];
  float *host = stage_of((size_t)(total + own) * sizeof(float));
  int nreqs = 0;
  MPI_Request *reqs;
  if (r->kind == REDUCE_SCATTER) {
    to_host(host, r->send, (size_t)total * sizeof(float));
    reqs = hx_rt_reduce_scatter_floats_start(host, host + total, r->counts, g->nranks, g->comm,
                                             &nreqs, r->what);
  } else { /* only this member's block goes out; the others arrive */
    to_host(host + at, r->buf + at, (size_t)own * sizeof(float));
    reqs = hx_rt_allgather_floats_start(host, r->counts, g->nranks, g->comm, &nreqs, r->what);
  }
  hx_rt_wait_all(nreqs, reqs, &w);
  free(reqs);
  if (r->kind == REDUCE_SCATTER)
    to_device(r->buf, host + total, (size_t)own * sizeof(float));
  else
    to_device(r->buf, host, (size_t)total * sizeof(float));
}

static bool staged_group_allreduce_test(struct rt_request *r) {
  (void)r;
  return false;
}

static void staged_group_allreduce_wait(struct rt_request *r) {
  if (r->kind == ALLREDUCE)
    staged_group_allreduce(r->group, r->buf, r->n, r->what);
  else
    staged_uneven(r);
  free(r);
}

/* ---- context and head parallelism (rtlib/seq/) ----
 * The whole exchange goes through the staging buffer: what is sent is
 * copied down first, the receives land behind it and are copied up one
 * message at a time (the gaps between them in the device buffer stay as
 * they were). */

static int64_t extent_of(const long *n, const long *off, int count) {
  int64_t most = 0;
  for (int i = 0; i < count; i++)
    if (n[i] > 0 && off[i] + n[i] > most)
      most = off[i] + n[i];
  return most;
}

static void staged_alltoallv(const int *peers, int npeers, const void *sendbuf, const long *send_n,
                             const long *send_off, void *recvbuf, const long *recv_n,
                             const long *recv_off, enum rt_dtype dt, const char *what) {
  int64_t send_extent = extent_of(send_n, send_off, npeers);
  int64_t recv_extent = extent_of(recv_n, recv_off, npeers);
  char *host_send = stage_of(bytes_of((long)(send_extent + recv_extent), dt));
  char *host_recv = host_send + bytes_of((long)send_extent, dt);
  if (send_extent > 0)
    to_host(host_send, sendbuf, bytes_of((long)send_extent, dt));
  struct hx_rt_msg *msgs = hx_rt_calloc(2 * (size_t)npeers, sizeof *msgs);
  for (int i = 0; i < npeers; i++) {
    msgs[i] = (struct hx_rt_msg){host_recv + bytes_of(recv_off[i], dt), recv_n[i], peers[i]};
    msgs[npeers + i] =
        (struct hx_rt_msg){host_send + bytes_of(send_off[i], dt), send_n[i], peers[i]};
  }
  struct hx_rt_wait w = {what, -1, -1, npeers, peers};
  hx_rt_exchange(msgs, npeers, msgs + npeers, npeers, mpi_type(dt), 0, st.seq, &w);
  free(msgs);
  for (int i = 0; i < npeers; i++)
    if (recv_n[i] > 0)
      to_device((char *)recvbuf + bytes_of(recv_off[i], dt), host_recv + bytes_of(recv_off[i], dt),
                bytes_of(recv_n[i], dt));
}

static void staged_sendrecv(const void *sendbuf, long send_n, int dest, void *recvbuf, long recv_n,
                            int source, enum rt_dtype dt, const char *what) {
  int peers[2] = {dest, source};
  long send_ns[2] = {send_n, 0}, recv_ns[2] = {0, recv_n}, offs[2] = {0, 0};
  staged_alltoallv(peers, 2, sendbuf, send_ns, offs, recvbuf, recv_ns, offs, dt, what);
}

static const struct rt_transport staged_transport = {
    .name = "mpi-staged",
    .send_new = staged_send_new,
    .send_start = staged_send_start,
    .send_wait = staged_send_wait,
    .recv = staged_recv,
    .recv_new = staged_recv_new,
    .recv_start = staged_recv_start,
    .recv_wait = staged_recv_wait,
    .tp_broadcast = staged_tp_broadcast,
    .tp_allreduce = staged_tp_allreduce,
    .tp_reduce_scatter = staged_tp_reduce_scatter,
    .tp_allgather = staged_tp_allgather,
    .group_open = staged_group_open,
    .group_allreduce = staged_group_allreduce,
    .group_allreduce_start = staged_group_allreduce_start,
    .group_allreduce_test = staged_group_allreduce_test,
    .group_allreduce_wait = staged_group_allreduce_wait,
    .group_reduce_scatter_start = staged_group_reduce_scatter_start,
    .group_allgather_start = staged_group_allgather_start,
    .sendrecv = staged_sendrecv,
    .alltoallv = staged_alltoallv,
};

static int64_t stage_bytes_from_env(void) {
  const char *s = getenv("HEXIC_STAGE_BYTES");
  if (!s || !*s)
    return DEFAULT_STAGE_BYTES;
  char *end = NULL;
  errno = 0;
  long long v = strtoll(s, &end, 10);
  if (errno || *end || v < 16)
    hx_rt_fatal(HX_RT_EXIT_ERROR, "HEXIC_STAGE_BYTES='%s' is not a byte count of at least 16", s);
  return v;
}

const struct rt_transport *rt_cuda_staged_open(const struct hx_rt_rank_config *cfg,
                                               const struct rt_device *dev) {
  (void)dev; /* its stream: rt_cuda_stream() */
  st.cfg = cfg;
  st.stage_bytes = stage_bytes_from_env();
  st.tp = hx_rt_split_comm(cfg->tp_group[0], cfg->tp_rank, cfg->tp,
                           "create the tensor-parallel communicator");
  hx_rt_mpi_check(MPI_Comm_dup(MPI_COMM_WORLD, &st.seq),
                  "create the context/head-parallel communicator");
  return &staged_transport;
}
