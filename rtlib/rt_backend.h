/* The two interfaces between the executor (rtlib/rt_exec*.c) and a backend
 * (rtlib/cpu/, rtlib/cuda/), in two sections:
 *   - the device: memory, copies and the kernel table the executor calls;
 *   - the transport: messages between ranks on the device's buffers.
 * Plain structs of function pointers, as QBE's targets are: the executor is
 * one code path that calls through them, and what differs between CPU and
 * GPU lives behind them. A program links exactly one backend library, which
 * defines rt_device_open and rt_transport_open (the choice is made at link
 * time: hexic_rt_cpu or hexic_rt_cuda). A process is one rank and opens one
 * device and one transport, so a backend keeps its state in its own files.
 *
 * What stays on the host, in the executor, whatever the backend: the plan's
 * tables, the schedule, token batches (uploaded per micro-batch), the loss
 * and norm scalars, and the MPI protocols of start-up, checkpoints and the
 * weight dump (rt_init, rt_ckpt), which stage parameters through host
 * buffers with upload and download. */
#ifndef HX_RT_BACKEND_H
#define HX_RT_BACKEND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hexic_rt.h"
#include "kernels/cpu/llama.h"

/* Device memory by kind (issue 25, item 1): every byte a backend allocates
 * is counted under one kind, per rank, with its current and peak bytes, so
 * that a run can be compared with what plan.json predicts per rank and kind
 * (codegen/plan_json.c, passes/cost/cost.c's hx_rank_memory_by_kind). Both
 * backends count through these functions at their alloc and free, so they
 * count the same way; the executor, which knows what a buffer is for, moves
 * the bytes of what it allocated to their kind (rt_mem_retag). */
/* The order and names are plan.json's "memory_by_kind" (hx_mem_kind_names). */
enum rt_mem_kind {
  RT_MEM_WEIGHTS,     /* master weights and what the forward reads (a bf16 copy) */
  RT_MEM_GRADIENTS,   /* fp32 parameter gradients */
  RT_MEM_OPTIMIZER,   /* AdamW m and v (and the decay mask that steps them) */
  RT_MEM_ACTIVATIONS, /* what a layer keeps from forward to backward, per slot */
  RT_MEM_RECOMPUTE,   /* full recompute: one layer's activations rebuilt in backward */
  RT_MEM_COMM,        /* pipeline hop buffers, gradient-sync packs, gathers */
  RT_MEM_WORKSPACE,   /* scratch, ping-pong activations, tokens, tables */
  RT_MEM_NKINDS
};

/* "weights", "gradients", ...: the JSON keys and the report's words. */
const char *rt_mem_kind_name(enum rt_mem_kind kind);

/* A backend's alloc and free: p (not NULL) now holds bytes of kind; and no
 * longer. Freeing a pointer never counted is ignored (host tables). */
void rt_mem_count(const void *p, size_t bytes, enum rt_mem_kind kind);
void rt_mem_uncount(const void *p);

/* The kind a backend's alloc counts under until retagged: RT_MEM_WORKSPACE,
 * or what the executor sets around a set-up call whose buffers it does not
 * all name (rt_exec.c: the stage's slots and hop buffers, COMM). */
enum rt_mem_kind rt_mem_default_kind(void);
void rt_mem_set_default_kind(enum rt_mem_kind kind);

/* Moves `bytes` of allocation p (every byte it holds when bytes is
 * SIZE_MAX or more than it holds) from whatever kinds hold them, last
 * tagged first, to kind. A peak already reached by the kind they left stays
 * until rt_mem_reset_peaks. */
void rt_mem_retag(const void *p, size_t bytes, enum rt_mem_kind kind);

/* Every peak to what is held now: the executor calls it once its start-up
 * allocations are tagged, so that a buffer counted under the default kind
 * for a moment does not stay in that kind's peak. */
void rt_mem_reset_peaks(void);

