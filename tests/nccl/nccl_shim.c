/* A test-only NCCL over MPI: the calls rtlib/cuda/transport_nccl.c makes,
 * with NCCL's semantics, on host memory, so that the NCCL transport runs on
 * a machine without a GPU (tests/nccl/emulate_nccl.sh links it with the
 * host CUDA emulator of tests/gpu/emulate/ and tests/rtlib/emu_backend_extra.cpp).
 *
 * Model. A communicator is an MPI communicator of its members in NCCL rank
 * order (data: the transfers) and a duplicate (shadow: the op descriptors
 * and ncclCommSplit). Every op is posted as MPI non-blocking calls where
 * NCCL would enqueue it: at the call, or at the outermost ncclGroupEnd for
 * the ops inside a group (so a send and a receive of one group never wait
 * for each other). Where it completes depends on its stream:
 *   - a stream the emulator marks as a side stream (hx_emu_stream_side:
 *     made by cudaStreamCreateWithFlags) runs its ops in the background,
 *     completed when the host asks through an event or a synchronize
 *     (hx_nccl_shim_mark / hx_nccl_shim_reached, called by the emulator's
 *     cudaEventRecord / cudaEventQuery / cudaStreamWaitEvent);
 *   - any other stream (the compute stream, whose kernels the emulator runs
 *     at their launch) completes the op before the call (or the group end)
 *     returns, as the next kernel on it would see it.
 * Sends copy their buffer when posted (on the emulator all earlier work of
 * every stream is done by then, which is when NCCL would read it) and are
 * synchronous sends (MPI_Issend): one completes when its receive exists.
 *
 * What NCCL would deadlock on, reported instead of hanging (a message on
 * stderr naming the communicator, the ranks and the op numbers, and exit
 * status 3):
 *   - collectives (and splits) of one communicator called in different
 *     orders, or with different counts, types, operations or roots: before
 *     its data moves, every collective sends its descriptor (kind, count,
 *     type, op, root, its number on the communicator) to every other
 *     member on the shadow communicator, and each member compares;
 *   - a member that never calls the collective, a send with no matching
 *     receive, a receive with no matching send, and a send and receive of
 *     different sizes: every wait is bounded (HEXIC_NCCL_SHIM_TIMEOUT_S,
 *     default 300 s), then names what is missing.
 * Not modelled: NCCL's own reduction order (MPI's), speed, bf16/fp16 sums. */
#include <nccl.h>

#include <cuda_runtime_api.h>
#include <mpi.h>

#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define SHIM_MAGIC 0x6e63636cu /* "nccl" */
#define TAG_BOOT 7301          /* + serial % 1000: a member's registration */
#define TAG_LIST 8301          /* + serial % 1000: the member list back */
#define TAG_P2P 0              /* on a communicator's data communicator */
#define TAG_DESC 0             /* on its shadow communicator */

/* The emulator's side streams (tests/rtlib/emu_backend_extra.cpp); absent,
 * every stream completes its ops at the call. */
extern int hx_emu_stream_side(cudaStream_t stream) __attribute__((weak));

struct shim_id {
  uint32_t magic;
  int32_t creator; /* world rank */
  uint32_t serial; /* the creator's ids so far */
};

enum kind { OP_SEND, OP_RECV, OP_ALLREDUCE, OP_BROADCAST, OP_REDUCE, OP_SPLIT };
static const char *const kind_names[] = {"Send",      "Recv",   "AllReduce",
                                         "Broadcast", "Reduce", "CommSplit"};

/* What every member of a collective must agree on. */
struct desc {
  int32_t kind, dtype, redop, root;
  uint64_t count, seq;
};

struct ncclComm {
  MPI_Comm data, shadow;
  int rank, size;
  int *world_of; /* world rank by comm rank */
  char name[96];
  uint64_t coll_seq;             /* collectives (and splits) called */
  uint64_t *send_seq, *recv_seq; /* per peer */
  atomic_int async_err, aborted;
};

enum state { QUEUED, DESC_POSTED, DATA_POSTED, DONE };

struct op {
  struct op *next;
  ncclComm_t comm;
  enum kind kind;
  enum state state;
  cudaStream_t stream;
  bool side;
  uint64_t ticket, seq;
  const void *sendbuf;
  void *recvbuf;
  size_t count;
  ncclDataType_t dt;
  ncclRedOp_t red;
  int root, peer;
  void *copy;
  struct desc mine, *theirs;
  MPI_Request *desc_reqs; /* 2 (size - 1): sends, then receives */
  MPI_Request data_req;
  double posted_at;
};

