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

#include <string.h>

#include "rt_exec_internal.h"
#include "rt_init.h"
#include "rt_log.h"
#include "seq/rt_seq.h"

enum { TAG_ACT = 1, TAG_GRAD = 2 }; /* message kinds: hx_rt_message_tag */

static int tag_of(int micro_batch, int kind) {
  return hx_rt_message_tag(micro_batch, kind, hx_rt_tag_ub());
}

static struct rt_slot *slot_of(struct rt_exec *e, int m) {
  return &e->slots[m % e->cfg->activation_slots];
}

/* The rank of its unit that talks for it: the leader's TP rank (on a stage
 * of one unit, the stage leader). */
static bool is_contact(const struct rt_exec *e) {
  return e->cfg->tp_rank == e->cfg->leader_tp_rank;
}

static bool is_leader(const struct rt_exec *e) {
  return is_contact(e) && (!e->hs.on || e->cfg->stage_leader == e->cfg->rank);
}

/* Elements of an activation across a pipeline hop: whole sequences. */
static long hop_elements(const struct rt_exec *e) {
  return (e->hs.on ? e->hs.hop_tokens : e->tokens) * e->dims.dim;
}

/* Whether this rank's stage sends or receives activations at all. */
static bool has_hops(const struct rt_exec *e) {
  return e->cfg->prev_leader >= 0 || e->cfg->next_leader >= 0;
}

void rt_slots_init(struct rt_exec *e) {
  const struct hx_rt_rank_config *c = e->cfg;
  const struct rt_device *d = e->dev;
  long xd = e->tokens * e->dims.dim;
  int nlayers = e->p.lay.nlayers > 0 ? e->p.lay.nlayers : 1;
  e->act_bytes = (size_t)xd * rt_dtype_bytes(d->dtype);
  e->acts_bytes = d->acts_bytes();
  e->slots = hx_rt_calloc((size_t)c->activation_slots, sizeof *e->slots);
  for (int i = 0; i < c->activation_slots; i++) {
    struct rt_slot *s = &e->slots[i];
    s->host_tokens = hx_rt_calloc((size_t)(2 * e->tokens), sizeof *s->host_tokens);
    s->tokens = d->alloc((size_t)(2 * e->tokens) * sizeof *s->tokens);
    s->acts = d->alloc(e->acts_bytes * (size_t)nlayers);
    /* what a hop sends: whole sequences (a HexiSeq leader gathers them) */
    size_t hop_bytes = (size_t)hop_elements(e) * rt_dtype_bytes(d->dtype);
    bool whole = is_leader(e) && has_hops(e);
    s->out_act = d->alloc(whole ? hop_bytes : e->act_bytes);
    s->dout = d->alloc(e->act_bytes);
    s->din = d->alloc(whole ? hop_bytes : e->act_bytes);
    s->act_send = e->tr->send_new(hop_elements(e), d->dtype);
    s->grad_send = e->tr->send_new(hop_elements(e), d->dtype);
  }
  e->x0 = d->alloc(e->act_bytes);
  e->x1 = d->alloc(e->act_bytes);
  e->scratch = d->alloc(d->scratch_bytes());
}

/* ---------------------------------------------------------------------------
 * HexiSeq stages (cfg->seq): each unit of the stage holds its tokens of
 * every sequence, and rtlib/seq's hook runs attention across the units. A
 * pipeline hop carries whole sequences, so the stages on either side need
 * not split them alike: the stage leader gathers the units' rows (from each
 * unit's contact, the rank of the leader's TP rank) into a whole activation
 * before it sends, and scatters a whole activation it received to them
 * (which then broadcast it in their unit's TP group). That costs the leader
 * one whole activation of memory and the hop's bytes twice; a direct
 * unit-to-unit exchange would not, and is left for later. Every rank of a
 * stage runs the same ops in the same order, so the leader's blocking
 * sends to one contact after the other cannot deadlock.
 * ------------------------------------------------------------------------- */

/* The rows of a whole [mbs * seq_len, D] activation a unit holds, as runs
 * of floats, in the unit's local order (sequence, then its ranges). */
