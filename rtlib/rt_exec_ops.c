/* The schedule's operations on one micro-batch: receive, forward, send,
 * backward. Sends are non-blocking from per-slot buffers (so two neighbours
 * that both send in 1F1B's steady phase cannot deadlock); every wait goes
 * through hx_rt_wait_all with the peer or group it waits on, so a stall is
 * traced to the rank that stopped (rt_init.h).
 *
 * With tensor parallelism every TP rank of a stage runs the same ops on the
 * same full activations: only the stage leader talks to the neighbouring
 * stages' leaders, and broadcasts what it received inside its TP group. Every
 * TP rank computes the (unsplit) embedding and head itself, identically, so
 * no gradient of the stage boundary or of those tensors needs a broadcast;
 * the loss is counted on TP rank 0 only. */
#include <stdlib.h>
#include <string.h>

#include "rt_exec_internal.h"
#include "rt_init.h"

enum { TAG_ACT = 1, TAG_GRAD = 2 }; /* message kinds: hx_rt_message_tag */

static int tag_of(int micro_batch, int kind) {
  return hx_rt_message_tag(micro_batch, kind, hx_rt_tag_ub());
}

static struct rt_slot *slot_of(struct rt_exec *e, int m) {
  return &e->slots[m % e->cfg->activation_slots];
}

static bool is_leader(const struct rt_exec *e) { return e->cfg->tp_rank == e->cfg->leader_tp_rank; }

static float *floats(long n) { return rt_calloc((size_t)n, sizeof(float)); }

void rt_slots_init(struct rt_exec *e) {
  const struct hx_rt_rank_config *c = e->cfg;
  long xd = e->tokens * e->dims.dim;
  e->chunks = hx_rt_message_chunks(xd);
  e->slots = rt_calloc((size_t)c->activation_slots, sizeof *e->slots);
  for (int i = 0; i < c->activation_slots; i++) {
    struct rt_slot *s = &e->slots[i];
    s->inputs = rt_calloc((size_t)e->tokens, sizeof *s->inputs);
    s->targets = rt_calloc((size_t)e->tokens, sizeof *s->targets);
    s->acts = floats(e->act_floats * (e->p.nlayers > 0 ? e->p.nlayers : 1));
    s->out_act = floats(xd);
    s->dout = floats(xd);
    s->din = floats(xd);
    s->act_req = rt_calloc((size_t)e->chunks, sizeof *s->act_req);
    s->grad_req = rt_calloc((size_t)e->chunks, sizeof *s->grad_req);
    for (int k = 0; k < e->chunks; k++)
      s->act_req[k] = s->grad_req[k] = MPI_REQUEST_NULL;
    s->act_m = s->grad_m = -1;
  }
  e->x0 = floats(xd);
  e->x1 = floats(xd);
  long layer_scratch = hxk_layer_scratch_floats(&e->layer_ctx, e->cfg->micro_batch_size);
  long head_scratch = hxk_head_scratch_floats(&e->dims, e->tokens);
  e->scratch = floats(layer_scratch > head_scratch ? layer_scratch : head_scratch);
}

/* A wait on one peer, named for the stall report (rt_init.h). */
static void wait_on_peer(MPI_Request *r, int n, const char *what, int micro_batch, int peer) {
  struct hx_rt_wait w = {what, micro_batch, peer, 0, NULL};
  hx_rt_wait_all(n, r, &w);
}

/* Posts one message of n floats to or from peer as its chunks (all with the
 * same tag: MPI keeps them in order), one request per chunk in reqs. */
static void post_floats(float *buf, long n, int peer, int tag, bool send, MPI_Request *reqs,
                        const char *what) {
  int64_t max = hx_rt_max_count();
  for (int k = 0, nk = hx_rt_message_chunks(n); k < nk; k++) {
    int64_t off;
    int count;
    hx_rt_chunk_at(n, max, k, &off, &count);
    int rc = send ? MPI_Isend(buf + off, count, MPI_FLOAT, peer, tag, MPI_COMM_WORLD, &reqs[k])
                  : MPI_Irecv(buf + off, count, MPI_FLOAT, peer, tag, MPI_COMM_WORLD, &reqs[k]);
    hx_rt_mpi_check(rc, what);
  }
}