static struct {
  struct op *head, *tail;        /* posted, not yet done, in posting order */
  struct op *group, *group_tail; /* inside ncclGroupStart/End */
  int depth;
  uint64_t tickets;
  uint32_t serial;
  double timeout;
} shim;

/* ---- small things ---- */

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static double timeout_s(void) {
  if (shim.timeout <= 0) {
    const char *e = getenv("HEXIC_NCCL_SHIM_TIMEOUT_S");
    shim.timeout = e && atof(e) > 0 ? atof(e) : 300;
  }
  return shim.timeout;
}

static int world_rank(void) {
  int r = -1;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

__attribute__((noreturn, format(printf, 1, 2))) static void die(const char *fmt, ...) {
  char msg[2048];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  fprintf(stderr, "nccl-shim: rank %d: %s\n", world_rank(), msg);
  fflush(stderr);
  exit(3);
}

static void *xcalloc(size_t n, size_t size) {
  void *p = calloc(n ? n : 1, size ? size : 1);
  if (!p)
    die("out of memory");
  return p;
}

static void pause_a_little(int *spins) {
  struct timespec ts = {0, *spins < 100 ? 10000 : 500000}; /* 10 us, then 0.5 ms */
  (*spins)++;
  nanosleep(&ts, NULL);
}

static size_t type_bytes(ncclDataType_t dt) {
  switch (dt) {
  case ncclInt8:
  case ncclUint8:
  case ncclFloat8e4m3:
  case ncclFloat8e5m2:
    return 1;
  case ncclFloat16:
  case ncclBfloat16:
    return 2;
  case ncclInt32:
  case ncclUint32:
  case ncclFloat32:
    return 4;
  case ncclInt64:
  case ncclUint64:
  case ncclFloat64:
    return 8;
  default:
    return 0;
  }
}

static const char *type_name(int dt) {
  static const char *const names[] = {"int8",    "uint8",    "int32",      "uint32",
                                      "int64",   "uint64",   "float16",    "float32",
                                      "float64", "bfloat16", "float8e4m3", "float8e5m2"};
  return dt >= 0 && dt < (int)(sizeof names / sizeof *names) ? names[dt] : "?";
}

static const char *red_name(int red) {
  static const char *const names[] = {"sum", "prod", "max", "min", "avg"};
  return red >= 0 && red < 5 ? names[red] : "?";
}

/* An MPI type and operation for a reduction, or false (unsupported). */
static bool mpi_reduction(ncclDataType_t dt, ncclRedOp_t red, MPI_Datatype *t, MPI_Op *o) {
  switch (dt) {
  case ncclInt8:
    *t = MPI_INT8_T;
    break;
  case ncclUint8:
    *t = MPI_UINT8_T;
    break;
  case ncclInt32:
    *t = MPI_INT32_T;
    break;
  case ncclUint32:
    *t = MPI_UINT32_T;
    break;
  case ncclInt64:
    *t = MPI_INT64_T;
    break;
  case ncclUint64:
    *t = MPI_UINT64_T;
    break;
  case ncclFloat32:
    *t = MPI_FLOAT;
    break;
  case ncclFloat64:
    *t = MPI_DOUBLE;
    break;
  default:
    return false;
  }
  switch (red) {
  case ncclSum:
    *o = MPI_SUM;
    break;
  case ncclProd:
    *o = MPI_PROD;
    break;
  case ncclMax:
    *o = MPI_MAX;
    break;
  case ncclMin:
    *o = MPI_MIN;
    break;
  default:
    return false;
  }
  return true;
}

static void describe(char *out, size_t size, const struct desc *d) {
  switch (d->kind) {
  case OP_ALLREDUCE:
    snprintf(out, size, "AllReduce(count %llu, %s, %s)", (unsigned long long)d->count,
             type_name(d->dtype), red_name(d->redop));
    break;
  case OP_REDUCE:
    snprintf(out, size, "Reduce(count %llu, %s, %s, root %d)", (unsigned long long)d->count,
             type_name(d->dtype), red_name(d->redop), d->root);
    break;
  case OP_BROADCAST:
    snprintf(out, size, "Broadcast(count %llu, %s, root %d)", (unsigned long long)d->count,
             type_name(d->dtype), d->root);
    break;
  default:
    snprintf(out, size, "%s", d->kind >= 0 && d->kind <= OP_SPLIT ? kind_names[d->kind] : "?");
  }
}

static void mpi_ok(int rc, const char *what, ncclComm_t comm) {
  if (rc != MPI_SUCCESS) {
    char err[MPI_MAX_ERROR_STRING];
    int len = 0;
    MPI_Error_string(rc, err, &len);
    die("%s on communicator %s: MPI: %s", what, comm ? comm->name : "-", err);
  }
}

/* ---- posting and completing ops ---- */

static void post_descriptors(struct op *o) {
  ncclComm_t c = o->comm;
  o->mine = (struct desc){(int32_t)o->kind, (int32_t)o->dt,     (int32_t)o->red,
                          o->root,          (uint64_t)o->count, o->seq};
  o->theirs = xcalloc((size_t)c->size, sizeof *o->theirs);
  o->desc_reqs = xcalloc(2 * (size_t)c->size, sizeof *o->desc_reqs);
  int n = 0;
  for (int p = 0; p < c->size; p++)
    if (p != c->rank)
      mpi_ok(MPI_Isend(&o->mine, (int)sizeof o->mine, MPI_BYTE, p, TAG_DESC, c->shadow,
                       &o->desc_reqs[n++]),
             "send a collective's descriptor", c);
  for (int p = 0; p < c->size; p++)
    if (p != c->rank)
      mpi_ok(MPI_Irecv(&o->theirs[p], (int)sizeof *o->theirs, MPI_BYTE, p, TAG_DESC, c->shadow,
                       &o->desc_reqs[n++]),
             "receive a collective's descriptor", c);
  o->theirs[c->rank] = o->mine;
  o->state = DESC_POSTED;
}

static void post(struct op *o) {
  ncclComm_t c = o->comm;
  size_t bytes = o->count * type_bytes(o->dt);
  if (bytes > (size_t)INT32_MAX)
    die("%s of %zu bytes on communicator %s: the shim moves at most 2 GiB per op",
        kind_names[o->kind], bytes, c->name);
  o->posted_at = now();
  if (o->kind == OP_SEND) {
    o->copy = xcalloc(1, bytes);
    memcpy(o->copy, o->sendbuf, bytes);
    mpi_ok(MPI_Issend(o->copy, (int)bytes, MPI_BYTE, o->peer, TAG_P2P, c->data, &o->data_req),
           "ncclSend", c);
    o->state = DATA_POSTED;
  } else if (o->kind == OP_RECV) {
    mpi_ok(MPI_Irecv(o->recvbuf, (int)bytes, MPI_BYTE, o->peer, TAG_P2P, c->data, &o->data_req),
           "ncclRecv", c);
    o->state = DATA_POSTED;
  } else {
    post_descriptors(o);
  }
  if (shim.tail)
    shim.tail->next = o;
  else
    shim.head = o;
  shim.tail = o;
  o->next = NULL;
}

/* Every member's descriptor matches this one's, else the report. */
static void check_descriptors(const struct op *o) {
  const ncclComm_t c = o->comm;
  for (int p = 0; p < c->size; p++) {
    const struct desc *d = &o->theirs[p];
    bool same = d->kind == o->mine.kind && d->seq == o->mine.seq;
    if (same && d->kind != OP_SPLIT)
      same = d->count == o->mine.count && d->dtype == o->mine.dtype &&
             (d->kind == OP_BROADCAST || d->redop == o->mine.redop) &&
             (d->kind == OP_ALLREDUCE || d->root == o->mine.root);
    if (same)
      continue;
    char a[160], b[160];
    describe(a, sizeof a, &o->mine);
    describe(b, sizeof b, d);
    die("NCCL would deadlock: communicator %s (%d ranks): collective #%llu differs between its "
        "members: rank %d (world %d) calls %s, rank %d (world %d) calls %s (its collective "
        "#%llu); every member must call the same collectives in the same order with the same "
        "count, type, operation and root",
        c->name, c->size, (unsigned long long)o->seq, c->rank, c->world_of[c->rank], a, p,
        c->world_of[p], b, (unsigned long long)d->seq);
  }
}

static void post_data(struct op *o) {
  ncclComm_t c = o->comm;
  size_t bytes = o->count * type_bytes(o->dt);
  MPI_Datatype t = MPI_BYTE;
  MPI_Op mop = MPI_SUM;
  if ((o->kind == OP_ALLREDUCE || o->kind == OP_REDUCE) && !mpi_reduction(o->dt, o->red, &t, &mop))
    die("%s of %s with %s on communicator %s: not supported by the shim", kind_names[o->kind],
        type_name(o->dt), red_name(o->red), c->name);
  switch (o->kind) {
  case OP_ALLREDUCE:
    mpi_ok(MPI_Iallreduce(o->sendbuf == o->recvbuf ? MPI_IN_PLACE : o->sendbuf, o->recvbuf,
                          (int)o->count, t, mop, c->data, &o->data_req),
           "ncclAllReduce", c);
    break;
  case OP_REDUCE:
    mpi_ok(MPI_Ireduce(c->rank == o->root && o->sendbuf == o->recvbuf ? MPI_IN_PLACE : o->sendbuf,
                       o->recvbuf, (int)o->count, t, mop, o->root, c->data, &o->data_req),
           "ncclReduce", c);
    break;
  case OP_BROADCAST:
    if (c->rank == o->root && o->sendbuf != o->recvbuf)
      memmove(o->recvbuf, o->sendbuf, bytes);
    mpi_ok(MPI_Ibcast(o->recvbuf, (int)bytes, MPI_BYTE, o->root, c->data, &o->data_req),
           "ncclBroadcast", c);
    break;
  default: /* a split: its caller does the rest */
    o->data_req = MPI_REQUEST_NULL;
  }
  o->state = DATA_POSTED;
}

/* One look at every posted op, in order; the data of a communicator's
 * collectives is posted in the order of their numbers, on every member. */
static void progress(void) {
  struct op *prev = NULL, *o = shim.head;
  while (o) {
    struct op *next = o->next;
    if (o->state == DESC_POSTED) {
      bool earlier_waits = false; /* a collective of this comm before it still checking */
      for (struct op *e = shim.head; e != o; e = e->next)
        if (e->comm == o->comm && e->state == DESC_POSTED)
          earlier_waits = true;
      int flag = 0;
      if (!earlier_waits) {
        mpi_ok(MPI_Testall(2 * (o->comm->size - 1), o->desc_reqs, &flag, MPI_STATUSES_IGNORE),
               "exchange a collective's descriptors", o->comm);
        if (flag) {
          check_descriptors(o);
          post_data(o);
        }
      }
    }
    if (o->state == DATA_POSTED) {
      int flag = 0;
      MPI_Status st;
      mpi_ok(MPI_Test(&o->data_req, &flag, &st), kind_names[o->kind], o->comm);
      if (flag && o->kind == OP_RECV) {
        int got = 0;
        MPI_Get_count(&st, MPI_BYTE, &got);
        size_t want = o->count * type_bytes(o->dt);
        if ((size_t)got != want)
          die("NCCL would hang or corrupt: communicator %s: rank %d (world %d) receive #%llu "
              "from rank %d (world %d) expects %zu bytes, the matching send has %d",
              o->comm->name, o->comm->rank, o->comm->world_of[o->comm->rank],
              (unsigned long long)o->seq, o->peer, o->comm->world_of[o->peer], want, got);
      }
      if (flag)
        o->state = DONE;
    }
    if (o->state == DONE) {
      if (prev)
        prev->next = next;
      else
        shim.head = next;
      if (shim.tail == o)
        shim.tail = prev;
      if (o->kind != OP_SPLIT) { /* a split's caller frees it */
        free(o->copy);
        free(o->theirs);
        free(o->desc_reqs);
        free(o);
      }
    } else {
      prev = o;
    }
    o = next;
  }
}

/* The report for an op that waited longer than the timeout. */
__attribute__((noreturn)) static void stuck(const struct op *o) {
  ncclComm_t c = o->comm;
  double waited = now() - o->posted_at;
  if (o->kind == OP_SEND || o->kind == OP_RECV)
    die("NCCL would deadlock: communicator %s: rank %d (world %d) %s #%llu (%zu bytes) %s rank "
        "%d (world %d) has no matching %s after %.0f s (HEXIC_NCCL_SHIM_TIMEOUT_S): every send "
        "needs a receive of the same size on its peer, posted in the same order, with the "
        "pairs of one rank in one ncclGroupStart/End when it both sends and receives",
        c->name, c->rank, c->world_of[c->rank], o->kind == OP_SEND ? "send" : "receive",
        (unsigned long long)o->seq, o->count * type_bytes(o->dt),
        o->kind == OP_SEND ? "to" : "from", o->peer, c->world_of[o->peer],
        o->kind == OP_SEND ? "receive" : "send", waited);
  char missing[512] = "", a[160];
  size_t at = 0;
  if (o->state == DESC_POSTED) {
    int n = 0;
    for (int p = 0; p < c->size; p++) {
      if (p == c->rank)
        continue;
      int flag = 0;
      MPI_Test(&o->desc_reqs[c->size - 1 + n], &flag, MPI_STATUS_IGNORE);
      n++;
      if (!flag && at < sizeof missing - 32)
        at += (size_t)snprintf(missing + at, sizeof missing - at, "%s%d (world %d)", at ? ", " : "",
                               p, c->world_of[p]);
    }
  }
  describe(a, sizeof a, &o->mine);
  die("NCCL would deadlock: communicator %s (%d ranks): rank %d (world %d) waits %.0f s "
      "(HEXIC_NCCL_SHIM_TIMEOUT_S) in collective #%llu %s; %s%s",
      c->name, c->size, c->rank, c->world_of[c->rank], waited, (unsigned long long)o->seq, a,
      at ? "never called by rank(s) " : "its data did not complete", at ? missing : "");
}

static bool reached(cudaStream_t stream, uint64_t ticket) {
  for (struct op *o = shim.head; o; o = o->next)
    if (o->stream == stream && o->ticket <= ticket && o->state != DONE)
      return false;
  return true;
}

/* Blocks until the ops of `stream` up to ticket
 * are done, reporting the oldest if that takes longer than the timeout. */
static void wait_for(cudaStream_t stream, uint64_t ticket) {
  int spins = 0;
  for (;;) {
    progress();
    if (reached(stream, ticket))
      return;
    double t = now();
    for (struct op *o = shim.head; o; o = o->next)
      if (o->stream == stream && o->ticket <= ticket && t - o->posted_at > timeout_s())
        stuck(o);
    pause_a_little(&spins);
  }
}

/* The emulator's hooks: the last ticket of a stream so far, and whether
 * (wait: until) its ops up to one are done. */
uint64_t hx_nccl_shim_mark(cudaStream_t stream) {
  (void)stream;
  return shim.tickets;
}

int hx_nccl_shim_reached(cudaStream_t stream, uint64_t ticket, int wait) {
  if (wait) {
    wait_for(stream, ticket);
    return 1;
  }
  progress();
  return reached(stream, ticket);
}

static bool side_stream(cudaStream_t s) { return hx_emu_stream_side && hx_emu_stream_side(s); }

/* An op where NCCL enqueues it: into the open group, or posted now (and
 * completed now unless its stream is a side stream). */
static ncclResult_t enqueue(struct op *o) {
  o->ticket = ++shim.tickets;
  o->side = side_stream(o->stream);
  if (shim.depth > 0) {
    if (shim.group_tail)
      shim.group_tail->next = o;
    else
      shim.group = o;
    shim.group_tail = o;
    return ncclSuccess;
  }
  bool side = o->side;
  cudaStream_t s = o->stream;
  uint64_t t = o->ticket;
  post(o);
  if (!side)
    wait_for(s, t);
  else
    progress();
  return ncclSuccess;
}

static struct op *new_op(ncclComm_t comm, enum kind kind, cudaStream_t stream) {
  if (!comm)
    die("nccl%s on a NULL communicator", kind_names[kind]);
  if (atomic_load(&comm->aborted))
    die("nccl%s on communicator %s after ncclCommAbort", kind_names[kind], comm->name);
  struct op *o = xcalloc(1, sizeof *o);
  o->comm = comm;
  o->kind = kind;
  o->stream = stream;
  o->state = QUEUED;
  o->data_req = MPI_REQUEST_NULL;
  return o;
}

static ncclResult_t collective(ncclComm_t comm, enum kind kind, const void *sendbuf, void *recvbuf,
                               size_t count, ncclDataType_t dt, ncclRedOp_t red, int root,
                               cudaStream_t stream) {
  if (type_bytes(dt) == 0)
    return ncclInvalidArgument;
  if (kind != OP_ALLREDUCE && comm && (root < 0 || root >= comm->size))
    die("nccl%s on communicator %s: root %d is not a rank of its %d", kind_names[kind], comm->name,
        root, comm->size);
  struct op *o = new_op(comm, kind, stream);
  o->sendbuf = sendbuf, o->recvbuf = recvbuf, o->count = count, o->dt = dt, o->red = red;
  o->root = kind == OP_ALLREDUCE ? 0 : root;
  o->seq = comm->coll_seq++;
  return enqueue(o);
}

/* ---- the API ---- */

ncclResult_t ncclGetUniqueId(ncclUniqueId *uniqueId) {
  memset(uniqueId, 0, sizeof *uniqueId);
  struct shim_id id = {SHIM_MAGIC, world_rank(), shim.serial++};
  memcpy(uniqueId->internal, &id, sizeof id);
  return ncclSuccess;
}

/* Receives one message of (source, tag) on the world, bounded. */
static void recv_bounded(void *buf, int bytes, int source, int tag, MPI_Status *st,
                         const char *what) {
  double until = now() + timeout_s();
  int spins = 0, flag = 0;
  for (;;) {
    mpi_ok(MPI_Iprobe(source, tag, MPI_COMM_WORLD, &flag, st), what, NULL);
    if (flag)
      break;
    progress();
    if (now() > until)
      die("ncclCommInitRank: %s: nothing after %.0f s (every member must call "
          "ncclCommInitRank with the id, and the rank that made the id must be one of them)",
          what, timeout_s());
    pause_a_little(&spins);
  }
  mpi_ok(MPI_Recv(buf, bytes, MPI_BYTE, st->MPI_SOURCE, tag, MPI_COMM_WORLD, st), what, NULL);
}

static ncclComm_t new_comm(MPI_Comm data, const char *name) {
  ncclComm_t c = xcalloc(1, sizeof *c);
  c->data = data;
  MPI_Comm_set_errhandler(data, MPI_ERRORS_RETURN);
  MPI_Comm_rank(data, &c->rank);
  MPI_Comm_size(data, &c->size);
  mpi_ok(MPI_Comm_dup(data, &c->shadow), "make a shadow communicator", NULL);
  MPI_Comm_set_errhandler(c->shadow, MPI_ERRORS_RETURN);
  c->world_of = xcalloc((size_t)c->size, sizeof *c->world_of);
  int me = world_rank();
  mpi_ok(MPI_Allgather(&me, 1, MPI_INT, c->world_of, 1, MPI_INT, c->shadow),
         "learn the members' world ranks", NULL);
  c->send_seq = xcalloc((size_t)c->size, sizeof *c->send_seq);
  c->recv_seq = xcalloc((size_t)c->size, sizeof *c->recv_seq);
  snprintf(c->name, sizeof c->name, "%s", name);
  return c;
}

ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId commId, int rank) {
  struct shim_id id;
  memcpy(&id, commId.internal, sizeof id);
  if (id.magic != SHIM_MAGIC)
    die("ncclCommInitRank: not an id of ncclGetUniqueId (was it broadcast to this rank?)");
  if (rank < 0 || rank >= nranks)
    die("ncclCommInitRank: rank %d of %d", rank, nranks);
  int me = world_rank(), reg[2] = {rank, me};
  int boot = TAG_BOOT + (int)(id.serial % 1000), list_tag = TAG_LIST + (int)(id.serial % 1000);
  MPI_Request sent;
  mpi_ok(MPI_Isend(reg, 2, MPI_INT, id.creator, boot, MPI_COMM_WORLD, &sent),
         "register with the id's maker", NULL);
  int *members = xcalloc((size_t)nranks, sizeof *members);
  MPI_Status st;
  if (me == id.creator) {
    for (int i = 0; i < nranks; i++)
      members[i] = -1;
    for (int got = 0; got < nranks; got++) {
      int r[2];
      recv_bounded(r, (int)sizeof r, MPI_ANY_SOURCE, boot, &st, "collect the members");
      if (r[0] < 0 || r[0] >= nranks || members[r[0]] >= 0)
        die("ncclCommInitRank: two ranks (world %d and %d) claim rank %d of the id's "
            "communicator",
            r[0] >= 0 && r[0] < nranks ? members[r[0]] : -1, r[1], r[0]);
      members[r[0]] = r[1];
    }
    for (int i = 0; i < nranks; i++)
      mpi_ok(MPI_Send(members, nranks, MPI_INT, members[i], list_tag, MPI_COMM_WORLD),
             "send the member list", NULL);
  }
  recv_bounded(members, nranks * (int)sizeof *members, id.creator, list_tag, &st,
               "receive the member list");
  MPI_Wait(&sent, MPI_STATUS_IGNORE);
  MPI_Group world_group, group;
  MPI_Comm_group(MPI_COMM_WORLD, &world_group);
  MPI_Group_incl(world_group, nranks, members, &group);
  MPI_Comm data;
  mpi_ok(MPI_Comm_create_group(MPI_COMM_WORLD, group, boot, &data), "ncclCommInitRank", NULL);
  MPI_Group_free(&group);
  MPI_Group_free(&world_group);
  free(members);
  char name[96];
  snprintf(name, sizeof name, "init#%u of world rank %d", (unsigned)id.serial, (int)id.creator);
  *comm = new_comm(data, name);
  return ncclSuccess;
}

ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t *newcomm,
                           ncclConfig_t *config) {
  (void)config;
  if (shim.depth > 0)
    die("ncclCommSplit inside ncclGroupStart/End (the shim does not model it)");
  struct op *o = new_op(comm, OP_SPLIT, NULL);
  o->dt = ncclUint8;
  o->seq = comm->coll_seq++;
  o->ticket = ++shim.tickets;
  post(o);
  int spins = 0;
  while (o->state != DONE) { /* the split's descriptors, then its own call */
    progress();
    if (o->state != DONE && now() - o->posted_at > timeout_s())
      stuck(o);
    if (o->state != DONE)
      pause_a_little(&spins);
  }
  free(o->theirs);
  free(o->desc_reqs);
  free(o);
  MPI_Comm data;
  mpi_ok(
      MPI_Comm_split(comm->shadow, color == NCCL_SPLIT_NOCOLOR ? MPI_UNDEFINED : color, key, &data),
      "ncclCommSplit", comm);
  *newcomm = NULL;
  if (data == MPI_COMM_NULL)
    return ncclSuccess;
  char name[96];
  snprintf(name, sizeof name, "split of (%.40s) colour %d", comm->name, color);
  *newcomm = new_comm(data, name);
  return ncclSuccess;
}

ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  if (!comm)
    return ncclSuccess;
  int spins = 0;
  for (;;) { /* its ops first, as ncclCommDestroy does */
    progress();
    bool pending = false;
    for (struct op *o = shim.head; o; o = o->next)
      if (o->comm == comm) {
        pending = true;
        if (now() - o->posted_at > timeout_s())
          stuck(o);
      }
    if (!pending)
      break;
    pause_a_little(&spins);
  }
  MPI_Comm_free(&comm->shadow);
  MPI_Comm_free(&comm->data);
  free(comm->world_of);
  free(comm->send_seq);
  free(comm->recv_seq);
  free(comm);
  return ncclSuccess;
}