/* Bytes of kind held now, the most held at once, and the most of all kinds
 * together at once. */
struct rt_mem_figures {
  int64_t current[RT_MEM_NKINDS], peak[RT_MEM_NKINDS];
  int64_t current_total, peak_total;
};
void rt_mem_figures(struct rt_mem_figures *out);

/* "peak MiB: weights 0.41, gradients 0.41, ... total 2.03" into buf. */
int rt_mem_format_line(char *buf, size_t size, const struct rt_mem_figures *f);

/* Element type of activations, of their gradients and of the weights the
 * forward reads (the numbers of hx_rt_precision and of the CUDA kernels'
 * hxc_dtype). Parameter gradients, master weights and AdamW moments are
 * fp32 whatever this says. */
enum rt_dtype {
  RT_FP32 = 0,
  RT_BF16 = 1,
};

static inline size_t rt_dtype_bytes(enum rt_dtype dt) { return dt == RT_BF16 ? 2 : 4; }

/* A contiguous range of the flat parameter buffers, in floats. */
struct rt_run {
  long off, n;
};

/* ---------------------------------------------------------------------------
 * The device.
 * ------------------------------------------------------------------------- */

/* One tensor (or TP shard of one) the rank holds, in the flat buffers. */
struct rt_tensor {
  long off, n;
  bool decay; /* AdamW weight decay: matrices yes, norm gains no */
  long moff;  /* in layout->opt: where its AdamW m and v start */
};

/* The rank's parameters as the executor lays them out (rt_exec_params.c):
 * four flat fp32 buffers (weights, gradients, AdamW m and v) with the
 * tensors in the spec's order. Offsets are -1 for what the rank does not
 * hold. */
struct rt_layout {
  long n;                           /* floats of each buffer */
  long tok_emb, final_norm, lm_head;
  long head_weight;                 /* what the logits read: lm_head, or tok_emb when tied */
  long layers, layer_floats;        /* first local layer; floats of one layer */
  int nlayers;
  int ntensors;
  const struct rt_tensor *tensors;  /* every tensor held, in buffer order */
  int nnorm;
  const struct rt_run *norm;        /* what this rank adds to the global gradient norm */
  /* What AdamW steps here, with where each range's moments live in the m
   * and v buffers of `moments` floats each. Without ZeRO-1 that is every
   * tensor (moff == off, moments == n); with it (rtlib/rt_exec_sync.c) the
   * ranges of a sharded gradient-sync group that this rank does not own are
   * left out, and m and v hold only what remains. */
  int nopt;
  const struct rt_tensor *opt;
  long moments;
};

/* Sums buf[0..n) (device memory, elements of the device's dtype) over the
 * stage's TP group in place; the executor's hook into the transport. */
typedef void (*rt_tp_reduce_fn)(void *buf, long n, void *arg);

/* Sequence parallelism: the executor's hooks into the transport (rows as
 * hxk_sp_rows of n over the TP group, width elements a row, elements of the
 * device's dtype, device memory). reduce_scatter sums send[n, width] over
 * the group into this member's rows recv[rows, width]; allgather fills
 * buf[n, width] from every member's rows (this member's already in place). */
typedef void (*rt_tp_reduce_scatter_fn)(const void *send, void *recv, long n, int width,
                                        void *arg);
typedef void (*rt_tp_allgather_fn)(void *buf, long n, int width, void *arg);

