/* The executor's state, shared by rtlib/rt_exec*.c only (generated code sees
 * hexic_rt.h alone). The executor is one code path for every backend: what
 * touches device memory or the network goes through e->dev and e->tr
 * (rt_backend.h). */
#ifndef HX_RT_EXEC_INTERNAL_H
#define HX_RT_EXEC_INTERNAL_H

#include <mpi.h>
#include <stdint.h>

#include "hexic_rt.h"
#include "kernels/cpu/llama.h"
#include "rt_backend.h"
#include "rt_ckpt.h"
#include "rt_data.h"

/* Offsets and sizes are long: 64 bits on the LP64 systems the runtime runs
 * on, so one activation of 2^30 floats or a rank's billions of parameters
 * cannot wrap (MPI's int counts are chunked: hx_rt_chunk_count). */
_Static_assert(sizeof(long) >= 8, "rtlib needs a 64-bit long (LP64)");

/* This rank's parameters: the layout the device allocates them by (four
 * flat fp32 buffers holding the rank's tensors in the spec's order:
 * tok_emb, its layers, final_norm, lm_head, so every gradient-sync group's
 * tensors are a list of ranges and AdamW is one call over everything) and
 * the device's buffers. */
struct rt_params {
  struct rt_layout lay;
  struct rt_weights dev; /* w, g, m, v in device memory */
};

/* Buffers of one micro-batch in flight (one slot), in device memory but for
 * the host's token batch, and the sends still reading out_act and din. */
struct rt_slot {
  int32_t *host_tokens; /* [2 * mbs * T]: inputs, then targets (rt_data) */
  int32_t *tokens;      /* the same on the device */
  void *acts;           /* every local layer's saved activations */
  void *out_act;        /* forward output, being sent to the next stage */
  void *dout;           /* gradient of the stage output (head's or received) */
  void *din;            /* gradient of the stage input, being sent back */
  struct rt_send *act_send, *grad_send;
};

/* A list of ranges of the flat parameter buffers, adjacent ones merged. */
struct rt_runs {
  int n, cap;
  struct rt_run *items;
  long floats; /* sum of the runs' lengths */
};

/* One all-reduce of the gradient sync (a bucket): the parts of one
 * gradient-sync group that one point of the step's last backward completes
 * (one decoder layer's, the head's, or the embedding's with the head's), as
 * ranges of the flat gradient buffer, packed into its own place of e->pack
 * so that buckets can be in flight together (rt_exec_sync.c). */
struct rt_bucket {
  int group_index; /* into cfg->groups */
  int handle;      /* the transport's group */
  int key;         /* when the backward frees it: HEAD_KEY, a global layer, EMB_KEY */
  int ready;       /* the same in local terms: local layer, nlayers (head), -1 (end) */
  struct rt_runs runs;
  struct rt_runs zero; /* replicated ranges among runs: zeroed off TP rank 0 */
  long pack_off;       /* floats into e->pack */
  /* ZeRO-1 (the group has shard_ppm): per member, its floats of this
   * bucket's pack (NULL: unsharded, an all-reduce); this rank's block is
   * [own_at, own_at + own.floats) of the pack, received at recv_off of
   * e->sync.recv, and own is its ranges of the flat buffers. */
  long *counts;
  long own_at, recv_off;
  struct rt_runs own;
  struct rt_request *req;
  double start_s, emu_begin_s; /* when started; --emulate: when its link is free */
};