/* From the watchdog's thread: no MPI here; the rank exits next. */
ncclResult_t ncclCommAbort(ncclComm_t comm) {
  if (comm)
    atomic_store(&comm->aborted, 1);
  return ncclSuccess;
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *asyncError) {
  if (!comm)
    return ncclInvalidArgument;
  *asyncError = (ncclResult_t)atomic_load(&comm->async_err);
  return ncclSuccess;
}

ncclResult_t ncclCommUserRank(const ncclComm_t comm, int *rank) {
  if (!comm)
    return ncclInvalidArgument;
  *rank = comm->rank;
  return ncclSuccess;
}

ncclResult_t ncclCommCount(const ncclComm_t comm, int *count) {
  if (!comm)
    return ncclInvalidArgument;
  *count = comm->size;
  return ncclSuccess;
}

const char *ncclGetErrorString(ncclResult_t result) {
  switch (result) {
  case ncclSuccess:
    return "no error";
  case ncclUnhandledCudaError:
    return "unhandled cuda error";
  case ncclSystemError:
    return "unhandled system error";
  case ncclInternalError:
    return "internal error";
  case ncclInvalidArgument:
    return "invalid argument";
  case ncclInvalidUsage:
    return "invalid usage";
  case ncclRemoteError:
    return "remote process exited or there was a network error";
  case ncclInProgress:
    return "NCCL operation in progress";
  default:
    return "unknown result code";
  }
}

