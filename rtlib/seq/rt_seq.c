/* The HexiSeq table of a rank (rt_seq.h): the executor's helpers, the
 * table's check, and the message plan the hook follows (rt_seq_attn.c).
 *
 * Heads below are numbered inside this rank's TP share: query head i is
 * global head tp_rank * H/tp + i and reads share kv head i / (H/K) (a share
 * starts on a kv-head boundary because tp divides kv_heads). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rtlib/rt_init.h"
#include "rtlib/seq/rt_seq_internal.h"

long rt_seq_local_tokens(const struct hx_rt_seq *seq) {
  return rt_seq_unit_tokens(&seq->units[seq->unit]);
}

long rt_seq_unit_tokens(const struct hx_rt_seq_unit *u) {
  long n = 0;
  for (int k = 0; k < u->nranges; k++)
    n += (long)(u->ranges[k].end - u->ranges[k].begin);
  return n;
}

/* The positions of unit u's tokens, ranges in table order; returns past them. */
static int *unit_positions(const struct hx_rt_seq_unit *u, int *pos) {
  for (int k = 0; k < u->nranges; k++)
    for (int64_t t = u->ranges[k].begin; t < u->ranges[k].end; t++)
      *pos++ = (int)t;
  return pos;
}

void rt_seq_positions(const struct hx_rt_seq *seq, int *pos) {
  unit_positions(&seq->units[seq->unit], pos);
}

/* ---- the check ---- */

static char why_buf[256];

__attribute__((format(printf, 1, 2))) static const char *why(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(why_buf, sizeof why_buf, fmt, ap);
  va_end(ap);
  return why_buf;
}

static int by_begin(const void *x, const void *y) {
  const struct hx_rt_seq_range *a = x, *b = y;
  return (a->begin > b->begin) - (a->begin < b->begin);
}

/* ranges[0..n) (sorted here) cover [0, end) exactly once; else the fault. */
static const char *check_cover(struct hx_rt_seq_range *ranges, int n, int64_t end, const char *noun,
                               const char *where) {
  qsort(ranges, (size_t)n, sizeof ranges[0], by_begin);
  int64_t at = 0;
  for (int k = 0; k < n; k++) {
    if (ranges[k].begin > at)
      return why("%s [%lld, %lld) are held by no unit of %s", noun, (long long)at,
                 (long long)ranges[k].begin, where);
    if (ranges[k].begin < at)
      return why("%s from %lld on are held twice in %s", noun, (long long)ranges[k].begin, where);
    at = ranges[k].end;
  }
  if (at != end)
    return why("%s [%lld, %lld) are held by no unit of %s", noun, (long long)at, (long long)end,
               where);
  return NULL;
}

static const char *check_units(const struct hx_rt_seq *seq, const struct hxk_dims *d) {
  int share = d->heads / seq->tp, h0 = seq->tp_rank * share;
  struct hx_rt_seq_range *all = hx_rt_calloc(2 * (size_t)seq->nunits, sizeof *all);
  int n = 0;
  const char *bad = NULL;
  for (int u = 0; u < seq->nunits && !bad; u++) {
    const struct hx_rt_seq_unit *x = &seq->units[u];
    if (x->nranges < 0 || x->nranges > 2)
      bad = why("unit %d has %d token ranges (0 to 2)", u, x->nranges);
    for (int k = 0; k < x->nranges && !bad; k++) {
      struct hx_rt_seq_range r = x->ranges[k];
      if (r.begin < 0 || r.begin >= r.end || r.end > d->seq_len)
        bad = why("unit %d's token range [%lld, %lld) is not inside [0, %d)", u, (long long)r.begin,
                  (long long)r.end, d->seq_len);
      all[n++] = r;
    }
    if (!bad && (x->head_begin < h0 || x->head_begin > x->head_end || x->head_end > h0 + share))
      bad = why("unit %d's heads [%d, %d) are not inside TP rank %d's share [%d, %d)", u,
                x->head_begin, x->head_end, seq->tp_rank, h0, h0 + share);
  }
  if (!bad)
    bad = check_cover(all, n, d->seq_len, "tokens", "the ring");
  free(all);
  return bad;
}