/* What the kernels need to run this rank's part of the model. */
struct rt_model {
  const struct hxk_dims *dims;
  const struct hxk_shard *shard;
  bool recompute;       /* full activation recompute in backward */
  long nseq;            /* sequences per micro-batch */
  const struct rt_layout *layout;
  rt_tp_reduce_fn tp_reduce; /* NULL: TP degree 1 */
  void *tp_arg;
  /* Sequence parallelism (sp_size > 1; set by the executor with both hooks,
   * which take tp_arg too): the layers' inputs and outputs are this member's
   * rows (hxk_sp_rows), sp_rank its index in the TP group. */
  int sp_size, sp_rank;
  rt_tp_reduce_scatter_fn tp_reduce_scatter;
  rt_tp_allgather_fn tp_allgather;
  /* HexiSeq stages: each sequence is local_len tokens here (0: seq_len) at
   * these global positions (NULL: 0..seq_len-1; embedding, RoPE and the head
   * follow them), and attention runs through this hook (rtlib/seq's ring and
   * all-to-all; NULL: over the local tokens). */
  long local_len;
  const int *positions;
  const struct hxk_attention_hook *attention;
};

/* The flat fp32 parameter buffers, in device memory. */
struct rt_weights {
  float *w, *g, *m, *v;
};

struct rt_device {
  const char *backend; /* "cpu", "cuda": for messages */
  enum rt_dtype dtype;

  /* Memory. Pointers are device memory unless named host. Every call either
   * succeeds or ends the run (hx_rt_fatal): callers check nothing. Every
   * byte a backend allocates is counted by kind (rt_backend.h): what alloc
   * returns as RT_MEM_WORKSPACE until the executor retags it, what setup
   * allocates under its own kind (weights, gradients, optimizer state). */
  void *(*alloc)(size_t bytes); /* zeroed */
  void (*free)(void *p);
  void (*zero)(void *p, size_t bytes);
  void (*copy)(void *dst, const void *src, size_t bytes);
  /* Synchronous: upload returns when host may be reused, download when the
   * bytes are there (after every kernel queued before it). */
  void (*upload)(void *dst, const void *host, size_t bytes);
  void (*download)(void *host, const void *src, size_t bytes);
  /* dst[packed] = src[runs] (pack) and dst[runs] = src[packed] (unpack):
   * the ranges of a gradient-sync group, back to back in dst or src. */
  void (*pack)(float *dst, const float *src, const struct rt_run *runs, int nruns);
  void (*unpack)(float *dst, const float *src, const struct rt_run *runs, int nruns);

  /* The model: allocates the parameter buffers (zeroed) and everything the
   * kernel table needs. model and its layout must outlive the device. */
  void (*setup)(const struct rt_model *model, struct rt_weights *out);
  /* The weights were written by upload (the init, which the executor runs
   * on the host so that every backend starts from the same values; a
   * resume): refresh whatever the forward reads instead of the master
   * weights (a bf16 copy). */
  void (*weights_changed)(void);
  /* Optional (NULL: the executor draws the initial weights on the host and
   * uploads them): writes them into the weights buffer on the device, for
   * every tensor of model->layout the slice hxk_init_param gives (local
   * layer l is global layer layer_begin + l), then refreshes what the
   * forward reads. The CUDA backend's values are each within one float ulp
   * of the host's (kernels/cuda/init.cu); asynchronous like a kernel. */
  void (*init_weights)(uint64_t seed, int layer_begin);
  /* Bytes of the activations one layer keeps per micro-batch, and of the
   * scratch that layers and head share. */
  size_t (*acts_bytes)(void);
  size_t (*scratch_bytes)(void);
  /* The front of the scratch that holds one layer's full activations when
   * the backward recomputes them (model->recompute; else 0): what the
   * executor counts as RT_MEM_RECOMPUTE. */
  size_t (*recompute_bytes)(void);