ncclResult_t ncclGroupStart(void) {
  shim.depth++;
  return ncclSuccess;
}

/* The group's ops are posted together; those of non-side streams are
 * completed before this returns. */
ncclResult_t ncclGroupEnd(void) {
  if (shim.depth == 0)
    return ncclInvalidUsage;
  if (--shim.depth > 0)
    return ncclSuccess;
  struct op *o = shim.group;
  shim.group = shim.group_tail = NULL;
  uint64_t last = 0;
  cudaStream_t sync[8];
  int nsync = 0;
  while (o) {
    struct op *next = o->next;
    bool known = o->side;
    for (int i = 0; i < nsync; i++)
      known |= sync[i] == o->stream;
    if (!known && nsync < 8)
      sync[nsync++] = o->stream;
    else if (!known)
      die("ncclGroupEnd: ops on more than 8 streams in one group (the shim keeps 8)");
    last = o->ticket;
    post(o);
    o = next;
  }
  for (int i = 0; i < nsync; i++)
    wait_for(sync[i], last);
  progress();
  return ncclSuccess;
}

static ncclResult_t p2p(enum kind kind, const void *sendbuf, void *recvbuf, size_t count,
                        ncclDataType_t dt, int peer, ncclComm_t comm, cudaStream_t stream) {
  if (type_bytes(dt) == 0)
    return ncclInvalidArgument;
  if (comm && (peer < 0 || peer >= comm->size))
    die("nccl%s on communicator %s: peer %d is not a rank of its %d", kind_names[kind], comm->name,
        peer, comm->size);
  struct op *o = new_op(comm, kind, stream);
  o->sendbuf = sendbuf, o->recvbuf = recvbuf, o->count = count, o->dt = dt, o->peer = peer;
  o->seq = kind == OP_SEND ? comm->send_seq[peer]++ : comm->recv_seq[peer]++;
  return enqueue(o);
}

