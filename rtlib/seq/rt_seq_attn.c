/* The attention hook of a HexiSeq stage (rt_seq.h): Ulysses all-to-alls
 * inside the HP group, ring attention between the groups, one sequence of
 * the micro-batch at a time.
 *
 * Forward, per sequence, on unit `me` of group g (G groups in the ring):
 *  1. all-to-all in: member x sends member y q of x's tokens x y's query
 *     heads and k, v x the kv heads those read. me now holds Q, K, V of all
 *     of g's tokens (rows in group order) for its own heads.
 *  2. (o, lse) = the block kernel over me's own K/V.
 *  3. G - 1 ring steps: at step s me receives the K/V of group g - s from
 *     the units of group g - 1 (each kv head from the unit of g - 1 that
 *     owns it: the first to read it, which got it the step before) and
 *     merges it; a block's positions come from the table, not the wire.
 *  4. all-to-all out: o and lse of x's tokens back to x, head columns in
 *     place.
 * Backward, per sequence: delta = rowsum(dO o) where the tokens live; the
 * same all-to-all brings q, k, v, dO, lse and delta; the own block and each
 * ring block add into dQ and the block's dK/dV accumulators. An
 * accumulator travels with its block: at step s + 1 every reader of kv head
 * k in g pushes its dK/dV of block g - s for k to k's owner in g + 1, the
 * owner adding the sum it received at step s; after step G - 1 the pushes
 * reach the owner in the block's own group, which adds them to its own
 * block's dK/dV. The all-to-all back sends dQ, dK, dV to the tokens'
 * owners, which add them (a kv head two members read arrives twice and is
 * summed there, once from the owner with the ring's share in it).
 * Sums run in group order, so results do not depend on message timing.
 *
 * Every copy, sum and block computation goes through the device's kernel
 * table s->k (rt_seq.h: host memory and the CPU kernels, or the CUDA
 * backend's on device memory): this file is the one plan of the exchanges
 * for every backend. */
#include <string.h>

#include "rtlib/seq/rt_seq_internal.h"

/* ---- buffers: one carve serves sizing (base NULL) and use ---- */

struct carve {
  float *base;
  long used;
  long align; /* the kernels' slice alignment, in floats */
};

static float *take(struct carve *c, long n) {
  float *p = c->base ? c->base + c->used : NULL;
  c->used += (n + c->align - 1) / c->align * c->align;
  return p;
}

/* ---- copies of head columns, through the kernel table ---- */

/* rows x ncols floats from columns [col0, col0 + ncols) of src (rows of
 * width floats) to dst back to back; returns past them. */
static float *pack_cols(const struct rt_seq *s, float *dst, const float *src, long rows, long width,
                        long col0, long ncols) {
  if (rows > 0 && ncols > 0)
    s->k->copy_rows(dst, ncols, src + col0, width, ncols, rows, false);
  return dst + rows * ncols;
}

/* The reverse: src back to back into columns [col0, col0 + ncols) of dst,
 * added or written; returns past what it read. */
static const float *unpack_cols(const struct rt_seq *s, float *dst, long width, long col0,
                                long ncols, const float *src, long rows, bool add) {
  if (rows > 0 && ncols > 0)
    s->k->copy_rows(dst + col0, width, src, ncols, ncols, rows, add);
  return src + rows * ncols;
}

/* The listed kv heads (share numbering) of rows of a block whose columns
 * start at kv head kv0, nkv of them, each hd floats: row r's heads back to
 * back, one strided copy per listed head. */
static float *pack_heads(const struct rt_seq *s, float *dst, const float *src, long rows, int kv0,
                         int nkv, const int *heads, int nheads, int hd) {
  for (int i = 0; i < nheads && rows > 0; i++)
    s->k->copy_rows(dst + (long)i * hd, (long)nheads * hd, src + (long)(heads[i] - kv0) * hd,
                    (long)nkv * hd, hd, rows, false);
  return dst + rows * nheads * hd;
}

static const float *unpack_heads(const struct rt_seq *s, float *dst, long rows, int kv0, int nkv,
                                 const int *heads, int nheads, int hd, const float *src, bool add) {
  for (int i = 0; i < nheads && rows > 0; i++)
    s->k->copy_rows(dst + (long)(heads[i] - kv0) * hd, (long)nkv * hd, src + (long)i * hd,
                    (long)nheads * hd, hd, rows, add);
  return src + rows * nheads * hd;
}