  /* The kernel table: one micro-batch of model->nseq sequences (n tokens),
   * activations of dtype. Token arrays are device memory. */
  void (*embed_forward)(void *x, const int32_t *tokens);
  void (*embed_backward)(const int32_t *tokens, const void *dx); /* adds into g */
  /* Local layer l: out = layer(x), keeping acts; backward WRITES dx and adds
   * into g. */
  void (*layer_forward)(int l, const void *x, void *out, void *acts, void *scratch);
  void (*layer_backward)(int l, const void *dout, void *dx, const void *acts, void *scratch);
  /* Final norm, LM head and the loss scale * sum -log p(target), with its
   * backward: ADDS into g and dx. count: add the loss to what take_loss
   * returns (TP rank 0 counts, the other TP ranks compute the same). */
  void (*head)(const void *x, const int32_t *targets, double scale, void *dx, void *scratch,
               bool count);
  /* The loss counted since the last call (synchronous). */
  double (*take_loss)(void);
  /* sum g^2 over layout->norm, in double (synchronous). */
  double (*grad_norm_sumsq)(void);
  /* Clips the gradients by hxk_clip_factor(global_sumsq, grad_clip) and
   * takes one AdamW step (hxk_adamw_step's formulas) over layout->opt,
   * refreshing what the forward reads. The m and v buffers hold
   * layout->moments floats each (struct rt_weights). */
  void (*optimizer_step)(double global_sumsq, double grad_clip, const struct hxk_adamw *hp,
                         long step, double lr);
};

/* Opens this rank's device (the CUDA backend binds a GPU by local rank and
 * checks its free memory against cfg->device_memory_bytes). Called once,
 * after hx_rt_init; collective over MPI_COMM_WORLD. */
const struct rt_device *rt_device_open(const struct hx_rt_rank_config *cfg);

/* ---------------------------------------------------------------------------
 * The transport: device buffers between ranks. Every wait goes through
 * hx_rt_wait_all naming its peer or group (rt_init.h), so a stall is traced.
 * `what` names the operation in messages; micro_batch is -1 when none.
 * ------------------------------------------------------------------------- */

/* A non-blocking send and what it needs while in flight (requests; a host
 * staging buffer where the device's memory is not the host's). */
struct rt_send;

/* A gradient all-reduce in flight (group_allreduce_start). */
struct rt_request;

/* A receive posted ahead of the op that needs it (recv_start). */
struct rt_recv;

struct rt_transport {
  const char *name;

  /* Between stage leaders (world ranks), tags from hx_rt_message_tag. A send
   * handle carries one message of at most max_n elements at a time;
   * send_wait completes it (nothing in flight: returns at once), and the
   * source buffer may be rewritten only after that. recv blocks. */
  struct rt_send *(*send_new)(long max_n, enum rt_dtype dt);
  void (*send_start)(struct rt_send *s, const void *buf, long n, int peer, int tag,
                     int micro_batch, const char *what);
  void (*send_wait)(struct rt_send *s, const char *what);
  void (*recv)(void *buf, long n, enum rt_dtype dt, int peer, int tag, int micro_batch,
               const char *what);
  /* The same receive posted ahead (rt_exec_ops.c: before the compute that
   * precedes the op that needs it, so the hop runs under that compute, as
   * passes/cost/sim.c charges it). A handle carries one receive of at most
   * max_n elements at a time. start posts it into buf after the work queued
   * on the device so far (buf's earlier readers) and returns at once; buf
   * belongs to the transport until wait returns, and the work the device
   * queues after wait sees the message. Posted in the same order as recv
   * would be called, so messages match as they did. */
  struct rt_recv *(*recv_new)(long max_n, enum rt_dtype dt);
  void (*recv_start)(struct rt_recv *r, void *buf, long n, int peer, int tag, int micro_batch,
                     const char *what);
  void (*recv_wait)(struct rt_recv *r, const char *what);

  /* The stage's TP group (cfg->tp_group), set up by rt_transport_open: the
   * leader's buf to every member, and an element-wise sum in place. */
  void (*tp_broadcast)(void *buf, long n, enum rt_dtype dt, int micro_batch, const char *what);
  void (*tp_allreduce)(void *buf, long n, enum rt_dtype dt, const char *what);
  /* Sequence parallelism over the same group, blocking like tp_allreduce
   * and ordered after the device's queued work: counts[i] elements belong
   * to TP member i, back to back in TP-rank order (uneven, zeros allowed).
   * reduce_scatter: recv gets this member's block of send summed over the
   * group (send and recv must not overlap); allgather: in place, buf holds
   * every block and this member's is sent to the others. */
  void (*tp_reduce_scatter)(const void *send, void *recv, const long *counts, enum rt_dtype dt,
                            const char *what);
  void (*tp_allgather)(void *buf, const long *counts, enum rt_dtype dt, const char *what);

