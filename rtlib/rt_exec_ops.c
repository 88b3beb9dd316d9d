/* The schedule's operations on one micro-batch: receive, forward, send,
 * backward, on the device's buffers through its kernel table and the
 * transport. Sends are non-blocking from per-slot buffers (so two neighbours
 * that both send in 1F1B's steady phase cannot deadlock); every wait names
 * the peer or group it waits on, so a stall is traced to the rank that
 * stopped (rt_init.h).
 *
 * With tensor parallelism every TP rank of a stage runs the same ops on the
 * same full activations: only the stage leader talks to the neighbouring
 * stages' leaders, and broadcasts what it received inside its TP group. Every
 * TP rank computes the (unsplit) embedding and head itself, identically, so
 * no gradient of the stage boundary or of those tensors needs a broadcast;
 * the loss is counted on TP rank 0 only. */

#include "rt_exec_internal.h"
#include "rt_init.h"
#include "rt_log.h"

enum { TAG_ACT = 1, TAG_GRAD = 2 }; /* message kinds: hx_rt_message_tag */

static int tag_of(int micro_batch, int kind) {
  return hx_rt_message_tag(micro_batch, kind, hx_rt_tag_ub());
}

static struct rt_slot *slot_of(struct rt_exec *e, int m) {
  return &e->slots[m % e->cfg->activation_slots];
}

static bool is_leader(const struct rt_exec *e) { return e->cfg->tp_rank == e->cfg->leader_tp_rank; }

void rt_slots_init(struct rt_exec *e) {
  const struct hx_rt_rank_config *c = e->cfg;
  const struct rt_device *d = e->dev;
  long xd = e->tokens * e->dims.dim;
  int nlayers = e->p.lay.nlayers > 0 ? e->p.lay.nlayers : 1;
  e->act_bytes = (size_t)xd * rt_dtype_bytes(d->dtype);
  e->acts_bytes = d->acts_bytes();
  e->slots = rt_calloc((size_t)c->activation_slots, sizeof *e->slots);
  for (int i = 0; i < c->activation_slots; i++) {
    struct rt_slot *s = &e->slots[i];
    s->host_tokens = rt_calloc((size_t)(2 * e->tokens), sizeof *s->host_tokens);
    s->tokens = d->alloc((size_t)(2 * e->tokens) * sizeof *s->tokens);
    s->acts = d->alloc(e->acts_bytes * (size_t)nlayers);
    s->out_act = d->alloc(e->act_bytes);
    s->dout = d->alloc(e->act_bytes);
    s->din = d->alloc(e->act_bytes);
    s->act_send = e->tr->send_new(xd, d->dtype);
    s->grad_send = e->tr->send_new(xd, d->dtype);
  }
  e->x0 = d->alloc(e->act_bytes);
  e->x1 = d->alloc(e->act_bytes);
  e->scratch = d->alloc(d->scratch_bytes());
}

/* Local layer l's saved activations in slot s. */
static void *acts_of(const struct rt_exec *e, const struct rt_slot *s, int l) {
  return (char *)s->acts + (size_t)l * e->acts_bytes;
}

/* Global sequences of micro-batch m: this pipeline's, mbs at a time, read on
 * the host and uploaded (inputs, then targets). */
static void load_batch(struct rt_exec *e, int m, struct rt_slot *s) {
  const struct hx_rt_rank_config *c = e->cfg;
  int64_t j0 = c->first_sequence + (int64_t)m * c->micro_batch_size;
  char err[1024];
  if (!hx_rt_data_batch(&e->data, e->dims.seq_len, c->train->global_batch, e->step, j0,
                        c->micro_batch_size, s->host_tokens, s->host_tokens + e->tokens, err,
                        sizeof err))
    hx_rt_fatal(HX_RT_EXIT_ERROR, "step %lld: %s", (long long)e->step + 1, err);
  e->dev->upload(s->tokens, s->host_tokens, (size_t)(2 * e->tokens) * sizeof *s->tokens);
}

/* Embedding (first stage) or the received activation, this stage's layers,
 * then on the last stage the loss — whose backward runs at once, because the
 * head's kernel computes both in one pass and its gradient only adds. */
static void forward(struct rt_exec *e, int m) {
  const struct hx_rt_rank_config *c = e->cfg;
  const struct rt_device *d = e->dev;
  struct rt_slot *s = slot_of(e, m);
  load_batch(e, m, s);
  if (c->has_embedding)
    d->embed_forward(e->x0, s->tokens);
  void *x = e->x0, *y = e->x1;
  for (int l = 0; l < e->p.lay.nlayers; l++) {
    d->layer_forward(l, x, y, acts_of(e, s, l), e->scratch);
    void *t = x;
    x = y;
    y = t;
  }
  if (c->has_head) {
    double scale = 1.0 / ((double)c->train->global_batch * e->dims.seq_len);
    d->zero(s->dout, e->act_bytes);
    d->head(x, s->tokens + e->tokens, scale, s->dout, e->scratch, c->tp_rank == 0);
  } else if (is_leader(e)) {
    e->tr->send_wait(s->act_send, "finish an earlier activation send");
    d->copy(s->out_act, x, e->act_bytes);
  }
}