/* ---- the group's all-to-alls ---- */

static const struct hx_rt_seq_group *my_group(const struct rt_seq *s) {
  return &s->seq->groups[s->seq->group];
}

static const struct seq_member *member(const struct rt_seq *s, int x) {
  return &s->units[my_group(s)->first + x];
}

/* What one message of an all-to-all holds, per token of its token owner,
 * given the head holder's heads: in = towards the heads, out = back. */
enum a2a_kind { FWD_IN, FWD_OUT, BWD_IN, BWD_OUT };

static long floats_per_token(enum a2a_kind kind, const struct seq_member *heads, int hd) {
  switch (kind) {
  case FWD_IN:  /* q, k, v */
  case BWD_OUT: /* dq, dk, dv */
    return (long)hd * (heads->nh + 2 * heads->nkv);
  case FWD_OUT: /* o, lse */
    return (long)heads->nh * (hd + 1);
  case BWD_IN: /* q, k, v, dO, lse, delta */
    return (long)hd * (2 * heads->nh + 2 * heads->nkv) + 2L * heads->nh;
  }
  return 0;
}

static bool towards_heads(enum a2a_kind kind) { return kind == FWD_IN || kind == BWD_IN; }

/* Floats me sends member x (send) or receives from it. */
static long a2a_count(const struct rt_seq *s, enum a2a_kind kind, int x, bool send) {
  const struct seq_member *other = member(s, x);
  bool me_owns_tokens = towards_heads(kind) == send;
  const struct seq_member *tokens = me_owns_tokens ? s->me : other;
  const struct seq_member *heads = me_owns_tokens ? other : s->me;
  return tokens->tokens * floats_per_token(kind, heads, s->hd);
}

static long a2a_total(const struct rt_seq *s, enum a2a_kind kind, bool send) {
  long n = 0;
  for (int x = 0; x < my_group(s)->n; x++)
    n += a2a_count(s, kind, x, send);
  return n;
}

/* The all-to-all of the group, messages back to back in member order. */
static void group_a2a(const struct rt_seq *s, enum a2a_kind kind, const float *send, float *recv,
                      const char *what) {
  const struct seq_exchange *e = &s->a2a;
  long send_at = 0, recv_at = 0;
  for (int x = 0; x < my_group(s)->n; x++) {
    e->send_off[x] = send_at;
    e->recv_off[x] = recv_at;
    send_at += e->send_n[x] = a2a_count(s, kind, x, true);
    recv_at += e->recv_n[x] = a2a_count(s, kind, x, false);
  }
  s->t->alltoallv(e->peers, my_group(s)->n, send, e->send_n, e->send_off, recv, e->recv_n,
                  e->recv_off, RT_FP32, what);
}

/* ---- the ring ---- */

static long group_tokens(const struct rt_seq *s, int g) {
  int G = s->seq->ngroups;
  g = ((g % G) + G) % G;
  return s->group_row0[g + 1] - s->group_row0[g];
}

static const int *group_pos(const struct rt_seq *s, int g) {
  int G = s->seq->ngroups;
  return s->kpos + s->group_row0[((g % G) + G) % G];
}

/* Floats on link l for a block of `rows` tokens: its K/V for the link's kv
 * heads (kv) and its dK/dV accumulators for the link's acc heads (acc).
 * Ring exchange `step` (1 .. G) carries the block of group g - step
 * (receiver's g): K/V unless step is G, accumulators once step is past 1
 * (backward only). */
static long link_floats(const struct rt_seq *s, const struct seq_link *l, long rows, bool kv,
                        bool acc) {
  return 2L * rows * s->hd * ((kv ? l->nkv : 0) + (acc ? l->nacc : 0));
}

/* The block buffers of a ring exchange: K/V (of the sender's own kv heads
 * or the receiver's), and dK/dV accumulators, each NULL when not carried. */
struct block {
  float *k, *v, *dk, *dv;
};

