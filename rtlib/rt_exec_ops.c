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
 * the loss is counted on TP rank 0 only.
 *
 * Receives posted ahead (what passes/cost/sim.c charges: a hop's transfer
 * starts when its sender's op ends and runs under the receiver's compute;
 * only what is left of it when the op that needs it comes is waited for).
 * The leader posts the receive of a RECV op at the start of the compute op
 * before it, and waits for it at the RECV op. It cannot land where the
 * compute still reads or writes (x0, x1, a slot's dout): receives land in
 * buffers of their own, hops->bufs, which the op after the RECV op takes as
 * its input (and ping-pongs through). A receive takes the buffer of the one
 * before it unless it is posted at that one's consumer, then the other.
 * Two suffice: a RECV op is followed by its op, so receive k is posted no
 * earlier than the op that consumes receive k - 1, after the one that
 * consumed receive k - 2 has ended; a last stage, whose every receive is
 * posted at a backward, needs one. On the CPU, MPI moves a posted receive
 * on inside the MPI calls the compute makes (TP all-reduces, bucket tests)
 * and at the wait. A HexiSeq stage leader posts its receives ahead alike,
 * into hs.whole: it scatters that to the units at the RECV op, before the
 * next receive can be posted, so one whole buffer and one local one do.
 *
 * Sequence parallelism (e->model.sp_size > 1): the layers run on this TP
 * rank's rows, so what lies between them (x0, x1) is rows; everything
 * outside them stays whole and device-agnostic: the embedding's whole output
 * gives its rows to the first layer, the last layer's rows are all-gathered
 * before the head (whose whole input gradient gives its rows back) and
 * before a hop's send, and a received hop, broadcast as before, gives each
 * TP rank its rows. */

#include <string.h>

#include "rt_exec_internal.h"
#include "rt_init.h"
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

/* ---- receives posted ahead (the comment at the top) ---- */

static void scatter_units(struct rt_exec *e, const void *whole, void *local, const char *what);

struct rt_hops {
  void *bufs[2];        /* activation-sized; what receives land in */
  struct rt_recv *recv; /* the one receive posted ahead at a time */
  /* per op of the schedule: the RECV op whose receive is posted at the
   * start of this compute op (-1: none), and each RECV op's buffer */
  int *post_at, *buf_of;
  bool *ahead;        /* per RECV op: posted ahead (else at the op) */
  double posted_s;    /* when the receive in flight was posted (trace) */
  void *in;           /* the last RECV op's buffer, for the op after it */
  int in_kind, in_mb; /* that op's kind and micro-batch (-1: none) */
};

static bool is_compute(enum hx_rt_op_kind k) { return k == HX_RT_FORWARD || k == HX_RT_BACKWARD; }

static bool is_send(enum hx_rt_op_kind k) { return k == HX_RT_SEND_ACT || k == HX_RT_SEND_GRAD; }

/* Op i's receive may be posted at op p (the compute op before it, with only
 * sends between) when the op after it is its own consumer: then nothing
 * else reads the buffer in between (the top comment's two-buffer rule). */
static int post_point(const struct hx_rt_rank_config *c, int i) {
  const struct hx_rt_op *op = &c->schedule[i];
  enum hx_rt_op_kind use = op->kind == HX_RT_RECV_ACT ? HX_RT_FORWARD : HX_RT_BACKWARD;
  if (i + 1 >= c->nops || c->schedule[i + 1].kind != use ||
      c->schedule[i + 1].micro_batch != op->micro_batch)
    return -1;
  for (int p = i - 1; p >= 0; p--) {
    if (is_compute(c->schedule[p].kind))
      return p;
    if (!is_send(c->schedule[p].kind))
      return -1;
  }
  return -1;
}

static void hops_init(struct rt_exec *e) {
  const struct hx_rt_rank_config *c = e->cfg;
  struct rt_hops *h = hx_rt_calloc(1, sizeof *h);
  e->hops = h;
  h->in_kind = h->in_mb = -1;
  if (!has_hops(e))
    return;
  h->post_at = hx_rt_calloc((size_t)c->nops, sizeof *h->post_at);
  h->buf_of = hx_rt_calloc((size_t)c->nops, sizeof *h->buf_of);
  h->ahead = hx_rt_calloc((size_t)c->nops, sizeof *h->ahead);
  for (int i = 0; i < c->nops; i++)
    h->post_at[i] = -1;
  /* Whether any receive is posted before the previous one's consumer ends:
   * TP ranks that post nothing still take the leader's buffers (the
   * broadcast), so the layout follows the leader's rule on every rank. A
   * HexiSeq leader's receive lands in hs.whole, and the local buffer is
   * written only at the RECV op, once the previous consumer has run: one. */
  bool two = false;
  int last = -1; /* the previous RECV op */
  for (int i = 0; i < c->nops; i++) {
    enum hx_rt_op_kind k = c->schedule[i].kind;
    if (k != HX_RT_RECV_ACT && k != HX_RT_RECV_GRAD)
      continue;
    int p = post_point(c, i);
    /* posted at last's consumer */
    bool overlaps = last >= 0 && p >= 0 && p == last + 1 && !e->hs.on;
    h->buf_of[i] = last < 0 ? 0 : overlaps ? 1 - h->buf_of[last] : h->buf_of[last];
    two |= overlaps;
    if (p >= 0 && is_leader(e)) {
      h->post_at[p] = i;
      h->ahead[i] = true;
    }
    last = i;
  }
  h->bufs[0] = e->dev->alloc(e->act_bytes);
  h->bufs[1] = two ? e->dev->alloc(e->act_bytes) : h->bufs[0];
  if (is_leader(e))
    h->recv = e->tr->recv_new(hop_elements(e), e->dev->dtype);
}

static int peer_of(const struct rt_exec *e, enum hx_rt_op_kind k) {
  return k == HX_RT_RECV_ACT ? e->cfg->prev_leader : e->cfg->next_leader;
}

static int kind_tag(enum hx_rt_op_kind k) { return k == HX_RT_RECV_ACT ? TAG_ACT : TAG_GRAD; }

static const char *recv_what(enum hx_rt_op_kind k) {
  return k == HX_RT_RECV_ACT ? "receive an activation" : "receive a gradient";
}

/* Before compute op `at` runs: the receive of the RECV op after it. */
static void post_ahead(struct rt_exec *e, int at) {
  struct rt_hops *h = e->hops;
  if (!h->post_at || h->post_at[at] < 0)
    return;
  const struct hx_rt_op *op = &e->cfg->schedule[h->post_at[at]];
  h->posted_s = rt_trace_now();
  void *into = e->hs.on ? e->hs.whole : h->bufs[h->buf_of[h->post_at[at]]];
  e->tr->recv_start(h->recv, into, hop_elements(e), peer_of(e, op->kind),
                    tag_of(op->micro_batch, kind_tag(op->kind)), op->micro_batch,
                    recv_what(op->kind));
}

/* The buffer the op after RECV op i reads: the received message, there once
 * this returns (the TP group's broadcast included). */
static void *receive(struct rt_exec *e, int i) {
  const struct hx_rt_op *op = &e->cfg->schedule[i];
  struct rt_hops *h = e->hops;
  int m = op->micro_batch, peer = peer_of(e, op->kind), tag = tag_of(m, kind_tag(op->kind));
  enum rt_dtype dt = e->dev->dtype;
  void *buf = h->bufs[h->buf_of[i]];
  void *into = e->hs.on ? e->hs.whole : buf;
  bool ahead = h->ahead[i] && !e->eval_data; /* an evaluation posts nothing ahead */
  if (is_leader(e)) {
    double t0 = ahead ? h->posted_s : rt_trace_now();
    if (ahead)
      e->tr->recv_wait(h->recv, recv_what(op->kind));
    else
      e->tr->recv(into, hop_elements(e), dt, peer, tag, m, recv_what(op->kind));
    rt_emu_arrive(e, peer, tag, (double)hop_elements(e) * rt_dtype_bytes(dt));
    rt_trace_event(e, RT_TRACE_RECV, m, -2, peer, t0, rt_trace_now());
  }
  double t1 = rt_trace_now();
  if (e->hs.on)
    scatter_units(e, into, buf,
                  op->kind == HX_RT_RECV_ACT ? "scatter an activation to the units"
                                             : "scatter a gradient to the units");
  e->tr->tp_broadcast(buf, e->tokens * e->dims.dim, dt, m,
                      op->kind == HX_RT_RECV_ACT ? "broadcast an activation in the TP group"
                                                 : "broadcast a gradient in the TP group");
  if (e->cfg->tp > 1 || e->hs.on)
    rt_trace_event(e, RT_TRACE_BROADCAST, m, -2, -1, t1, rt_trace_now());
  h->in = buf;
  h->in_kind = op->kind == HX_RT_RECV_ACT ? HX_RT_FORWARD : HX_RT_BACKWARD;
  h->in_mb = m;
  return buf;
}

/* What compute op (kind, m) reads from a RECV op just before it, if any. */
static void *hop_input(struct rt_exec *e, enum hx_rt_op_kind kind, int m) {
  struct rt_hops *h = e->hops;
  void *in = h->in_kind == (int)kind && h->in_mb == m ? h->in : NULL;
  h->in = NULL;
  h->in_kind = h->in_mb = -1;
  return in;
}

static bool sp_on(const struct rt_exec *e) { return e->model.sp_size > 1; }

/* This TP rank's rows of a whole activation (SP). */
static void *own_rows(const struct rt_exec *e, const void *whole) {
  return (char *)whole + e->sp_off_bytes;
}

/* SP: whole from every TP rank's rows, this rank's copied in from rows. */
static void gather_rows(struct rt_exec *e, const void *rows, void *whole) {
  e->dev->copy(own_rows(e, whole), rows, e->rows_bytes);
  rt_tp_allgather(whole, e->tokens, e->dims.dim, e);
}

/* The rows the layers run on: all, or this TP rank's under SP. */
static void rows_init(struct rt_exec *e) {
  size_t elem = rt_dtype_bytes(e->dev->dtype);
  e->rows_bytes = e->act_bytes;
  e->sp_off_bytes = 0;
  if (!sp_on(e))
    return;
  long begin = 0, end = 0;
  hxk_sp_rows(e->tokens, e->model.sp_size, e->model.sp_rank, &begin, &end);
  e->rows_bytes = (size_t)((end - begin) * e->dims.dim) * elem;
  e->sp_off_bytes = (size_t)(begin * e->dims.dim) * elem;
}

void rt_slots_init(struct rt_exec *e) {
  const struct hx_rt_rank_config *c = e->cfg;
  const struct rt_device *d = e->dev;
  long xd = e->tokens * e->dims.dim;
  int nlayers = e->p.lay.nlayers > 0 ? e->p.lay.nlayers : 1;
  e->act_bytes = (size_t)xd * rt_dtype_bytes(d->dtype);
  rows_init(e);
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
    s->dout = d->alloc(e->act_bytes); /* read by the backward on the last stage only */
    s->din = d->alloc(whole ? hop_bytes : e->act_bytes);
    s->act_send = e->tr->send_new(hop_elements(e), d->dtype);
    s->grad_send = e->tr->send_new(hop_elements(e), d->dtype);
  }
  e->x0 = d->alloc(e->rows_bytes);
  e->x1 = d->alloc(e->rows_bytes);
  if (sp_on(e) && (c->has_embedding || c->has_head))
    e->sp_full = d->alloc(e->act_bytes);
  e->scratch = d->alloc(d->scratch_bytes());
  hops_init(e);
}

