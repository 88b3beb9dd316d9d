/* Start-up, world check, fatal errors and the fault watchdog of a generated
 * rank program.
 *
 * A rank program calls, in order:
 *   hx_rt_init(&argc, &argv);                      MPI up, watchdog armed
 *   hx_rt_check_world(HX_RANK, HX_NRANKS, HX_FP);  exits on a wrong launch
 *   ... training; hx_rt_progress() after every schedule operation ...
 *   hx_rt_finalize();                              watchdog off, MPI down
 *
 * Fault handling (issue 6, item 6) has two layers:
 * 1. MPI_COMM_WORLD uses MPI_ERRORS_RETURN, and every MPI call of the runtime
 *    goes through hx_rt_mpi_check(): an MPI error becomes a clear message and
 *    an abort of the whole job instead of a hang or a silent crash.
 * 2. A watchdog thread. The training thread stamps a monotonic clock with
 *    hx_rt_progress() whenever it completes work (a schedule operation, a
 *    finished send/receive, a checkpoint file). The watchdog wakes a few times
 *    a second; when the stamp is older than HEXIC_TIMEOUT_S seconds (default
 *    60) — a dead peer we wait on forever, a hung peer, a deadlock — it prints
 *    "rank R: no progress for S s" and ends the process with _exit(code 124).
 *    It never calls MPI (MPI is initialised with MPI_THREAD_FUNNELED: only the
 *    main thread talks to MPI). Once one rank exits non-zero without
 *    MPI_Finalize, mpirun tears down every other rank, so the whole job ends
 *    within about HEXIC_TIMEOUT_S plus one watchdog period — and a rank that is
 *    not under mpirun's control still stops on its own clock.
 *    The bound must exceed the longest single operation (one micro-batch's
 *    forward or backward of a stage, one checkpoint write).
 * 3. Waits that know what they wait on (hx_rt_wait_all). A stopped or hung
 *    rank stalls its neighbours, theirs in turn, and so on; whichever rank
 *    times out first is usually not the one that stopped. So every wait of
 *    the executor names its peer (a send or receive) or its group (a
 *    collective) and polls instead of blocking, answering other ranks'
 *    "what are you waiting on?" meanwhile (on a communicator of its own).
 *    A wait that lasts HEXIC_TIMEOUT_S traces the stall: it asks the ranks
 *    it waits on, then the ranks they wait on, breadth first, until one does
 *    not answer within HEXIC_TIMEOUT_S either. That rank stopped, hangs or
 *    died, and every rank tracing the same stall reaches it, so the report
 *    names it whoever times out first:
 *      hexic-rt: failed rank P: it does not answer (...); rank Q waits on it (...)
 *    (launch.sh turns that line into its verdict) and the process exits with
 *    code 124. A wait that completes while it traces goes on (a slow peer is
 *    not a dead one). The watchdog stands aside during such waits; it still
 *    guards computation and the few blocking MPI calls left (start-up,
 *    communicator creation, the weight dump), where a rank cannot answer.
 */
#ifndef HX_RT_INIT_H
#define HX_RT_INIT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <mpi.h>

/* Exit codes of a rank program. */
enum hx_rt_exit {
  HX_RT_EXIT_OK = 0,
  HX_RT_EXIT_ERROR = 1,     /* bad data file, unwritable checkpoint, ... */
  HX_RT_EXIT_WORLD = 3,     /* launched world does not match the plan */
  HX_RT_EXIT_MPI = 4,       /* an MPI call failed (a peer died, ...) */
  HX_RT_EXIT_DEVICE = 5,    /* no GPU, too little GPU memory, a CUDA call failed */
  HX_RT_EXIT_TIMEOUT = 124, /* the watchdog saw no progress (like timeout(1)) */
};

/* Default for HEXIC_TIMEOUT_S when the variable is unset. */
#define HX_RT_DEFAULT_TIMEOUT_S 60.0

/* MPI_Init_thread(FUNNELED), MPI_ERRORS_RETURN on MPI_COMM_WORLD, reads
 * HEXIC_TIMEOUT_S (a positive number of seconds; anything else is a fatal
 * error) and starts the watchdog. Exits on failure. */
void hx_rt_init(int *argc, char ***argv);

/* This process's rank and the world size (valid after hx_rt_init). */
int hx_rt_rank(void);
int hx_rt_world_size(void);