/* One ring exchange: me sends the units of the next group the K/V (and
 * dK/dV accumulators) of `src`, the block of group g + 1 - step, and
 * receives from the previous group's units those of group g - step into
 * `dst`: K/V written, accumulators added (dst->dk must hold what to add
 * to). */
static void ring_exchange(const struct rt_seq *s, int step, const struct block *src,
                          const struct block *dst, float *sendbuf, float *recvbuf,
                          const char *what) {
  int g = s->seq->group, hd = s->hd;
  long rows_out = group_tokens(s, g + 1 - step), rows_in = group_tokens(s, g - step);
  const struct seq_exchange *e = &s->ring; /* in[] then out[] */
  float *at = sendbuf;
  const struct seq_member *me = s->me;
  for (int y = 0; y < s->nout; y++) {
    const struct seq_link *l = &s->out[y];
    e->send_off[s->nin + y] = at - sendbuf;
    e->send_n[s->nin + y] = link_floats(s, l, rows_out, src->k != NULL, src->dk != NULL);
    if (src->k) {
      at = pack_heads(s, at, src->k, rows_out, me->kv0, me->nkv, l->kv, l->nkv, hd);
      at = pack_heads(s, at, src->v, rows_out, me->kv0, me->nkv, l->kv, l->nkv, hd);
    }
    if (src->dk) {
      at = pack_heads(s, at, src->dk, rows_out, me->kv0, me->nkv, l->acc, l->nacc, hd);
      at = pack_heads(s, at, src->dv, rows_out, me->kv0, me->nkv, l->acc, l->nacc, hd);
    }
  }
  long off = 0;
  for (int x = 0; x < s->nin; x++) {
    e->recv_off[x] = off;
    off += e->recv_n[x] = link_floats(s, &s->in[x], rows_in, dst->k != NULL, dst->dk != NULL);
  }
  if (s->nin == 1 && s->nout == 1)
    s->t->sendrecv(sendbuf, e->send_n[1], e->peers[1], recvbuf, e->recv_n[0], e->peers[0], RT_FP32,
                   what);
  else
    s->t->alltoallv(e->peers, s->nin + s->nout, sendbuf, e->send_n, e->send_off, recvbuf, e->recv_n,
                    e->recv_off, RT_FP32, what);
  const float *from = recvbuf;
  for (int x = 0; x < s->nin; x++) {
    const struct seq_link *l = &s->in[x];
    if (dst->k) {
      from = unpack_heads(s, dst->k, rows_in, me->kv0, me->nkv, l->kv, l->nkv, hd, from, false);
      from = unpack_heads(s, dst->v, rows_in, me->kv0, me->nkv, l->kv, l->nkv, hd, from, false);
    }
    if (dst->dk) {
      from = unpack_heads(s, dst->dk, rows_in, me->kv0, me->nkv, l->acc, l->nacc, hd, from, true);
      from = unpack_heads(s, dst->dv, rows_in, me->kv0, me->nkv, l->acc, l->nacc, hd, from, true);
    }
  }
}

/* Floats of a ring exchange's send and receive buffers at their largest. */
static long ring_floats(const struct rt_seq *s, const struct seq_link *links, int n) {
  long most = 0;
  for (int i = 0; i < n; i++)
    most += link_floats(s, &links[i], s->most_tokens, true, true);
  return most;
}

/* ---- per sequence: the buffers ---- */

struct bufs {
  float *a2a_send, *a2a_recv, *ring_send, *ring_recv, *block_scratch;
  float *q, *k, *v, *o, *lse;         /* the group's tokens x own heads */
  float *dout, *delta, *dq, *dk, *dv; /* backward */
  struct block ring[2];               /* ring blocks, alternating */
};