static const char *check_group(const struct hx_rt_seq *seq, const struct hxk_dims *d, int g) {
  const struct hx_rt_seq_group *gr = &seq->groups[g];
  int share = d->heads / seq->tp, h0 = seq->tp_rank * share;
  struct hx_rt_seq_range *heads = hx_rt_calloc((size_t)gr->n, sizeof *heads);
  int n = 0;
  for (int x = 0; x < gr->n; x++) {
    const struct hx_rt_seq_unit *u = &seq->units[gr->first + x];
    if (u->head_end > u->head_begin)
      heads[n++] = (struct hx_rt_seq_range){u->head_begin - h0, u->head_end - h0};
  }
  char where[32];
  snprintf(where, sizeof where, "group %d", g);
  const char *bad = check_cover(heads, n, share, "query heads (of the share)", where);
  free(heads);
  for (int x = 0; x < gr->n && !bad; x++)
    for (int y = 0; y < gr->n && !bad; y++) {
      const struct hx_rt_seq_unit *ux = &seq->units[gr->first + x];
      const struct hx_rt_seq_unit *uy = &seq->units[gr->first + y];
      int64_t want = (int64_t)rt_seq_unit_tokens(ux) * (uy->head_end - uy->head_begin);
      if (!gr->split_table || gr->split_table[(long)x * gr->n + y] != want)
        bad = why("group %d's split table [%d][%d] is not %lld (tokens of member %d x heads of "
                  "member %d)",
                  g, x, y, (long long)want, x, y);
    }
  return bad;
}

static const char *check_groups(const struct hx_rt_seq *seq, const struct hxk_dims *d) {
  if (seq->ngroups < 1)
    return "a stage needs at least one all-to-all group";
  int next = 0;
  for (int g = 0; g < seq->ngroups; g++) {
    const struct hx_rt_seq_group *gr = &seq->groups[g];
    if (gr->first != next || gr->n < 1 || gr->first + gr->n > seq->nunits)
      return why("group %d is not the next run of the ring (units from %d on)", g, next);
    next += gr->n;
  }
  if (next != seq->nunits)
    return why("the groups cover %d of the ring's %d units", next, seq->nunits);
  for (int g = 0; g < seq->ngroups; g++) {
    const char *bad = check_group(seq, d, g);
    if (bad)
      return bad;
  }
  const struct hx_rt_seq_group *mine = &seq->groups[seq->group];
  if (seq->unit < mine->first || seq->unit >= mine->first + mine->n)
    return why("unit %d is not in group %d", seq->unit, seq->group);
  return NULL;
}

const char *rt_seq_check(const struct hx_rt_seq *seq, const struct hxk_dims *d, int rank) {
  if (seq->tp < 1 || seq->tp_rank < 0 || seq->tp_rank >= seq->tp || d->heads % seq->tp ||
      d->kv_heads % seq->tp)
    return why("TP rank %d of %d does not split %d heads and %d kv heads evenly", seq->tp_rank,
               seq->tp, d->heads, d->kv_heads);
  if (seq->nunits < 1 || seq->unit < 0 || seq->unit >= seq->nunits ||
      seq->units[seq->unit].rank != rank)
    return why("this rank (%d) is not unit %d of the ring's %d", rank, seq->unit, seq->nunits);
  if (seq->group < 0 || seq->group >= seq->ngroups)
    return why("group %d is not one of the %d groups", seq->group, seq->ngroups);
  const char *bad = check_units(seq, d);
  return bad ? bad : check_groups(seq, d);
}

/* ---- the message plan ---- */

static int group_of_unit(const struct hx_rt_seq *seq, int u) {
  for (int g = 0; g < seq->ngroups; g++)
    if (u < seq->groups[g].first + seq->groups[g].n)
      return g;
  return -1;
}