static void recv_floats(struct rt_exec *e, float *buf, long n, int from, int m, int kind,
                        const char *what) {
  int tag = tag_of(m, kind);
  MPI_Request *reqs = rt_calloc((size_t)e->chunks, sizeof *reqs);
  post_floats(buf, n, from, tag, false, reqs, what);
  wait_on_peer(reqs, e->chunks, what, m, from);
  free(reqs);
}

/* Global sequences of micro-batch m: this pipeline's, mbs at a time. */
static void load_batch(struct rt_exec *e, int m, struct rt_slot *s) {
  const struct hx_rt_rank_config *c = e->cfg;
  int64_t j0 = c->first_sequence + (int64_t)m * c->micro_batch_size;
  char err[1024];
  if (!hx_rt_data_batch(&e->data, e->dims.seq_len, c->train->global_batch, e->step, j0,
                        c->micro_batch_size, s->inputs, s->targets, err, sizeof err))
    hx_rt_fatal(HX_RT_EXIT_ERROR, "step %lld: %s", (long long)e->step + 1, err);
}

/* Embedding (first stage) or the received activation, this stage's layers,
 * then on the last stage the loss — whose backward runs at once, because the
 * head's kernel computes both in one pass and its gradient only adds. */
static void forward(struct rt_exec *e, int m) {
  const struct hx_rt_rank_config *c = e->cfg;
  struct rt_slot *s = slot_of(e, m);
  long nseq = c->micro_batch_size;
  load_batch(e, m, s);
  if (c->has_embedding)
    hxk_embedding_forward(e->x0, s->inputs, e->p.w + e->p.tok_emb, e->tokens, e->dims.dim);
  float *x = e->x0, *y = e->x1;
  for (int l = 0; l < e->p.nlayers; l++) {
    hxk_layer_forward(&e->layer_ctx, &e->p.lw[l], x, y, s->acts + l * e->act_floats, e->scratch,
                      nseq);
    float *t = x;
    x = y;
    y = t;
  }
  if (c->has_head) {
    double scale = 1.0 / ((double)c->train->global_batch * e->dims.seq_len);
    memset(s->dout, 0, (size_t)(e->tokens * e->dims.dim) * sizeof(float));
    double loss = hxk_head_forward_backward(&e->dims, &e->p.hw, &e->p.hg, x, s->targets,
                                            e->tokens, scale, s->dout, e->scratch);
    if (c->tp_rank == 0)
      e->loss_sum += loss;
  } else if (is_leader(e)) {
    wait_on_peer(s->act_req, e->chunks, "finish an earlier activation send", s->act_m,
                 c->next_leader);
    memcpy(s->out_act, x, (size_t)(e->tokens * e->dims.dim) * sizeof(float));
  }
}

/* Backward through this stage's layers from the slot's output gradient; the
 * input gradient goes to the embedding (first stage) or back to the
 * previous stage. */
static void backward(struct rt_exec *e, int m) {
  const struct hx_rt_rank_config *c = e->cfg;
  struct rt_slot *s = slot_of(e, m);
  const float *dout = s->dout;
  float *dx = e->x0, *spare = e->x1;
  for (int l = e->p.nlayers - 1; l >= 0; l--) {
    hxk_layer_backward(&e->layer_ctx, &e->p.lw[l], &e->p.lg[l], dout, dx,
                       s->acts + l * e->act_floats, e->scratch, c->micro_batch_size);
    dout = dx;
    dx = spare;
    spare = (float *)dout;
  }
  /* dout now holds the gradient of the stage input */
  if (c->has_embedding) {
    hxk_embedding_backward(e->p.g + e->p.tok_emb, s->inputs, dout, e->tokens, e->dims.dim);
    return;
  }
  if (!is_leader(e))
    return;
  wait_on_peer(s->grad_req, e->chunks, "finish an earlier gradient send", s->grad_m,
               c->prev_leader);
  memcpy(s->din, dout, (size_t)(e->tokens * e->dims.dim) * sizeof(float));
}