/* Carves the buffers (sizing when c->base is NULL). */
static void carve_bufs(const struct rt_seq *s, struct carve *c, bool backward, struct bufs *b) {
  const struct seq_member *me = s->me;
  long rows = s->group_row0[s->seq->group + 1] - s->group_row0[s->seq->group];
  long qn = rows * me->nh * s->hd, kvn = rows * me->nkv * s->hd, hn = rows * me->nh;
  long a2a_send = a2a_total(s, FWD_IN, true), a2a_recv = a2a_total(s, FWD_IN, false);
  enum a2a_kind kinds[3] = {FWD_OUT, BWD_IN, BWD_OUT};
  for (int i = 0; i < 3; i++) {
    long n = a2a_total(s, kinds[i], true), m = a2a_total(s, kinds[i], false);
    a2a_send = n > a2a_send ? n : a2a_send;
    a2a_recv = m > a2a_recv ? m : a2a_recv;
  }
  memset(b, 0, sizeof *b);
  b->a2a_send = take(c, a2a_send);
  b->a2a_recv = take(c, a2a_recv);
  b->ring_send = take(c, ring_floats(s, s->out, s->nout));
  b->ring_recv = take(c, ring_floats(s, s->in, s->nin));
  b->block_scratch = take(c, s->k->block_scratch_floats(rows, s->most_tokens, me->nh, s->hd));
  b->q = take(c, qn);
  b->k = take(c, kvn);
  b->v = take(c, kvn);
  b->lse = take(c, hn);
  long block = s->most_tokens * me->nkv * s->hd;
  for (int i = 0; i < 2 && s->seq->ngroups > 1; i++) {
    b->ring[i].k = take(c, block);
    b->ring[i].v = take(c, block);
    if (backward) {
      b->ring[i].dk = take(c, block);
      b->ring[i].dv = take(c, block);
    }
  }
  if (!backward) {
    b->o = take(c, qn);
    return;
  }
  b->dout = take(c, qn);
  b->delta = take(c, hn);
  b->dq = take(c, qn);
  b->dk = take(c, kvn);
  b->dv = take(c, kvn);
}

/* ---- forward ---- */

/* Rows [row0, row0 + rows) of one sequence's tensors. */
struct local {
  const float *q, *k, *v; /* [rows, share heads] */
  float *o, *lse;
};

/* What both directions' all-to-all in start a message with: q of member
 * m's query heads and k, v of the kv heads those read, for me's tokens
 * (rows of the share's widths); returns past them. */
static float *pack_qkv(const struct rt_seq *s, float *at, const float *q, const float *k,
                       const float *v, const struct seq_member *m) {
  int hd = s->hd;
  long n = s->me->tokens, wq = (long)s->nh_share * hd, wkv = (long)s->nkv_share * hd;
  at = pack_cols(s, at, q, n, wq, (long)m->h0 * hd, (long)m->nh * hd);
  at = pack_cols(s, at, k, n, wkv, (long)m->kv0 * hd, (long)m->nkv * hd);
  return pack_cols(s, at, v, n, wkv, (long)m->kv0 * hd, (long)m->nkv * hd);
}

/* The reverse on the head holder: member m's tokens' rows of b->q, b->k,
 * b->v (the group's tokens x me's own heads); returns past what it read. */
static const float *unpack_qkv(const struct rt_seq *s, struct bufs *b, const struct seq_member *m,
                               const float *from) {
  long wh = (long)s->me->nh * s->hd, wk = (long)s->me->nkv * s->hd;
  from = unpack_cols(s, b->q + m->row0 * wh, wh, 0, wh, from, m->tokens, false);
  from = unpack_cols(s, b->k + m->row0 * wk, wk, 0, wk, from, m->tokens, false);
  return unpack_cols(s, b->v + m->row0 * wk, wk, 0, wk, from, m->tokens, false);
}

static void a2a_in_forward(const struct rt_seq *s, const struct local *in, struct bufs *b) {
  float *at = b->a2a_send;
  for (int y = 0; y < my_group(s)->n; y++)
    at = pack_qkv(s, at, in->q, in->k, in->v, member(s, y));
  group_a2a(s, FWD_IN, b->a2a_send, b->a2a_recv, "the all-to-all of q, k, v to heads");
  const float *from = b->a2a_recv;
  for (int x = 0; x < my_group(s)->n; x++)
    from = unpack_qkv(s, b, member(s, x), from);
}