/* Unit u's query heads and the kv heads they read, in the share. */
static struct seq_member member_of(const struct hx_rt_seq *seq, const struct hxk_dims *d, int u,
                                   long row0) {
  const struct hx_rt_seq_unit *x = &seq->units[u];
  int share = d->heads / seq->tp, per_kv = d->heads / d->kv_heads;
  struct seq_member m = {x->rank, rt_seq_unit_tokens(x), row0, 0, 0, 0, 0};
  m.h0 = x->head_begin - seq->tp_rank * share;
  m.nh = x->head_end - x->head_begin;
  if (m.nh > 0) {
    m.kv0 = m.h0 / per_kv;
    m.nkv = (m.h0 + m.nh - 1) / per_kv + 1 - m.kv0;
  }
  return m;
}

static bool reads_kv(const struct seq_member *m, int k) {
  return k >= m->kv0 && k < m->kv0 + m->nkv;
}

/* The member of group g that first reads share kv head k: it forwards k's
 * K/V to the next group and collects k's dK/dV for its own group. Every
 * group reads every kv head (its heads cover the share). */
static int owner_of(const struct rt_seq *s, int g, int k) {
  const struct hx_rt_seq_group *gr = &s->seq->groups[g];
  for (int x = 0; x < gr->n; x++)
    if (reads_kv(&s->units[gr->first + x], k))
      return gr->first + x;
  hx_rt_fatal(HX_RT_EXIT_ERROR, "internal: no unit of group %d reads kv head %d", g, k);
}

/* The ring link from unit w (group g - 1) to unit v (group g): the kv heads
 * whose K/V w forwards to v (v reads them, w owns them in its group) and
 * those whose dK/dV w pushes to v (w reads them, v owns them in its group). */
static struct seq_link link_of(const struct rt_seq *s, int w, int v) {
  const struct seq_member *mw = &s->units[w], *mv = &s->units[v];
  int gw = group_of_unit(s->seq, w), gv = group_of_unit(s->seq, v);
  struct seq_link l = {mw->rank, mv->rank, NULL, 0, NULL, 0};
  l.kv = hx_rt_calloc((size_t)s->nkv_share + 1, sizeof(int));
  l.acc = hx_rt_calloc((size_t)s->nkv_share + 1, sizeof(int));
  for (int k = 0; k < s->nkv_share; k++) {
    if (reads_kv(mv, k) && owner_of(s, gw, k) == w)
      l.kv[l.nkv++] = k;
    if (reads_kv(mw, k) && owner_of(s, gv, k) == v)
      l.acc[l.nacc++] = k;
  }
  return l;
}

/* Links from every unit of the previous group to this unit, and from it to
 * every unit of the next group (none when the ring has one group). */
static void plan_ring(struct rt_seq *s) {
  const struct hx_rt_seq *seq = s->seq;
  if (seq->ngroups == 1)
    return;
  const struct hx_rt_seq_group *prev = &seq->groups[(seq->group + seq->ngroups - 1) % seq->ngroups];
  const struct hx_rt_seq_group *next = &seq->groups[(seq->group + 1) % seq->ngroups];
  s->nin = prev->n;
  s->nout = next->n;
  s->in = hx_rt_calloc((size_t)s->nin, sizeof *s->in);
  s->out = hx_rt_calloc((size_t)s->nout, sizeof *s->out);
  for (int x = 0; x < prev->n; x++)
    s->in[x] = link_of(s, prev->first + x, seq->unit);
  for (int y = 0; y < next->n; y++)
    s->out[y] = link_of(s, seq->unit, next->first + y);
}

static void plan_positions(struct rt_seq *s) {
  const struct hx_rt_seq *seq = s->seq;
  s->pos = hx_rt_calloc((size_t)s->dims->seq_len, sizeof(int));
  s->group_row0 = hx_rt_calloc((size_t)seq->ngroups + 1, sizeof(long));
  int *at = s->pos;
  for (int g = 0; g < seq->ngroups; g++) {
    s->group_row0[g] = at - s->pos;
    for (int x = 0; x < seq->groups[g].n; x++)
      at = unit_positions(&seq->units[seq->groups[g].first + x], at);
    long n = (at - s->pos) - s->group_row0[g];
    s->most_tokens = n > s->most_tokens ? n : s->most_tokens;
  }
  s->group_row0[seq->ngroups] = at - s->pos;
}