static void unit_rows(const struct rt_exec *e, const struct hx_rt_seq_unit *u, struct rt_runs *r) {
  long T = e->dims.seq_len, D = e->dims.dim;
  for (long s = 0; s < e->cfg->micro_batch_size; s++)
    for (int k = 0; k < u->nranges; k++)
      rt_runs_add(r, (s * T + u->ranges[k].begin) * D, (u->ranges[k].end - u->ranges[k].begin) * D);
}

void rt_hexiseq_init(struct rt_exec *e) {
  const struct hx_rt_seq *seq = e->cfg->seq;
  struct rt_hexiseq *h = &e->hs;
  memset(h, 0, sizeof *h);
  if (!seq)
    return;
  if (e->dev->dtype != RT_FP32)
    hx_rt_fatal(HX_RT_EXIT_ERROR, "context/head parallelism runs in fp32 only (the %s backend)",
                e->dev->backend);
  h->on = true;
  h->hook = rt_seq_open(seq, &e->dims, e->tr);
  h->local_len = rt_seq_local_tokens(seq);
  h->positions = hx_rt_calloc((size_t)h->local_len, sizeof *h->positions);
  rt_seq_positions(seq, h->positions);
  h->hop_tokens = (long)e->cfg->micro_batch_size * e->dims.seq_len;
  long whole = h->hop_tokens * e->dims.dim;
  if (!is_leader(e) || !has_hops(e)) /* memory linear in the rank's tokens */
    return;
  /* the leader's TP rank is its ring's: seq->units are the contacts */
  h->unit_rows = hx_rt_calloc((size_t)seq->nunits, sizeof *h->unit_rows);
  for (int u = 0; u < seq->nunits; u++)
    unit_rows(e, &seq->units[u], &h->unit_rows[u]);
  h->whole = e->dev->alloc((size_t)whole * sizeof(float));
  h->pack = e->dev->alloc((size_t)whole * sizeof(float));
}

/* A message between the leader and a contact: the transport's exchange for
 * context parallelism (any two ranks, order kept per pair, blocking), which
 * every transport carries between ranks of a stage; its pipeline messages
 * may join neighbouring leaders only. */
static void unit_send(struct rt_exec *e, const void *buf, long n, int peer, const char *what) {
  e->tr->sendrecv(buf, n, peer, NULL, 0, peer, e->dev->dtype, what);
}

static void unit_recv(struct rt_exec *e, void *buf, long n, int peer, const char *what) {
  e->tr->sendrecv(NULL, 0, peer, buf, n, peer, e->dev->dtype, what);
}

/* The stage's contacts' local rows (local) into the leader's whole. */
static void gather_units(struct rt_exec *e, const void *local, void *whole, const char *what) {
  const struct hx_rt_seq *seq = e->cfg->seq;
  if (!is_contact(e))
    return;
  if (!is_leader(e)) {
    unit_send(e, local, e->tokens * e->dims.dim, e->cfg->stage_leader, what);
    return;
  }
  for (int u = 0; u < seq->nunits; u++) {
    const struct rt_runs *r = &e->hs.unit_rows[u];
    const void *rows = local;
    if (seq->units[u].rank != e->cfg->rank) {
      unit_recv(e, e->hs.pack, r->floats, seq->units[u].rank, what);
      rows = e->hs.pack;
    }
    e->dev->unpack(whole, rows, r->items, r->n);
  }
}