static void a2a_out_forward(const struct rt_seq *s, struct local *out, struct bufs *b) {
  int hd = s->hd, nh = s->me->nh;
  float *at = b->a2a_send;
  for (int x = 0; x < my_group(s)->n; x++) {
    const struct seq_member *m = member(s, x);
    at = pack_cols(s, at, b->o + m->row0 * nh * hd, m->tokens, (long)nh * hd, 0, (long)nh * hd);
    at = pack_cols(s, at, b->lse + m->row0 * nh, m->tokens, nh, 0, nh);
  }
  group_a2a(s, FWD_OUT, b->a2a_send, b->a2a_recv, "the all-to-all of o back to tokens");
  const float *from = b->a2a_recv;
  long n = s->me->tokens;
  for (int y = 0; y < my_group(s)->n; y++) {
    const struct seq_member *m = member(s, y);
    from = unpack_cols(s, out->o, (long)s->nh_share * hd, (long)m->h0 * hd, (long)m->nh * hd, from,
                       n, false);
    from = unpack_cols(s, out->lse, s->nh_share, m->h0, m->nh, from, n, false);
  }
}

static void merge_block(const struct rt_seq *s, struct bufs *b, const float *k, const float *v,
                        int g, bool first) {
  const struct seq_member *me = s->me;
  if (me->nh == 0)
    return;
  int mine = s->seq->group;
  s->k->block_forward(b->o, b->lse, b->q, group_pos(s, mine), group_tokens(s, mine), k, v,
                      group_pos(s, g), group_tokens(s, g), &s->heads, first, b->block_scratch);
}

static void forward_sequence(const struct rt_seq *s, struct local *io, struct bufs *b) {
  int g = s->seq->group, G = s->seq->ngroups;
  a2a_in_forward(s, io, b);
  merge_block(s, b, b->k, b->v, g, true);
  struct block own = {b->k, b->v, NULL, NULL};
  const struct block *src = &own;
  for (int step = 1; step < G; step++) {
    struct block *dst = &b->ring[step % 2];
    struct block kv = {dst->k, dst->v, NULL, NULL};
    ring_exchange(s, step, src, &kv, b->ring_send, b->ring_recv, "the ring's K/V step");
    merge_block(s, b, dst->k, dst->v, g - step, false);
    src = dst;
  }
  a2a_out_forward(s, io, b);
}

static long saved_floats(long nseq, void *arg) {
  const struct rt_seq *s = arg;
  return nseq * s->me->tokens * s->nh_share;
}

static long scratch_floats(long nseq, void *arg) {
  (void)nseq; /* one sequence at a time */
  return ((const struct rt_seq *)arg)->scratch;
}

static void hook_forward(float *o, const float *q, const float *k, const float *v, long nseq,
                         float *saved, float *scratch, void *arg) {
  const struct rt_seq *s = arg;
  struct carve c = {scratch, 0, s->k->align};
  struct bufs b;
  carve_bufs(s, &c, false, &b);
  long n = s->me->tokens, wq = (long)s->nh_share * s->hd, wkv = (long)s->nkv_share * s->hd;
  for (long q_seq = 0; q_seq < nseq; q_seq++) {
    long r = q_seq * n;
    struct local io = {q + r * wq, k + r * wkv, v + r * wkv, o + r * wq, saved + r * s->nh_share};
    forward_sequence(s, &io, &b);
  }
}

/* ---- backward ---- */

struct local_grad {
  const float *q, *k, *v, *dout, *lse, *delta;
  float *dq, *dk, *dv;
};

static void a2a_in_backward(const struct rt_seq *s, const struct local_grad *in, struct bufs *b) {
  int hd = s->hd;
  long n = s->me->tokens, wq = (long)s->nh_share * hd;
  float *at = b->a2a_send;
  for (int y = 0; y < my_group(s)->n; y++) {
    const struct seq_member *m = member(s, y);
    at = pack_qkv(s, at, in->q, in->k, in->v, m);
    at = pack_cols(s, at, in->dout, n, wq, (long)m->h0 * hd, (long)m->nh * hd);
    at = pack_cols(s, at, in->lse, n, s->nh_share, m->h0, m->nh);
    at = pack_cols(s, at, in->delta, n, s->nh_share, m->h0, m->nh);
  }
  group_a2a(s, BWD_IN, b->a2a_send, b->a2a_recv, "the all-to-all of q, k, v, dO to heads");
  const float *from = b->a2a_recv;
  long wh = (long)s->me->nh * hd, nh = s->me->nh;
  for (int x = 0; x < my_group(s)->n; x++) {
    const struct seq_member *m = member(s, x);
    from = unpack_qkv(s, b, m, from);
    from = unpack_cols(s, b->dout + m->row0 * wh, wh, 0, wh, from, m->tokens, false);
    from = unpack_cols(s, b->lse + m->row0 * nh, nh, 0, nh, from, m->tokens, false);
    from = unpack_cols(s, b->delta + m->row0 * nh, nh, 0, nh, from, m->tokens, false);
  }
}