/* The leader's copy of buf[0..n) to every TP rank of the stage, chunk by
 * chunk (collectives on one communicator are matched in the order posted). */
static void broadcast_in_stage(struct rt_exec *e, float *buf, long n, int m, const char *what) {
  if (e->cfg->tp == 1)
    return;
  int64_t max = hx_rt_max_count();
  int nk = hx_rt_message_chunks(n);
  MPI_Request *reqs = rt_calloc((size_t)nk, sizeof *reqs);
  for (int k = 0; k < nk; k++) {
    int64_t off;
    int count;
    hx_rt_chunk_at(n, max, k, &off, &count);
    hx_rt_mpi_check(MPI_Ibcast(buf + off, count, MPI_FLOAT, e->cfg->leader_tp_rank, e->tp_comm,
                               &reqs[k]),
                    what);
  }
  struct hx_rt_wait w = {what, m, -1, e->cfg->tp, e->cfg->tp_group};
  hx_rt_wait_all(nk, reqs, &w);
  free(reqs);
}

static void recv_act(struct rt_exec *e, int m) {
  long n = e->tokens * e->dims.dim;
  if (is_leader(e))
    recv_floats(e, e->x0, n, e->cfg->prev_leader, m, TAG_ACT, "receive an activation");
  broadcast_in_stage(e, e->x0, n, m, "broadcast an activation in the TP group");
}

static void send_act(struct rt_exec *e, int m) {
  if (!is_leader(e))
    return;
  struct rt_slot *s = slot_of(e, m);
  post_floats(s->out_act, e->tokens * e->dims.dim, e->cfg->next_leader, tag_of(m, TAG_ACT), true,
              s->act_req, "send an activation");
  s->act_m = m;
}

static void recv_grad(struct rt_exec *e, int m) {
  long n = e->tokens * e->dims.dim;
  float *dout = slot_of(e, m)->dout;
  if (is_leader(e))
    recv_floats(e, dout, n, e->cfg->next_leader, m, TAG_GRAD, "receive a gradient");
  broadcast_in_stage(e, dout, n, m, "broadcast a gradient in the TP group");
}

static void send_grad(struct rt_exec *e, int m) {
  if (!is_leader(e))
    return;
  struct rt_slot *s = slot_of(e, m);
  post_floats(s->din, e->tokens * e->dims.dim, e->cfg->prev_leader, tag_of(m, TAG_GRAD), true,
              s->grad_req, "send a gradient");
  s->grad_m = m;
}

void rt_wait_sends(struct rt_exec *e) {
  const struct hx_rt_rank_config *c = e->cfg;
  for (int i = 0; i < c->activation_slots; i++) {
    struct rt_slot *s = &e->slots[i];
    wait_on_peer(s->act_req, e->chunks, "finish an activation send", s->act_m, c->next_leader);
    wait_on_peer(s->grad_req, e->chunks, "finish a gradient send", s->grad_m, c->prev_leader);
  }
}

void rt_run_op(struct rt_exec *e, const struct hx_rt_op *op) {
  switch (op->kind) {
  case HX_RT_RECV_ACT:
    recv_act(e, op->micro_batch);
    break;
  case HX_RT_FORWARD:
    forward(e, op->micro_batch);
    break;
  case HX_RT_SEND_ACT:
    send_act(e, op->micro_batch);
    break;
  case HX_RT_RECV_GRAD:
    recv_grad(e, op->micro_batch);
    break;
  case HX_RT_BACKWARD:
    backward(e, op->micro_batch);
    break;
  case HX_RT_SEND_GRAD:
    send_grad(e, op->micro_batch);
    break;
  case HX_RT_GRAD_SYNC:
  case HX_RT_OPTIMIZER:
    hx_rt_fatal(HX_RT_EXIT_ERROR, "internal: step-level op %d reached rt_run_op", (int)op->kind);
  }
  hx_rt_progress();
}
