/* The executor's state, shared by rtlib/rt_exec*.c only (generated code sees
 * hexic_rt.h alone). */
#ifndef HX_RT_EXEC_INTERNAL_H
#define HX_RT_EXEC_INTERNAL_H

#include <mpi.h>
#include <stdint.h>

#include "hexic_rt.h"
#include "kernels/cpu/llama.h"
#include "rt_ckpt.h"
#include "rt_data.h"

/* Offsets and sizes are long: 64 bits on the LP64 systems the runtime runs
 * on, so one activation of 2^30 floats or a rank's billions of parameters
 * cannot wrap (MPI's int counts are chunked: hx_rt_chunk_count). */
_Static_assert(sizeof(long) >= 8, "rtlib needs a 64-bit long (LP64)");

/* This rank's parameters, gradients and AdamW moments: each one flat buffer
 * holding the rank's tensors in the spec's order (tok_emb, its layers,
 * final_norm, lm_head), so every gradient-sync group's tensors are one
 * contiguous range and AdamW is one call over everything. */
struct rt_params {
  long n; /* floats in each buffer */
  float *w, *g, *m, *v;
  uint8_t *decay;                    /* AdamW weight decay on (1) or off (0), per element */
  long tok_emb, final_norm, lm_head; /* offsets; -1 when not held */
  long layers;                       /* offset of the first local layer */
  long layer_floats;                 /* floats of one layer */
  int nlayers;                       /* local layers */
  struct hxk_layer_params *lw, *lg;  /* per local layer, into w and g */
  struct hxk_head_params hw, hg;
};

/* Buffers of one micro-batch in flight (one slot), and the requests of the
 * sends still reading them (one per chunk of the message: rt_exec.chunks). */
struct rt_slot {
  int32_t *inputs, *targets; /* [mbs * T] */
  float *acts;               /* every local layer's saved activations */
  float *out_act;            /* forward output, being sent to the next stage */
  float *dout;               /* gradient of the stage output (head's or received) */
  float *din;                /* gradient of the stage input, being sent back */
  MPI_Request *act_req, *grad_req;
  int act_m, grad_m; /* the micro-batch each send carries (for the stall report) */
};

/* A contiguous range of the flat parameter buffers. */
struct rt_run {
  long off, n;
};

/* A list of ranges, adjacent ones merged. */
struct rt_runs {
  int n, cap;
  struct rt_run *items;
  long floats; /* sum of the runs' lengths */
};

/* One gradient-sync group as this rank executes it: the ranges of p.g it
 * sums, packed into e->pack for one all-reduce. */
struct rt_sync {
  MPI_Comm comm;
  struct rt_runs runs;
};

struct rt_exec {
  const struct hx_rt_rank_config *cfg;
  struct hxk_dims dims;
  struct hxk_shard shard;
  struct hxk_layer_ctx layer_ctx;
  float *rope;
  int *kv_of;
  long tokens;     /* per micro-batch: mbs * T */
  long act_floats; /* per layer and micro-batch */
  int chunks;      /* MPI messages per activation or gradient (hx_rt_chunk_count) */
  struct rt_params p;
  struct rt_slot *slots;
  float *x0, *x1; /* ping-pong activations [tokens, D] */
  float *scratch; /* layer and head scratch */
  struct hx_rt_data data;
  double loss_sum; /* this step's scaled loss over this rank's sequences */
  int64_t step, steps;
  MPI_Comm tp_comm;     /* this stage's TP group (MPI_COMM_NULL when tp == 1) */
  struct rt_sync *syncs; /* one per cfg->groups entry */
  float *pack;           /* the largest group's packed gradient */
  struct rt_runs replicated; /* tensors every TP rank holds whole: zeroed off TP rank 0 */
  struct rt_runs in_norm;    /* what this rank adds to the global norm: rt_for_each_owned */
};

/* rt_exec_params.c */
void rt_params_init(struct rt_exec *e);
double rt_grad_sumsq_for_norm(const struct rt_exec *e);
int rt_ckpt_tensors(const struct rt_exec *e, struct hx_rt_ckpt_tensor *out);

/* Layer tensor t of local layer l: offset into the flat buffers. */
long rt_layer_tensor(const struct rt_exec *e, int l, enum hxk_param t);

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
 * every pipeline holds the same values); of what every TP rank holds whole,
 * TP rank 0's copy; of a kv head a TP split replicates, the copy of the rank
 * holding its first query head; tok_emb from the first stage (a tied copy on
 * a last stage is a duplicate). Visits this rank's share in spec order. */
void rt_for_each_owned(const struct rt_exec *e, rt_piece_fn visit, void *arg);

/* rt_exec_sync.c */
void rt_runs_add(struct rt_runs *r, long off, long n);
void rt_sync_init(struct rt_exec *e);
void rt_sync_gradients(struct rt_exec *e);
void rt_tp_allreduce(float *buf, long n, void *arg); /* the kernels' hxk_allreduce_fn */

/* rt_exec_dump.c */
void rt_dump_weights(const struct rt_exec *e, const char *path);

/* rt_exec_ops.c */
void rt_slots_init(struct rt_exec *e);
void rt_run_op(struct rt_exec *e, const struct hx_rt_op *op);
void rt_wait_sends(struct rt_exec *e);

void *rt_calloc(size_t count, size_t size);

#endif