static void a2a_out_backward(const struct rt_seq *s, struct local_grad *out, struct bufs *b) {
  int hd = s->hd;
  long wh = (long)s->me->nh * hd, wk = (long)s->me->nkv * hd;
  float *at = b->a2a_send;
  for (int x = 0; x < my_group(s)->n; x++) {
    const struct seq_member *m = member(s, x);
    at = pack_cols(s, at, b->dq + m->row0 * wh, m->tokens, wh, 0, wh);
    at = pack_cols(s, at, b->dk + m->row0 * wk, m->tokens, wk, 0, wk);
    at = pack_cols(s, at, b->dv + m->row0 * wk, m->tokens, wk, 0, wk);
  }
  group_a2a(s, BWD_OUT, b->a2a_send, b->a2a_recv, "the all-to-all of dq, dk, dv back to tokens");
  const float *from = b->a2a_recv;
  long n = s->me->tokens, wq = (long)s->nh_share * hd, wkv = (long)s->nkv_share * hd;
  for (int y = 0; y < my_group(s)->n; y++) {
    const struct seq_member *m = member(s, y);
    from = unpack_cols(s, out->dq, wq, (long)m->h0 * hd, (long)m->nh * hd, from, n, true);
    from = unpack_cols(s, out->dk, wkv, (long)m->kv0 * hd, (long)m->nkv * hd, from, n, true);
    from = unpack_cols(s, out->dv, wkv, (long)m->kv0 * hd, (long)m->nkv * hd, from, n, true);
  }
}

/* Adds the own heads' gradients of the block of group g (K/V k, v) into dq
 * and the block's dk, dv. */
static void block_grad(const struct rt_seq *s, struct bufs *b, const float *k, const float *v,
                       float *dk, float *dv, int g) {
  const struct seq_member *me = s->me;
  if (me->nh == 0)
    return;
  int mine = s->seq->group;
  s->k->block_backward(b->dq, dk, dv, b->dout, b->q, group_pos(s, mine), group_tokens(s, mine), k,
                       v, group_pos(s, g), group_tokens(s, g), b->lse, b->delta, &s->heads,
                       b->block_scratch);
}

static void backward_sequence(const struct rt_seq *s, struct local_grad *io, struct bufs *b) {
  int g = s->seq->group, G = s->seq->ngroups;
  a2a_in_backward(s, io, b);
  long rows = group_tokens(s, g), qn = rows * s->me->nh * s->hd, kvn = rows * s->me->nkv * s->hd;
  s->k->zero(b->dq, qn);
  s->k->zero(b->dk, kvn);
  s->k->zero(b->dv, kvn);
  block_grad(s, b, b->k, b->v, b->dk, b->dv, g);
  struct block own = {b->k, b->v, NULL, NULL};
  const struct block *src = &own;
  for (int step = 1; step < G; step++) {
    struct block *dst = &b->ring[step % 2];
    long block = group_tokens(s, g - step) * s->me->nkv * s->hd;
    s->k->zero(dst->dk, block);
    s->k->zero(dst->dv, block);
    struct block in = {dst->k, dst->v, step > 1 ? dst->dk : NULL, step > 1 ? dst->dv : NULL};
    ring_exchange(s, step, src, &in, b->ring_send, b->ring_recv, "the ring's K/V and dK/dV step");
    block_grad(s, b, dst->k, dst->v, dst->dk, dst->dv, g - step);
    src = dst;
  }
  if (G > 1) { /* the accumulators' last hop, into the own block's dK/dV */
    struct block last = {NULL, NULL, src->dk, src->dv}, home = {NULL, NULL, b->dk, b->dv};
    ring_exchange(s, G, &last, &home, b->ring_send, b->ring_recv, "the ring's last dK/dV hop");
  }
  a2a_out_backward(s, io, b);
}

