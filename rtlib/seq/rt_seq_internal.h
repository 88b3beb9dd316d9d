/* What rt_seq.c (the table, the message plan) and rt_seq_attn.c (the hook)
 * share. Heads are numbered inside the rank's TP share (rt_seq.c). */
#ifndef HX_RT_SEQ_INTERNAL_H
#define HX_RT_SEQ_INTERNAL_H

#include <stdbool.h>

#include "rtlib/rt_backend.h"
#include "rtlib/seq/rt_seq.h"

/* A unit of the ring as the hook sees it. */
struct seq_member {
  int rank;     /* world rank */
  long tokens;  /* of one sequence */
  long row0;    /* its first row among its group's tokens (group order) */
  int h0, nh;   /* query heads [h0, h0 + nh) of the share */
  int kv0, nkv; /* the kv heads they read */
};

/* A ring link from unit `from` (previous group) to unit `to` (next group):
 * the kv heads whose K/V travel on it, and those whose dK/dV accumulators
 * do (share numbering, increasing). */
struct seq_link {
  int from, to; /* world ranks */
  int *kv, nkv;
  int *acc, nacc;
};

/* The arguments of one alltoallv (rt_backend.h), kept with the plan so a
 * call allocates nothing: n peers, counts and offsets in floats. */
struct seq_exchange {
  int *peers;
  long *send_n, *send_off, *recv_n, *recv_off;
};

struct rt_seq {
  const struct hx_rt_seq *seq;
  const struct hxk_dims *dims;
  const struct rt_transport *t;
  int hd, nh_share, nkv_share;
  struct seq_member *units; /* per unit of the ring */
  const struct seq_member *me;
  int *kv_of;                     /* per own query head: its kv head among own kv heads */
  struct rt_seq_heads heads;      /* own heads, as the block kernels take them */
  const struct rt_seq_kernels *k; /* the device's (rt_seq_use_kernels) */
  int *pos;                       /* every token's position, group after group in group order */
  int *kpos;                      /* the same where k's block kernels read them */
  long *group_row0;               /* ngroups + 1: group g's tokens are pos[row0[g] .. row0[g+1]) */
  long most_tokens;               /* of any group */
  int nin, nout; /* ring links into this unit (from the previous group), out of it */
  struct seq_link *in, *out;
  struct seq_exchange a2a;  /* the group's members */
  struct seq_exchange ring; /* in[] then out[] */
  long scratch;             /* floats the hook's forward or backward uses, per sequence */
  struct hxk_attention_hook hook;
};

long rt_seq_unit_tokens(const struct hx_rt_seq_unit *u);

/* Fills s->hook and s->scratch for s->k (rt_seq_attn.c). */
void rt_seq_hook_init(struct rt_seq *s);

#endif