/* ---------------------------------------------------------------------------
 * HexiSeq stages (cfg->seq): each unit of the stage holds its tokens of
 * every sequence, and rtlib/seq's hook runs attention across the units. A
 * pipeline hop carries whole sequences, so the stages on either side need
 * not split them alike: the stage leader gathers the units' rows (from each
 * unit's contact, the rank of the leader's TP rank) into a whole activation
 * before it sends, and scatters a whole activation it received to them
 * (which then broadcast it in their unit's TP group), one unit's rows at a
 * time through a pack of the largest unit's rows; all in the device's dtype
 * (bf16 on a bf16 GPU plan, as every hop). That costs the leader one whole
 * activation and one unit's rows of memory and the hop's bytes twice; a direct
 * unit-to-unit exchange would not, and is left for later. Every rank of a
 * stage runs the same ops in the same order, so the leader's blocking
 * sends to one contact after the other cannot deadlock.
 * ------------------------------------------------------------------------- */

/* The rows of a whole [mbs * seq_len, D] activation a unit holds, as runs
 * of elements, in the unit's local order (sequence, then its ranges). */
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
  h->on = true;
  h->hook = rt_seq_open(seq, &e->dims, e->tr);
  h->local_len = rt_seq_local_tokens(seq);
  h->positions = hx_rt_calloc((size_t)h->local_len, sizeof *h->positions);
  rt_seq_positions(seq, h->positions);
  h->hop_tokens = (long)e->cfg->micro_batch_size * e->dims.seq_len;
  if (!is_leader(e) || !has_hops(e)) /* memory linear in the rank's tokens */
    return;
  /* the leader's TP rank is its ring's: seq->units are the contacts */
  h->unit_rows = hx_rt_calloc((size_t)seq->nunits, sizeof *h->unit_rows);
  long most = 0;
  for (int u = 0; u < seq->nunits; u++) {
    unit_rows(e, &seq->units[u], &h->unit_rows[u]);
    most = h->unit_rows[u].floats > most ? h->unit_rows[u].floats : most;
  }
  /* The hop's whole activation and one unit's rows at a time, in the
   * device's dtype: a bf16 plan gathers, sends and scatters bf16, as its
   * other stages' hops do (the hook widens inside the layer). */
  size_t es = rt_dtype_bytes(e->dev->dtype);
  h->whole = e->dev->alloc((size_t)(h->hop_tokens * e->dims.dim) * es);
  h->pack = e->dev->alloc((size_t)most * es);
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