/* The step's gradient sync as this rank runs it (rt_exec_sync.c). */
struct rt_sync_state {
  int nbuckets;
  struct rt_bucket *buckets; /* in the one order every rank starts and waits them */
  int started;               /* buckets[0..started) are in flight or done */
  int last_backward_mb;      /* the micro-batch of the step's last backward; -1: none */
  int norm_sum_mb;           /* SP: the backward that sums the norm gains; -1: GRAD_SYNC */
  bool overlap;              /* HEXIC_SYNC_OVERLAP: start during the backward (default) */
  bool trace;                /* HEXIC_SYNC_TRACE: one line per step of starts and backwards */
  struct rt_runs leftover;   /* replicated ranges in no bucket: zeroed off TP rank 0 */
  char *trace_text;
  size_t trace_len, trace_cap;
  double emu_link_free_s; /* --emulate: when this rank's gradient link is free */
  bool sharded;           /* some bucket is ZeRO-1's */
  float *recv;            /* ZeRO-1: the own blocks of the reduce-scatters (device) */
  struct rt_tensor *opt;  /* the optimizer table (layout->opt) */
};

/* --emulate's first steps calibrate: their compute ops run one rank at a
 * time, each timed on an otherwise idle machine (rt_emulate.c). */
enum { RT_EMU_CALIBRATION_STEPS = 3, RT_EMU_OP_KINDS = HX_RT_OPTIMIZER + 1 };

/* A moment as --emulate counts it: the wall clock and the main thread's
 * CPU clock, in seconds. */
struct rt_emu_mark {
  double wall_s, cpu_s;
};

/* --emulate's state (rt_emulate.c). */
struct rt_emu {
  bool on;
  const struct hx_rt_emulation *fig;
  MPI_Comm comm;     /* the send stamps' own communicator */
  double *stamps;    /* per slot and kind (activation, gradient): when its send started */
  MPI_Request *reqs; /* the stamps' sends */
  /* the compute op running now (in_op), from its start: its waits' wall and
   * CPU seconds so far, and when the wait running now began */
  bool in_op, calibrating;
  int op_index; /* in cfg->schedule */
  struct rt_emu_mark op_start, waited, wait_start;
  int wait_depth;
  /* per kind of op (enum hx_rt_op_kind, RT_EMU_OP_KINDS of them): the
   * fewest CPU seconds an op of the kind has taken, in the calibration
   * steps and since (0: not measured) */
  double *reference_cpu_s;
  long long first_step; /* the first step this process ran; -1: none yet */
  int calibration_steps; /* RT_EMU_CALIBRATION_STEPS or $HEXIC_EMULATE_CALIBRATION */
  int lock_fd;          /* the calibration's machine-wide lock (a file), -1: none */
  bool lock_held;
  /* compute ops run at the devices' speeds, and those whose own run
   * overshot their emulated end (the machine could not keep up) */
  long long emulated_ops, late_ops;
  /* the compute op that just ended: its compute at the device's speed
   * (slowdown x its reference CPU seconds), which its trace event carries */
  double op_emulated_s;
};

/* A HexiSeq stage as this rank runs it (cfg->seq; rt_exec_ops.c): its
 * tokens of every sequence (what e->tokens counts), rtlib/seq's attention
 * hook, and the stage leader's gather and scatter of whole activations
 * across the pipeline hops. */
struct rt_hexiseq {
  bool on;
  struct rt_seq *hook;       /* rtlib/seq's state */
  long local_len;            /* tokens of each sequence here */
  int *positions;            /* their global positions, [local_len] */
  long hop_tokens;           /* per micro-batch across a hop: mbs * seq_len */
  struct rt_runs *unit_rows; /* leader: per unit (ring order), its rows of a whole activation */
  void *whole;               /* leader: a whole activation or gradient received (device dtype) */
  void *pack;                /* leader: one unit's rows, sized for the largest unit's */
};