ncclResult_t ncclSend(const void *sendbuff, size_t count, ncclDataType_t datatype, int peer,
                      ncclComm_t comm, cudaStream_t stream) {
  return p2p(OP_SEND, sendbuff, NULL, count, datatype, peer, comm, stream);
}

ncclResult_t ncclRecv(void *recvbuff, size_t count, ncclDataType_t datatype, int peer,
                      ncclComm_t comm, cudaStream_t stream) {
  return p2p(OP_RECV, NULL, recvbuff, count, datatype, peer, comm, stream);
}

ncclResult_t ncclBroadcast(const void *sendbuff, void *recvbuff, size_t count,
                           ncclDataType_t datatype, int root, ncclComm_t comm,
                           cudaStream_t stream) {
  return collective(comm, OP_BROADCAST, sendbuff, recvbuff, count, datatype, ncclSum, root, stream);
}

ncclResult_t ncclAllReduce(const void *sendbuff, void *recvbuff, size_t count,
                           ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                           cudaStream_t stream) {
  return collective(comm, OP_ALLREDUCE, sendbuff, recvbuff, count, datatype, op, 0, stream);
}

ncclResult_t ncclReduce(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
                        ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream) {
  return collective(comm, OP_REDUCE, sendbuff, recvbuff, count, datatype, op, root, stream);
}

/* ---- the emulator's devices: one per rank of this machine ---- */

/* Overrides tests/gpu/emulate/emu_runtime.cpp's one device (emulate_nccl.sh
 * weakens that one), so that transport_select.c sees a GPU per rank, as on
 * a machine where NCCL runs. */
cudaError_t cudaGetDeviceCount(int *count) {
  const char *local = getenv("OMPI_COMM_WORLD_LOCAL_SIZE"); /* not collective */
  MPI_Comm node;
  int n = 1;
  if (local && atoi(local) > 0)
    n = atoi(local);
  else if (MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, world_rank(), MPI_INFO_NULL,
                               &node) == MPI_SUCCESS) {
    MPI_Comm_size(node, &n);
    MPI_Comm_free(&node);
  }
  *count = n;
  return cudaSuccess;
}