  /* Gradient-sync groups: every member opens its groups in increasing id
   * order (collective over the group); the handle names it afterwards. The
   * sum is of fp32 gradients, in fp32. */
  int (*group_open)(const struct hx_rt_group *g);
  void (*group_allreduce)(int group, float *buf, long n, const char *what);

  /* The same sum, overlapped with the backward (rt_exec_sync.c): start
   * posts it after the work queued on the device so far (the pack) and
   * returns at once; buf belongs to the transport until wait returns, which
   * frees the request, and the work the device queues after wait sees the
   * sum. test reports whether it is done without waiting, and gives the
   * transport a chance to move it on (MPI advances non-blocking collectives
   * only inside MPI calls). The executor starts and waits requests in one
   * order that every rank agrees on (rt_exec_sync.c), so a transport whose
   * collectives block may do the work in start or in wait. */
  struct rt_request *(*group_allreduce_start)(int group, float *buf, long n, const char *what);
  bool (*group_allreduce_test)(struct rt_request *r);
  void (*group_allreduce_wait)(struct rt_request *r);

  /* ZeRO-1 (a group with shard_ppm; rt_exec_sync.c), completed by
   * group_allreduce_test and group_allreduce_wait like the all-reduce.
   * counts[i] floats belong to member i (the group's ranks, increasing),
   * back to back. reduce_scatter: send holds every member's block; recv gets
   * this member's block summed over the group (send and recv must not
   * overlap). allgather: in place, buf holds every block and this member's
   * is sent to the others. Uneven counts, zeros allowed. NULL in a transport
   * that has none: the executor then refuses a sharded plan. */
  struct rt_request *(*group_reduce_scatter_start)(int group, const float *send, float *recv,
                                                   const long *counts, const char *what);
  struct rt_request *(*group_allgather_start)(int group, float *buf, const long *counts,
                                              const char *what);

  /* Context and head parallelism (rtlib/seq/): exchanges among world ranks
   * on a communicator the transport keeps for them (made by
   * rt_transport_open), so they never match a pipeline message. Blocking:
   * every receive is posted, then every send, and the call returns when all
   * are complete. Sizes never travel: both ends of a message derive its n
   * from the same tables, and messages between one pair keep their order.
   * sendrecv is the ring's step: send_n elements to dest while receiving
   * recv_n from source (a count of 0 means no message that way). */
  void (*sendrecv)(const void *sendbuf, long send_n, int dest, void *recvbuf, long recv_n,
                   int source, enum rt_dtype dt, const char *what);
  /* A ragged all-to-all among world ranks peers[0..npeers): send_n[i]
   * elements at sendbuf + send_off[i] go to peers[i], recv_n[i] elements
   * from peers[i] land at recvbuf + recv_off[i] (elements of dt; a count of 0
   * is no message; this rank may be a peer of its own). Each peer makes the
   * matching call, with counts that agree pair by pair; the peers need not
   * form a group (a ring step with several neighbours is one call). */
  void (*alltoallv)(const int *peers, int npeers, const void *sendbuf, const long *send_n,
                    const long *send_off, void *recvbuf, const long *recv_n,
                    const long *recv_off, enum rt_dtype dt, const char *what);
};

/* Opens the transport: collective over MPI_COMM_WORLD (it creates the TP
 * communicators). dev is the device whose buffers it carries. */
const struct rt_transport *rt_transport_open(const struct hx_rt_rank_config *cfg,
                                             const struct rt_device *dev);

#endif