struct rt_exec {
  const struct hx_rt_rank_config *cfg;
  const struct rt_device *dev;
  const struct rt_transport *tr;
  struct hxk_dims dims;
  struct hxk_shard shard;
  struct rt_model model; /* what the device's kernels run */
  long tokens;           /* per micro-batch: mbs * T */
  size_t act_bytes;      /* one activation [tokens, D] in the device's dtype */
  size_t acts_bytes;     /* what one layer keeps per micro-batch */
  struct rt_params p;
  struct rt_slot *slots;
  void *x0, *x1;   /* ping-pong activations [tokens, D] */
  void *scratch;   /* layer and head scratch */
  struct hx_rt_data data;
  int64_t step, steps;
  struct rt_sync_state sync; /* the gradient sync's buckets */
  float *pack;               /* every bucket's packed gradient (device) */
  struct rt_runs replicated; /* tensors every TP rank holds whole: zeroed off TP rank 0 */
  struct rt_runs in_norm;    /* what this rank adds to the global norm: rt_for_each_owned */
  struct rt_emu emu;
  struct rt_hexiseq hs; /* on: a HexiSeq stage */
  /* Sequence parallelism (model.sp_size > 1: a TP stage of whole sequences
   * with cfg->sequence_parallel): the layers' inputs and outputs are this TP
   * rank's rows (hxk_sp_rows of tokens), which start sp_off_bytes into a
   * whole [tokens, D] activation and fill rows_bytes (act_bytes when off);
   * sp_full holds a whole one on stages with the embedding or the head (its
   * output, the head's input, the embedding's gradient); sp_counts: per TP
   * rank, its elements of a collective (rt_tp_reduce_scatter). */
  size_t rows_bytes, sp_off_bytes;
  void *sp_full;
  long *sp_counts;
  struct rt_hops *hops; /* receives posted ahead and their buffers (rt_exec_ops.c) */
  /* An evaluation pass (rt_forward_pass): the token stream and the batch
   * its forwards read in place of training's (data at step); NULL when
   * training. */
  const struct hx_rt_data *eval_data;
  int64_t eval_batch;
};

/* Host copies of the parameters and moments, for checkpoints and the weight
 * dump (the device's buffers need not be host memory). */
struct rt_host_params {
  float *w, *m, *v;
};

/* rt_exec_params.c */
void rt_params_init(struct rt_exec *e);

/* Host buffers for the parameters (and with moments, m and v): zeroed;
 * download fills them from the device, upload writes them back (and tells
 * the device its weights changed). */
struct rt_host_params rt_host_params_new(const struct rt_exec *e, bool moments);
void rt_host_params_free(struct rt_host_params *h);
void rt_host_params_download(const struct rt_exec *e, struct rt_host_params *h);
void rt_host_params_upload(const struct rt_exec *e, const struct rt_host_params *h);

/* The checkpoint's tensors, pointing into h; with out NULL only counts them. */
int rt_ckpt_tensors(const struct rt_exec *e, const struct rt_host_params *h,
                    struct hx_rt_ckpt_tensor *out);

/* Layer tensor t of local layer l: offset into the flat buffers. Here, not
 * in rt_exec_params.c, which lays the buffers out: rt_exec_sync.c needs it
 * and params calls sync, and two files must not call into each other. */
static inline long rt_layer_tensor(const struct rt_exec *e, int l, enum hxk_param t) {
  long off = e->p.lay.layers + (long)l * e->p.lay.layer_floats;
  for (int k = 0; k < (int)t; k++)
    off += hxk_layer_param_floats(&e->dims, &e->shard, (enum hxk_param)k);
  return off;
}

/* A piece of one tensor this rank holds: rows [r0, r1) x columns [c0, c1) of
 * the full tensor, stored packed from offset off of the flat buffers. */
struct rt_piece {
  enum hxk_param t;
  int layer; /* global layer; 0 for tok_emb, final_norm, lm_head */
  long off, r0, r1, c0, c1;
};
typedef void (*rt_piece_fn)(void *arg, const struct rt_piece *piece);

/* One copy of every parameter over the world, the rule both the global
 * gradient norm and the weight dump follow: pipeline 0 only (after the sync
 * every pipeline holds the same values) and, of a HexiSeq stage, the first
 * unit of its ring (every unit holds the same weights); of what every TP rank holds whole,
 * TP rank 0's copy; of a kv head a TP split replicates, the copy of the rank
 * holding its first query head; tok_emb from the first stage (a tied copy on
 * a last stage is a duplicate). Visits this rank's share in spec order. */