static void hook_backward(float *dq, float *dk, float *dv, const float *dout, const float *q,
                          const float *k, const float *v, const float *o, const float *saved,
                          long nseq, float *scratch, void *arg) {
  const struct rt_seq *s = arg;
  struct carve c = {scratch, 0, s->k->align};
  struct bufs b;
  carve_bufs(s, &c, true, &b);
  long n = s->me->tokens, nh = s->nh_share;
  long wq = nh * s->hd, wkv = (long)s->nkv_share * s->hd;
  float *delta = take(&c, n * nh); /* of one sequence, where its tokens live */
  for (long q_seq = 0; q_seq < nseq; q_seq++) {
    long r = q_seq * n;
    s->k->block_delta(delta, dout + r * wq, o + r * wq, n, (int)nh, s->hd);
    struct local_grad io = {q + r * wq, k + r * wkv, v + r * wkv,  dout + r * wq, saved + r * nh,
                            delta,      dq + r * wq, dk + r * wkv, dv + r * wkv};
    backward_sequence(s, &io, &b);
  }
}

void rt_seq_hook_init(struct rt_seq *s) {
  struct carve fwd = {NULL, 0, s->k->align}, bwd = {NULL, 0, s->k->align};
  struct bufs b;
  carve_bufs(s, &fwd, false, &b);
  carve_bufs(s, &bwd, true, &b);
  take(&bwd, s->me->tokens * s->nh_share); /* hook_backward's delta */
  s->scratch = fwd.used > bwd.used ? fwd.used : bwd.used;
  s->hook =
      (struct hxk_attention_hook){saved_floats, scratch_floats, hook_forward, hook_backward, s};
}

const struct hxk_attention_hook *rt_seq_attention_hook(struct rt_seq *s) { return &s->hook; }

struct rt_seq *rt_seq_of_hook(const struct hxk_attention_hook *hook) {
  return hook && hook->forward == hook_forward ? hook->arg : NULL;
}

/* ---- the CPU's kernel table: host memory, kernels/cpu ---- */

static void cpu_block_forward(float *o, float *lse, const float *q, const int *q_pos, long nq_tok,
                              const float *k, const float *v, const int *k_pos, long nk_tok,
                              const struct rt_seq_heads *h, bool first, float *scratch) {
  hxk_attention_block_forward(o, lse, q, q_pos, nq_tok, k, v, k_pos, nk_tok, h->kv_of, 1, h->nq,
                              h->nkv, h->hd, first, scratch);
}

static void cpu_block_backward(float *dq, float *dk, float *dv, const float *dout, const float *q,
                               const int *q_pos, long nq_tok, const float *k, const float *v,
                               const int *k_pos, long nk_tok, const float *lse, const float *delta,
                               const struct rt_seq_heads *h, float *scratch) {
  hxk_attention_block_backward(dq, dk, dv, dout, q, q_pos, nq_tok, k, v, k_pos, nk_tok, lse, delta,
                               h->kv_of, 1, h->nq, h->nkv, h->hd, scratch);
}

static void cpu_copy_rows(float *dst, long dst_pitch, const float *src, long src_pitch, long width,
                          long rows, bool add) {
  for (long r = 0; r < rows; r++) {
    float *to = dst + r * dst_pitch;
    const float *from = src + r * src_pitch;
    if (add)
      for (long i = 0; i < width; i++)
        to[i] += from[i];
    else
      memcpy(to, from, sizeof(float) * (size_t)width);
  }
}

static void cpu_zero(float *p, long n) { memset(p, 0, sizeof(float) * (size_t)n); }

static int *cpu_ints(const int *host, long n) {
  (void)n;
  return (int *)host; /* read where they are */
}

static void cpu_free_ints(int *p) { (void)p; }

const struct rt_seq_kernels *rt_seq_cpu_kernels(void) {
  static const struct rt_seq_kernels cpu = {"cpu",
                                            1,
                                            hxk_attention_block_scratch_floats,
                                            cpu_block_forward,
                                            hxk_attention_block_delta,
                                            cpu_block_backward,
                                            cpu_copy_rows,
                                            cpu_zero,
                                            cpu_ints,
                                            cpu_free_ints};
  return &cpu;
}