/* Collective over MPI_COMM_WORLD. Checks that the world has plan_ranks
 * processes and that process r runs the binary generated for rank r
 * (compiled_rank == r) of the same plan (equal fingerprints; at most
 * HX_RT_FINGERPRINT_MAX-1 characters are compared). On any mismatch every rank
 * prints the same description of the problem to stderr, prefixed with its
 * rank, and exits with HX_RT_EXIT_WORLD. Returns only when the launch is
 * right. */
#define HX_RT_FINGERPRINT_MAX 64
void hx_rt_check_world(int compiled_rank, int plan_ranks, const char *fingerprint);

/* The same check without MPI, for tests and for the message text: given what
 * every rank reported (compiled_ranks[r], fingerprints[r] for r < world_size),
 * returns true when the launch is right, else false with a one-line
 * description in msg. */
bool hx_rt_world_matches(int world_size, int plan_ranks, const int *compiled_ranks,
                         const char *const *fingerprints, char *msg, size_t msg_size);

/* Stops the watchdog, MPI_Finalize. */
void hx_rt_finalize(void);

/* Marks that this rank made progress (cheap: one atomic store). */
void hx_rt_progress(void);

/* What a wait waits on, for the stall trace: a peer, or a group. */
struct hx_rt_wait {
  const char *what; /* the operation, e.g. "receive an activation" */
  int micro_batch;  /* -1: none */
  int peer;         /* world rank of a send's or receive's peer; -1 for a collective */
  int nranks;       /* a collective's members (world ranks, this rank among them) */
  const int *ranks; /* NULL: every rank of MPI_COMM_WORLD */
};

/* Called on the main thread as each wait below (and hx_rt_exchange's)
 * begins and ends; NULL: nothing. --emulate keeps waits out of a device's
 * compute time with them (rt_emulate.c). */
void hx_rt_set_wait_hooks(void (*enter)(void *arg), void (*leave)(void *arg), void *arg);

/* Completes reqs[0..n) (MPI_Testall in a polling loop), answering other
 * ranks' status queries meanwhile; after HEXIC_TIMEOUT_S traces the stall
 * (see above) and, unless the wait completes meanwhile, reports the rank
 * that does not answer and exits with HX_RT_EXIT_TIMEOUT. Marks progress
 * when done. MPI errors are fatal (hx_rt_mpi_check with w->what). */
void hx_rt_wait_all(int n, MPI_Request *reqs, const struct hx_rt_wait *w);

/* The same wait on a condition of a transport's own instead of MPI
 * requests (an NCCL operation's event): done(arg) is polled until true,
 * with the same status answers and stall trace. */
void hx_rt_wait_until(bool (*done)(void *arg), void *arg, const struct hx_rt_wait *w);

/* A transport's own fault handling (NCCL: its asynchronous errors and
 * ncclCommAbort). The watchdog thread calls check a few times a second:
 * true, with a message in msg, when the transport has failed (a peer died
 * or its connection broke); the rank then prints the message, calls abort
 * and exits with HX_RT_EXIT_MPI. abort is also called before the
 * watchdog's or a traced stall's exit (HEXIC_TIMEOUT_S), so that the
 * transport's device work ends with the rank. Both run on the watchdog
 * thread and must not call MPI; abort runs at most once. NULL: none. */
typedef bool (*hx_rt_fault_check_fn)(char *msg, size_t size);
typedef void (*hx_rt_fault_abort_fn)(void);
void hx_rt_set_fault_hooks(hx_rt_fault_check_fn check, hx_rt_fault_abort_fn abort_fn);

/* Stops / restarts the watchdog (e.g. around an interactive pause). The
 * stamp is refreshed on restart. */
void hx_rt_watchdog_stop(void);
void hx_rt_watchdog_start(void);

/* ---- message limits ----
 * MPI counts are int and tags are bounded by MPI_TAG_UB (at least 32767), while
 * one activation of a long-context micro-batch (128K tokens x 8192 hidden)
 * is 2^30 floats and a run may have any number of micro-batches. */

/* The most elements one MPI call carries: INT_MAX, or HEXIC_MPI_MAX_COUNT
 * (a positive integer; tests lower it to exercise chunking). */
int hx_rt_max_count(void);

/* A message of n elements travels as hx_rt_chunk_count(n, max_count)
 * messages of at most max_count elements each, in order, with one tag (MPI
 * keeps messages of one source, tag and communicator in order); chunk k
 * holds elements [*offset, *offset + *count). Pure: n may be any size. */