void rt_for_each_owned(const struct rt_exec *e, rt_piece_fn visit, void *arg);

/* rt_exec_sync.c */
void rt_runs_add(struct rt_runs *r, long off, long n);
/* The buckets and, for ZeRO-1's groups, the shards: the optimizer table,
 * the moments' size and what counts toward the norm (layout->opt, moments,
 * norm). Before the device's setup; communicates nothing. */
void rt_sync_plan(struct rt_exec *e);
/* Opens the transport's groups (collective) and allocates the packs. */
void rt_sync_init(struct rt_exec *e);
/* ZeRO-1, after the optimizer step: every member's updated shard of the
 * weights to the others (all-gathers), so each holds its full TP shard. */
void rt_sync_gather_weights(struct rt_exec *e);
/* ZeRO-1, collective over the groups: the host copy's moments (h->m, h->v,
 * laid out like the weights) completed from the other members' shards. */
void rt_sync_gather_moments(const struct rt_exec *e, float *m, float *v);
/* Bytes of model state this rank allocated: weights, gradients, m, v. */
int64_t rt_model_state_bytes(const struct rt_exec *e);
/* Called by the executor through the step's last backward (of micro-batch
 * m; a no-op for the other backwards): `done` is the lowest local layer
 * whose backward is complete — nlayers at its start (the head's gradient is
 * complete then), each local layer after its backward, -1 at its end. The
 * buckets this frees start, so their all-reduces run under the backward of
 * the layers below. */
void rt_sync_backward_point(struct rt_exec *e, int m, int done);
/* The GRAD_SYNC op: starts what is left, waits for every bucket. */
void rt_sync_gradients(struct rt_exec *e);
void rt_tp_allreduce(void *buf, long n, void *arg); /* the device's rt_tp_reduce_fn */
/* Sequence parallelism's hooks (rt_tp_reduce_scatter_fn, rt_tp_allgather_fn):
 * rows as hxk_sp_rows of n over the TP group, on the transport. */
void rt_tp_reduce_scatter(const void *send, void *recv, long n, int width, void *arg);
void rt_tp_allgather(void *buf, long n, int width, void *arg);

/* The first gradient element of this rank that is not finite, in the
 * order the backward produces them (the spec's tensor order reversed: where
 * the NaN or Inf began, not every tensor below it that it spread to; the
 * first element of that tensor): its tensor's name
 * (hx_rt_ckpt_tensor_name), its place in the full tensor and its value. */
struct rt_bad_gradient {
  char name[64];
  long row, col;
  float value;
};
/* Downloads the gradients and looks for one (after a step whose norm was not
 * finite: never on a good step). Returns the tensor's place in that order
 * over the whole model, 0 first, so the lowest over the world is the first
 * (INT_MAX: every gradient here is finite), and fills out. */
int rt_first_non_finite_gradient(const struct rt_exec *e, struct rt_bad_gradient *out);

/* rt_exec_params.c: --dump-weights */
void rt_dump_weights(const struct rt_exec *e, const char *path);

/* rt_exec_ops.c */
/* HexiSeq: the rank's tokens and the attention hook (after the transport
 * opened; before rt_params_init, which hands them to the device). */
void rt_hexiseq_init(struct rt_exec *e);
void rt_slots_init(struct rt_exec *e);
void rt_run_op(struct rt_exec *e, const struct hx_rt_op *op);
void rt_wait_sends(struct rt_exec *e);
/* Evaluation: the schedule's RECV_ACT, FORWARD and SEND_ACT ops in their
 * order, nothing else (no backward, sync or optimizer), on batch
 * e->eval_batch of e->eval_data; the head's loss counts on the device as in
 * training (take_loss) and its gradient lands in g, which the caller
 * zeroes. Receives are not posted ahead (the schedule's post points are
 * backward ops), and every send is waited for before it returns. */
void rt_forward_pass(struct rt_exec *e);