/* Backward through this stage's layers from the slot's output gradient; the
 * input gradient goes to the embedding (first stage) or back to the
 * previous stage. */
static void backward(struct rt_exec *e, int m) {
  const struct hx_rt_rank_config *c = e->cfg;
  const struct rt_device *d = e->dev;
  struct rt_slot *s = slot_of(e, m);
  const void *dout = s->dout;
  void *dx = e->x0, *spare = e->x1;
  for (int l = e->p.lay.nlayers - 1; l >= 0; l--) {
    d->layer_backward(l, dout, dx, acts_of(e, s, l), e->scratch);
    dout = dx;
    dx = spare;
    spare = (void *)dout;
  }
  /* dout now holds the gradient of the stage input */
  if (c->has_embedding) {
    d->embed_backward(s->tokens, dout);
    return;
  }
  if (!is_leader(e))
    return;
  e->tr->send_wait(s->grad_send, "finish an earlier gradient send");
  d->copy(s->din, dout, e->act_bytes);
}

static void recv_act(struct rt_exec *e, int m) {
  long n = e->tokens * e->dims.dim;
  enum rt_dtype dt = e->dev->dtype;
  if (is_leader(e)) {
    e->tr->recv(e->x0, n, dt, e->cfg->prev_leader, tag_of(m, TAG_ACT), m,
                "receive an activation");
    rt_emu_arrive(e, e->cfg->prev_leader, tag_of(m, TAG_ACT), (double)e->act_bytes);
  }
  e->tr->tp_broadcast(e->x0, n, dt, m, "broadcast an activation in the TP group");
}

static void send_act(struct rt_exec *e, int m) {
  if (!is_leader(e))
    return;
  struct rt_slot *s = slot_of(e, m);
  e->tr->send_start(s->act_send, s->out_act, e->tokens * e->dims.dim, e->cfg->next_leader,
                    tag_of(m, TAG_ACT), m, "send an activation");
  rt_emu_stamp_send(e, 0, m, e->cfg->next_leader, tag_of(m, TAG_ACT));
}

static void recv_grad(struct rt_exec *e, int m) {
  long n = e->tokens * e->dims.dim;
  enum rt_dtype dt = e->dev->dtype;
  void *dout = slot_of(e, m)->dout;
  if (is_leader(e)) {
    e->tr->recv(dout, n, dt, e->cfg->next_leader, tag_of(m, TAG_GRAD), m, "receive a gradient");
    rt_emu_arrive(e, e->cfg->next_leader, tag_of(m, TAG_GRAD), (double)e->act_bytes);
  }
  e->tr->tp_broadcast(dout, n, dt, m, "broadcast a gradient in the TP group");
}

static void send_grad(struct rt_exec *e, int m) {
  if (!is_leader(e))
    return;
  struct rt_slot *s = slot_of(e, m);
  e->tr->send_start(s->grad_send, s->din, e->tokens * e->dims.dim, e->cfg->prev_leader,
                    tag_of(m, TAG_GRAD), m, "send a gradient");
  rt_emu_stamp_send(e, 1, m, e->cfg->prev_leader, tag_of(m, TAG_GRAD));
}

void rt_wait_sends(struct rt_exec *e) {
  for (int i = 0; i < e->cfg->activation_slots; i++) {
    e->tr->send_wait(e->slots[i].act_send, "finish an activation send");
    e->tr->send_wait(e->slots[i].grad_send, "finish a gradient send");
  }
  rt_emu_finish(e);
}

void rt_run_op(struct rt_exec *e, const struct hx_rt_op *op) {
  double start = hx_rt_now_s(); /* what --emulate stretches */
  switch (op->kind) {
  case HX_RT_RECV_ACT:
    recv_act(e, op->micro_batch);
    break;
  case HX_RT_FORWARD:
    forward(e, op->micro_batch);
    rt_emu_compute_done(e, start);
    break;
  case HX_RT_SEND_ACT:
    send_act(e, op->micro_batch);
    break;
  case HX_RT_RECV_GRAD:
    recv_grad(e, op->micro_batch);
    break;
  case HX_RT_BACKWARD:
    backward(e, op->micro_batch);
    rt_emu_compute_done(e, start);
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