/* The leader's whole to every contact's local rows (local). */
static void scatter_units(struct rt_exec *e, const void *whole, void *local, const char *what) {
  const struct hx_rt_seq *seq = e->cfg->seq;
  if (!is_contact(e))
    return;
  if (!is_leader(e)) {
    unit_recv(e, local, e->tokens * e->dims.dim, e->cfg->stage_leader, what);
    return;
  }
  for (int u = 0; u < seq->nunits; u++) {
    const struct rt_runs *r = &e->hs.unit_rows[u];
    if (seq->units[u].rank == e->cfg->rank) {
      e->dev->pack(local, whole, r->items, r->n);
      continue;
    }
    e->dev->pack(e->hs.pack, whole, r->items, r->n);
    unit_send(e, e->hs.pack, r->floats, seq->units[u].rank, what);
  }
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
  /* a HexiSeq rank reads its tokens of each sequence, by global position */
  if (!hx_rt_data_batch_at(&e->data, e->dims.seq_len, c->train->global_batch, e->step, j0,
                           c->micro_batch_size, e->hs.on ? e->hs.positions : NULL,
                           e->hs.on ? e->hs.local_len : e->dims.seq_len, s->host_tokens,
                           s->host_tokens + e->tokens, err, sizeof err))
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
  } else if (e->hs.on) {
    if (is_leader(e))
      e->tr->send_wait(s->act_send, "finish an earlier activation send");
    gather_units(e, x, s->out_act, "gather an activation from the units");
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
    rt_sync_backward_point(e, m, l); /* layer l's gradient-sync buckets may start */
    dout = dx;
    dx = spare;
    spare = (void *)dout;
  }
  /* dout now holds the gradient of the stage input */
  if (c->has_embedding) {
    d->embed_backward(s->tokens, dout);
    return;
  }
  if (e->hs.on) {
    if (is_leader(e))
      e->tr->send_wait(s->grad_send, "finish an earlier gradient send");
    gather_units(e, dout, s->din, "gather a gradient from the units");
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
  void *into = e->hs.on ? e->hs.whole : e->x0;
  if (is_leader(e)) {
    e->tr->recv(into, hop_elements(e), dt, e->cfg->prev_leader, tag_of(m, TAG_ACT), m,
                "receive an activation");
    rt_emu_arrive(e, e->cfg->prev_leader, tag_of(m, TAG_ACT),
                  (double)hop_elements(e) * rt_dtype_bytes(dt));
  }
  if (e->hs.on)
    scatter_units(e, into, e->x0, "scatter an activation to the units");
  e->tr->tp_broadcast(e->x0, n, dt, m, "broadcast an activation in the TP group");
}

static void send_act(struct rt_exec *e, int m) {
  if (!is_leader(e))
    return;
  struct rt_slot *s = slot_of(e, m);
  e->tr->send_start(s->act_send, s->out_act, hop_elements(e), e->cfg->next_leader,
                    tag_of(m, TAG_ACT), m, "send an activation");
  rt_emu_stamp_send(e, 0, m, e->cfg->next_leader, tag_of(m, TAG_ACT));
}

static void recv_grad(struct rt_exec *e, int m) {
  long n = e->tokens * e->dims.dim;
  enum rt_dtype dt = e->dev->dtype;
  void *dout = slot_of(e, m)->dout;
  void *into = e->hs.on ? e->hs.whole : dout;
  if (is_leader(e)) {
    e->tr->recv(into, hop_elements(e), dt, e->cfg->next_leader, tag_of(m, TAG_GRAD), m,
                "receive a gradient");
    rt_emu_arrive(e, e->cfg->next_leader, tag_of(m, TAG_GRAD),
                  (double)hop_elements(e) * rt_dtype_bytes(dt));
  }
  if (e->hs.on)
    scatter_units(e, into, dout, "scatter a gradient to the units");
  e->tr->tp_broadcast(dout, n, dt, m, "broadcast a gradient in the TP group");
}

static void send_grad(struct rt_exec *e, int m) {
  if (!is_leader(e))
    return;
  struct rt_slot *s = slot_of(e, m);
  e->tr->send_start(s->grad_send, s->din, hop_elements(e), e->cfg->prev_leader,
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
  switch (op->kind) {
  case HX_RT_RECV_ACT:
    recv_act(e, op->micro_batch);
    break;
  case HX_RT_FORWARD:
    rt_emu_op_begin(e, (int)(op - e->cfg->schedule));
    forward(e, op->micro_batch);
    rt_emu_op_end(e);
    break;
  case HX_RT_SEND_ACT:
    send_act(e, op->micro_batch);
    break;
  case HX_RT_RECV_GRAD:
    recv_grad(e, op->micro_batch);
    break;
  case HX_RT_BACKWARD:
    rt_emu_op_begin(e, (int)(op - e->cfg->schedule));
    backward(e, op->micro_batch);
    rt_emu_op_end(e);
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