/* rt_emulate.c, --emulate: the pure rules, in seconds: when a compute op
 * that began at start_s ends on the emulated device (its waits' wait_s wall
 * seconds, then slowdown x reference_cpu_s, never faster than this machine);
 * the reference an op's calibration runs leave (*fewest_s, updated; 0: none
 * yet); a message of bytes over a link; a ring all-reduce of bytes over
 * nranks on the link. */
double rt_emu_op_end_s(double start_s, double wait_s, double slowdown, double reference_cpu_s);
double rt_emu_reference_cpu_s(double *fewest_s, double cpu_s);
/* An op whose own run, from start_s to ran_until_s, overshot its emulated
 * end by more than a tenth of its emulated time (and 0.1 ms). */
bool rt_emu_late(double start_s, double end_s, double ran_until_s);
double rt_emu_link_s(const struct hx_rt_link *l, double bytes);
double rt_emu_ring_s(const struct hx_rt_link *l, int nranks, double bytes);
/* A ZeRO-1 reduce-scatter or all-gather over nranks whose largest member
 * share is largest_bytes: (n - 1) steps of it (cost.c's hx_reduce_scatter_s). */
double rt_emu_shard_s(const struct hx_rt_link *l, int nranks, double largest_bytes);
/* Collective over the world when requested (every rank gets the same
 * options), once the run is set up; rt_emu_stop once training ends. */
void rt_emu_init(struct rt_exec *e, bool requested);
void rt_emu_stop(struct rt_exec *e);
/* The hooks, each a no-op unless emulating: around a compute op (forward,
 * backward, optimizer; op_index in cfg->schedule); the time a send or an
 * all-reduce starts on the emulated device (hx_rt_now_s when not emulating
 * or outside an op); after a leader's send_start (kind 0 activation, 1
 * gradient); after a leader's recv of bytes from peer; after an all-reduce
 * of bytes over nranks that began at start_s (group_index -1: the TP group,
 * else the index in cfg->groups); when every send has been waited. */
void rt_emu_op_begin(struct rt_exec *e, int op_index);
void rt_emu_op_end(struct rt_exec *e);
double rt_emu_clock(struct rt_exec *e);
void rt_emu_stamp_send(struct rt_exec *e, int kind, int micro_batch, int peer, int tag);
void rt_emu_arrive(struct rt_exec *e, int peer, int tag, double bytes);
void rt_emu_allreduce_done(struct rt_exec *e, int group_index, int nranks, double bytes,
                           double start_s);
/* After gradient-sync group group_index's collective that this rank began
 * at start_s and that takes link_s on the emulated link: ends link_s after
 * the group's last member began it; returns that time. */
double rt_emu_collective_done(struct rt_exec *e, int group_index, double start_s, double link_s);
void rt_emu_finish(struct rt_exec *e);

/* rt_emulate.c, HEXIC_TRACE=FILE: the measured timeline in trace.json's
 * format (codegen/trace.c's event names and fields, one track per rank).
 * Started in rt_emu_init and written by rank 0 in rt_emu_stop (both
 * collective); the compute ops are traced by rt_emu_op_begin/end, the rest
 * by these calls. rt_trace_now is 0 when tracing is off, and an event of a
 * kind is then dropped at one branch. Kinds: passes/cost's event names. */
enum rt_trace_kind {
  RT_TRACE_FORWARD,
  RT_TRACE_BACKWARD,
  RT_TRACE_SEND,
  RT_TRACE_RECV,
  RT_TRACE_ALLREDUCE,
  RT_TRACE_OPTIMIZER,
  RT_TRACE_BROADCAST,
  RT_TRACE_LOSS_NORM,
  RT_TRACE_ALLGATHER,
};
double rt_trace_now(void);
/* layer: a gradient bucket's global layer (-1 emb/head, else -2); peer: the
 * other leader of a hop, a gradient all-reduce's group (its global id), else -1. */
void rt_trace_event(const struct rt_exec *e, enum rt_trace_kind kind, int micro_batch, int layer,
                    int peer, double start_s, double end_s);

#endif