int64_t hx_rt_chunk_count(int64_t n, int64_t max_count);
void hx_rt_chunk_at(int64_t n, int64_t max_count, int64_t k, int64_t *offset, int *count);

/* hx_rt_chunk_count(n, hx_rt_max_count()); a fatal error above 2^20
 * messages (only a tiny HEXIC_MPI_MAX_COUNT gets there). */
int hx_rt_message_chunks(int64_t n);

/* The tag bound in force: MPI_TAG_UB of MPI_COMM_WORLD, or HEXIC_MPI_TAG_UB
 * when that is lower (at least 3; tests lower it to make tags wrap). */
int hx_rt_tag_ub(void);

/* The tag of a pipeline message of kind 1..3 for micro-batch m:
 * kind + 4 * (m mod span) with span = (tag_ub + 1) / 4, so every tag is at
 * most tag_ub whatever m. Two micro-batches m and m + span share a tag; that
 * is safe because MPI matches messages of one (source, tag, communicator) in
 * the order they were sent, and both ends of a pipeline link send and
 * receive micro-batches in increasing order. Pure. */
int hx_rt_message_tag(int64_t micro_batch, int kind, int tag_ub);

/* ---- messages of any size (the transports' MPI, rtlib/rt_backend.h) ----
 * Every call below is checked (hx_rt_mpi_check with `what`), every wait goes
 * through hx_rt_wait_all, and counts are elements of `type`, chunked. */

/* Posts one message of n elements to (send) or from peer on comm as its
 * hx_rt_message_chunks(n) chunks, all with tag (MPI keeps them in order):
 * one request per chunk in reqs. */
void hx_rt_post_chunks(void *buf, int64_t n, MPI_Datatype type, int peer, int tag, bool send,
                       MPI_Comm comm, MPI_Request *reqs, const char *what);

/* A send handle's requests, for messages of up to max_n elements: one per
 * chunk, *nreqs of them, all MPI_REQUEST_NULL. */
MPI_Request *hx_rt_send_requests(int64_t max_n, int *nreqs);

/* Fatal unless a message of n elements fits the handle's nreqs requests and
 * they are all complete (the executor waits on a send before it reuses the
 * handle). */
void hx_rt_send_check_ready(const MPI_Request *reqs, int nreqs, int64_t n, const char *what);

/* Receives the message hx_rt_post_chunks sends (n elements from peer, with
 * tag) into buf; returns when it is there. */
void hx_rt_recv_chunks(void *buf, int64_t n, MPI_Datatype type, int peer, int tag, MPI_Comm comm,
                       const struct hx_rt_wait *w);

/* buf[0..n) from root to every rank of comm, chunk by chunk (collectives on
 * one communicator are matched in the order posted); returns when done. */
void hx_rt_bcast_chunks(void *buf, int64_t n, MPI_Datatype type, int root, MPI_Comm comm,
                        const struct hx_rt_wait *w);

/* buf[0..n) summed element-wise over comm, in place, chunk by chunk. */
void hx_rt_allreduce_floats(float *buf, int64_t n, MPI_Comm comm, const struct hx_rt_wait *w);

/* The same, started and not waited for: posts one MPI_Iallreduce per chunk
 * (the chunks hx_rt_allreduce_floats sums, so both give the same bits) and
 * returns their *nreqs requests (calloc'ed: the caller completes them with
 * hx_rt_wait_all and frees them). buf is MPI's until then. */
MPI_Request *hx_rt_allreduce_floats_start(float *buf, int64_t n, MPI_Comm comm, int *nreqs,
                                          const char *what);

/* ZeRO-1's collectives over comm (members in comm's rank order), started
 * and not waited for, like hx_rt_allreduce_floats_start. counts[i] floats
 * belong to member i, back to back. reduce_scatter: recv gets this member's
 * block of send summed over comm; allgather: in place in buf. When every
 * block and their sum fit hx_rt_max_count(), one MPI_Ireduce_scatter /
 * MPI_Iallgatherv; else each block travels by itself, chunk by chunk
 * (MPI_Ireduce to / MPI_Ibcast from its member), so any size works. */
MPI_Request *hx_rt_reduce_scatter_floats_start(const float *send, float *recv,
                                               const long *counts, int n, MPI_Comm comm,
                                               int *nreqs, const char *what);
MPI_Request *hx_rt_allgather_floats_start(float *buf, const long *counts, int n, MPI_Comm comm,
                                          int *nreqs, const char *what);