static struct seq_exchange exchange_new(int n) {
  long *counts = hx_rt_calloc(4 * (size_t)n + 1, sizeof(long));
  return (struct seq_exchange){hx_rt_calloc((size_t)n + 1, sizeof(int)), counts, counts + n,
                               counts + 2 * n, counts + 3 * n};
}

/* The peers of the all-to-alls (the group's members) and of the ring steps
 * (the links in, then out: a link in carries nothing out and the reverse,
 * so those counts stay 0); the hook fills in the other counts per call. */
static void plan_exchanges(struct rt_seq *s) {
  const struct hx_rt_seq_group *mine = &s->seq->groups[s->seq->group];
  s->a2a = exchange_new(mine->n);
  for (int x = 0; x < mine->n; x++)
    s->a2a.peers[x] = s->units[mine->first + x].rank;
  s->ring = exchange_new(s->nin + s->nout);
  for (int x = 0; x < s->nin; x++)
    s->ring.peers[x] = s->in[x].from;
  for (int y = 0; y < s->nout; y++)
    s->ring.peers[s->nin + y] = s->out[y].to;
}

struct rt_seq *rt_seq_open(const struct hx_rt_seq *seq, const struct hxk_dims *dims,
                           const struct rt_transport *t) {
  const char *bad = rt_seq_check(seq, dims, hx_rt_rank());
  if (bad)
    hx_rt_fatal(HX_RT_EXIT_ERROR, "the context/head-parallel table of this rank is wrong: %s", bad);
  struct rt_seq *s = hx_rt_calloc(1, sizeof *s);
  s->seq = seq;
  s->dims = dims;
  s->t = t;
  s->hd = dims->head_dim;
  s->nh_share = dims->heads / seq->tp;
  s->nkv_share = dims->kv_heads / seq->tp;
  s->units = hx_rt_calloc((size_t)seq->nunits, sizeof *s->units);
  long row0 = 0;
  for (int u = 0; u < seq->nunits; u++) {
    if (u == seq->groups[group_of_unit(seq, u)].first)
      row0 = 0;
    s->units[u] = member_of(seq, dims, u, row0);
    row0 += s->units[u].tokens;
  }
  s->me = &s->units[seq->unit];
  int per_kv = dims->heads / dims->kv_heads;
  s->kv_of = hx_rt_calloc((size_t)s->me->nh + 1, sizeof(int));
  for (int i = 0; i < s->me->nh; i++)
    s->kv_of[i] = (s->me->h0 + i) / per_kv - s->me->kv0;
  s->heads =
      (struct rt_seq_heads){s->me->nh, s->me->nkv, s->hd, s->kv_of, s->me->h0, per_kv, s->me->kv0};
  plan_positions(s);
  plan_ring(s);
  plan_exchanges(s);
  rt_seq_use_kernels(s, rt_seq_cpu_kernels());
  return s;
}

void rt_seq_use_kernels(struct rt_seq *s, const struct rt_seq_kernels *k) {
  if (s->k)
    s->k->free_ints(s->kpos);
  s->k = k;
  s->kpos = k->ints(s->pos, s->dims->seq_len);
  rt_seq_hook_init(s);
}

void rt_seq_close(struct rt_seq *s) {
  if (!s)
    return;
  for (int x = 0; x < s->nin; x++) {
    free(s->in[x].kv);
    free(s->in[x].acc);
  }
  for (int y = 0; y < s->nout; y++) {
    free(s->out[y].kv);
    free(s->out[y].acc);
  }
  free(s->in);
  free(s->out);
  free(s->a2a.peers);
  free(s->a2a.send_n);
  free(s->ring.peers);
  free(s->ring.send_n);
  free(s->units);
  s->k->free_ints(s->kpos);
  free(s->kv_of);
  free(s->pos);
  free(s->group_row0);
  free(s);
}