/* A unit's rows from src to dst, one of them a whole activation (into_whole:
 * dst) and the other the rows back to back, one device copy per run (a
 * sequence's token range): the device's pack and unpack move fp32 only,
 * and these are in its dtype. */
static void move_rows(struct rt_exec *e, void *dst, const void *src, const struct rt_runs *r,
                      bool into_whole) {
  size_t es = rt_dtype_bytes(e->dev->dtype);
  long at = 0;
  for (int k = 0; k < r->n; at += r->items[k].n, k++) {
    size_t whole_at = (size_t)r->items[k].off * es, packed_at = (size_t)at * es;
    e->dev->copy((char *)dst + (into_whole ? whole_at : packed_at),
                 (const char *)src + (into_whole ? packed_at : whole_at),
                 (size_t)r->items[k].n * es);
  }
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
    move_rows(e, whole, rows, r, true);
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
      move_rows(e, local, whole, r, false);
      continue;
    }
    move_rows(e, e->hs.pack, whole, r, false);
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
  /* an evaluation's batch k is read as training's step k would be */
  const struct hx_rt_data *from = e->eval_data ? e->eval_data : &e->data;
  int64_t batch = e->eval_data ? e->eval_batch : e->step;
  /* a HexiSeq rank reads its tokens of each sequence, by global position */
  if (!hx_rt_data_batch_at(from, e->dims.seq_len, c->train->global_batch, batch, j0,
                           c->micro_batch_size, e->hs.on ? e->hs.positions : NULL,
                           e->hs.on ? e->hs.local_len : e->dims.seq_len, s->host_tokens,
                           s->host_tokens + e->tokens, err, sizeof err))
    hx_rt_fatal(HX_RT_EXIT_ERROR, "%s %lld: %s", e->eval_data ? "validation batch" : "step",
                (long long)batch + 1, err);
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
  void *x = hop_input(e, HX_RT_FORWARD, m), *y = e->x1;
  if (x && sp_on(e))
    x = own_rows(e, x);
  if (!x) {
    if (!c->has_embedding)
      hx_rt_fatal(HX_RT_EXIT_ERROR, "internal: forward %d of a stage past the first has no "
                                    "received activation",
                  m);
    x = e->x0;
    if (sp_on(e)) {
      d->embed_forward(e->sp_full, s->tokens);
      d->copy(x, own_rows(e, e->sp_full), e->rows_bytes);
    } else {
      d->embed_forward(x, s->tokens);
    }
  }
  for (int l = 0; l < e->p.lay.nlayers; l++) {
    d->layer_forward(l, x, y, acts_of(e, s, l), e->scratch);
    void *t = x;
    x = y;
    y = t;
  }
  if (c->has_head) {
    double scale = 1.0 / ((double)c->train->global_batch * e->dims.seq_len);
    if (sp_on(e)) { /* the head runs on whole sequences */
      gather_rows(e, x, e->sp_full);
      x = e->sp_full;
    }
    d->zero(s->dout, e->act_bytes);
    d->head(x, s->tokens + e->tokens, scale, s->dout, e->scratch, c->tp_rank == 0);
  } else if (sp_on(e)) { /* every TP rank gathers; the leader sends */
    if (is_leader(e))
      e->tr->send_wait(s->act_send, "finish an earlier activation send");
    gather_rows(e, x, s->out_act);
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
  const void *dout = c->has_head ? s->dout : hop_input(e, HX_RT_BACKWARD, m);
  if (!dout)
    hx_rt_fatal(HX_RT_EXIT_ERROR,
                "internal: backward %d of a stage before the last has no received gradient", m);
  if (sp_on(e)) /* the head's, or the received, whole gradient: this rank's rows */
    dout = own_rows(e, dout);
  void *dx = e->x0, *spare = e->x1;
  for (int l = e->p.lay.nlayers - 1; l >= 0; l--) {
    d->layer_backward(l, dout, dx, acts_of(e, s, l), e->scratch);
    rt_sync_backward_point(e, m, l); /* layer l's gradient-sync buckets may start */
    dout = dx;
    dx = spare;
    spare = (void *)dout;
  }
  /* dout now holds the gradient of the stage input */
  if (c->has_embedding && sp_on(e)) {
    gather_rows(e, dout, e->sp_full);
    d->embed_backward(s->tokens, e->sp_full);
    return;
  }
  if (c->has_embedding) {
    d->embed_backward(s->tokens, dout);
    return;
  }
  if (sp_on(e)) {
    if (is_leader(e))
      e->tr->send_wait(s->grad_send, "finish an earlier gradient send");
    gather_rows(e, dout, s->din);
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

static void send_act(struct rt_exec *e, int m) {
  if (!is_leader(e))
    return;
  struct rt_slot *s = slot_of(e, m);
  double t0 = rt_trace_now();
  e->tr->send_start(s->act_send, s->out_act, hop_elements(e), e->cfg->next_leader,
                    tag_of(m, TAG_ACT), m, "send an activation");
  rt_emu_stamp_send(e, 0, m, e->cfg->next_leader, tag_of(m, TAG_ACT));
  rt_trace_event(e, RT_TRACE_SEND, m, -2, e->cfg->next_leader, t0, rt_trace_now());
}

static void send_grad(struct rt_exec *e, int m) {
  if (!is_leader(e))
    return;
  struct rt_slot *s = slot_of(e, m);
  double t0 = rt_trace_now();
  e->tr->send_start(s->grad_send, s->din, hop_elements(e), e->cfg->prev_leader,
                    tag_of(m, TAG_GRAD), m, "send a gradient");
  rt_emu_stamp_send(e, 1, m, e->cfg->prev_leader, tag_of(m, TAG_GRAD));
  rt_trace_event(e, RT_TRACE_SEND, m, -2, e->cfg->prev_leader, t0, rt_trace_now());
}

void rt_wait_sends(struct rt_exec *e) {
  for (int i = 0; i < e->cfg->activation_slots; i++) {
    e->tr->send_wait(e->slots[i].act_send, "finish an activation send");
    e->tr->send_wait(e->slots[i].grad_send, "finish a gradient send");
  }
  rt_emu_finish(e);
}

void rt_run_op(struct rt_exec *e, const struct hx_rt_op *op) {
  int at = (int)(op - e->cfg->schedule);
  if (is_compute(op->kind))
    post_ahead(e, at);
  switch (op->kind) {
  case HX_RT_RECV_ACT:
  case HX_RT_RECV_GRAD:
    receive(e, at);
    break;
  case HX_RT_FORWARD:
    rt_emu_op_begin(e, at);
    forward(e, op->micro_batch);
    rt_emu_op_end(e);
    break;
  case HX_RT_SEND_ACT:
    send_act(e, op->micro_batch);
    break;
  case HX_RT_BACKWARD:
    rt_emu_op_begin(e, at);
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

void rt_forward_pass(struct rt_exec *e) {
  for (int i = 0; i < e->cfg->nops; i++) {
    const struct hx_rt_op *op = &e->cfg->schedule[i];
    if (op->kind == HX_RT_RECV_ACT)
      receive(e, i);
    else if (op->kind == HX_RT_FORWARD)
      forward(e, op->micro_batch);
    else if (op->kind == HX_RT_SEND_ACT)
      send_act(e, op->micro_batch);
    else
      continue;
    hx_rt_progress();
  }
  rt_wait_sends(e);
}