/* One message of an exchange: n elements at buf, to or from world rank peer
 * (of a communicator that numbers ranks as MPI_COMM_WORLD does). */
struct hx_rt_msg {
  void *buf;
  int64_t n;
  int peer;
};

/* The sequence-parallel exchanges of both transports (rtlib/seq/: a ring
 * step, a ragged all-to-all): posts every receive, then every send, each as
 * its chunks with tag on comm, and returns when all are complete. Messages
 * of no elements are not sent; a peer may be this rank. Both ends derive
 * every n from the same tables, and messages between one pair keep their
 * order, so nothing but the data travels. */
void hx_rt_exchange(const struct hx_rt_msg *recvs, int nrecvs, const struct hx_rt_msg *sends,
                    int nsends, MPI_Datatype type, int tag, MPI_Comm comm,
                    const struct hx_rt_wait *w);

/* MPI_Comm_split of the world (collective: every rank calls it once) into
 * communicators of `size` ranks, ranked by key; MPI_COMM_NULL when size is 1.
 * A communicator of another size is a fatal internal error. */
MPI_Comm hx_rt_split_comm(int color, int key, int size, const char *what);

/* The communicator of world ranks[0..n) (increasing), created with
 * MPI_Comm_create_group: collective over those ranks only; the caller
 * creates overlapping ones in one global order. */
MPI_Comm hx_rt_group_comm(const int *ranks, int n, int tag);

/* The communicators a transport opened for the gradient-sync groups, in the
 * order it opened them: a transport's group handle is an index here. */
struct hx_rt_group_comms {
  struct hx_rt_group_comm {
    MPI_Comm comm;
    const int *ranks; /* the group's world ranks, for the stall report */
    int nranks;
  } *items;
  int n, cap;
};

/* Creates the communicator of world ranks[0..n) (hx_rt_group_comm: collective
 * over those ranks, in the one global id order) and appends it; returns its
 * index. */
int hx_rt_group_comms_open(struct hx_rt_group_comms *t, const int *ranks, int n, int id);

/* What a collective over entry i waits on, for hx_rt_wait_all. */
struct hx_rt_wait hx_rt_group_comms_wait(const struct hx_rt_group_comms *t, int i,
                                         const char *what);

/* Prints "hexic-rt: rank R: error: <message>" to stderr and aborts the whole
 * job (MPI_Abort when MPI is up, exit otherwise) with code. */
_Noreturn void hx_rt_fatal(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* calloc that never returns NULL (zero counts allocate one byte): out of
 * memory is hx_rt_fatal(HX_RT_EXIT_ERROR). For the executor and both
 * backends. */
void *hx_rt_calloc(size_t count, size_t size);

/* If rc is not MPI_SUCCESS: hx_rt_fatal(HX_RT_EXIT_MPI) naming what and
 * MPI's error string. */
void hx_rt_mpi_check(int rc, const char *what);

/* ---- Console output ---- */
/* Console output of a rank program: start-up banner lines and one line per
 * optimizer step. Everything goes to stdout and is flushed at once, so lines
 * from the ranks of one job never interleave mid-line under mpirun.
 *
 * These functions print unconditionally; the caller picks the rank. The
 * executor all-reduces the loss, so every rank holds it, and prints the step
 * line once per step, on world rank 0 (rt_exec.c). */

/* One step's figures. step is the 0-based optimizer step index; it is printed
 * 1-based ("step 1/M" is the first step). */
struct hx_rt_step_stats {
  int64_t step, steps;
  double loss; /* of the forward pass of this step, before its update */
  double lr;   /* the learning rate this step's update used */
  double ms;   /* wall time of the step */
  double tokens_per_s;
};

/* Formats the step line without a newline:
 *   step N/M | loss X.XXXXXX | lr X.XXXXe-XX | NNN.N ms | NNNNN tok/s
 * Returns snprintf's result. */
int hx_rt_log_format_step(char *buf, size_t size, const struct hx_rt_step_stats *s);

/* Prints the step line plus a newline to stdout and flushes. */
void hx_rt_log_step(const struct hx_rt_step_stats *s);

/* Prints "hexic: <message>" plus a newline to stdout and flushes: banner
 * lines (plan summary, model size, data source, resume point). */
void hx_rt_log_banner(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Seconds on a monotonic clock, for timing steps. */
double hx_rt_now_s(void);

#endif
