/* The decoder layer against its parts and against its TP shards:
 *  1. hxk_layer_forward/backward equal a hand composition of the single
 *     kernels (max error relative to max(1, |ref|) under 1e-6);
 *  2. the recompute path gives bit-identical outputs and gradients, and two
 *     micro-batches in flight (separate activation buffers) do not interfere;
 *  3. the layer split into 2 and into 3 uneven TP shards, one thread per rank
 *     with the all-reduce done by hand in rank order, gives the unsplit
 *     layer's output, input gradient and weight gradients within 1e-5
 *     (relative to max(1, |ref|)); the splits cut GQA groups, so replicated
 *     kv heads are exercised, and one split runs in recompute mode;
 *  4. the same with sequence parallelism over 2, 3 and 4 ranks (14 token
 *     rows: uneven for 3 and 4), with the reduce-scatter and all-gather
 *     done by hand: each rank's output and input gradient equal the unsplit
 *     layer's on its rows, the norm gains' gradients summed over the ranks
 *     equal the unsplit layer's, both recompute modes, and the activations
 *     kept per rank are fewer than without SP. */
/* pthread barriers are POSIX, outside strict C11 */
#define _POSIX_C_SOURCE 200809L
#include <cblas.h>
#include <pthread.h>

#include "kcheck.h"
#include "kernels/cpu/llama.h"

static struct hxk_dims dims = {.dim = 24, .ffn = 20, .heads = 6,
                               .kv_heads = 2, .vocab = 8, .seq_len = 7,
                               .layers = 2, .norm_eps = 1e-5f,
                               .rope_theta = 500.0};
enum { NSEQ = 2, MAX_TP = 4 };

static long ntok(void) { return NSEQ * (long)dims.seq_len; }
static long nact(void) { return ntok() * dims.dim; }

/* The unsplit layer: weights, input, upstream gradient, and its results. */
struct reference {
  struct hxk_shard shard;
  float *rope;
  int kv_of[16];
  float *wbuf, *x, *dout;
  struct hxk_layer_params w;
  float *out, *dx, *gbuf; /* computed by hxk_layer_* */
};

static void make_reference(struct reference *ref) {
  KC_CHECK(hxk_dims_check(&dims), "dims");
  KC_CHECK(hxk_shard_make(&dims, 0, dims.heads, 0, dims.ffn, &ref->shard),
           "full shard");
  ref->rope = kc_alloc(hxk_rope_table_floats(&dims));
  hxk_rope_table(ref->rope, &dims);
  hxk_kv_map(ref->kv_of, &dims, &ref->shard);
  long np = hxk_layer_floats(&dims, &ref->shard);
  ref->wbuf = kc_alloc(np);
  ref->gbuf = kc_alloc(np);
  hxk_layer_bind(&ref->w, ref->wbuf, &dims, &ref->shard);
  kc_fill(ref->wbuf, np, 0.3f);
  for (int i = 0; i < dims.dim; i++) {
    ref->w.attn_norm[i] = 1.0f + kc_uniform(0.3f);
    ref->w.mlp_norm[i] = 1.0f + kc_uniform(0.3f);
  }
  ref->x = kc_alloc(nact());
  ref->dout = kc_alloc(nact());
  ref->out = kc_alloc(nact());
  ref->dx = kc_alloc(nact());
  kc_fill(ref->x, nact(), 1.0f);
  kc_fill(ref->dout, nact(), 1.0f);
}

static struct hxk_layer_ctx ctx_for(const struct hxk_shard *s,
                                    const float *rope, const int *kv_of,
                                    bool recompute) {
  struct hxk_layer_ctx ctx = {
      .dims = &dims, .shard = s, .rope = rope, .kv_of = kv_of, .recompute = recompute};
  return ctx;
}

/* Forward + backward of one layer context; gradients added into gbuf. */
static void run_layer(const struct hxk_layer_ctx *ctx,
                      const struct hxk_layer_params *w, float *gbuf,
                      const float *x, const float *dout, float *out,
                      float *dx) {
  struct hxk_layer_params g;
  hxk_layer_bind(&g, gbuf, ctx->dims, ctx->shard);
  float *acts = kc_alloc(hxk_layer_acts_floats(ctx, NSEQ));
  float *scratch = kc_alloc(hxk_layer_scratch_floats(ctx, NSEQ));
  hxk_layer_forward(ctx, w, x, out, acts, scratch, NSEQ);
  hxk_layer_backward(ctx, w, &g, dout, dx, acts, scratch, NSEQ);
  free(acts);
  free(scratch);
}

/* ---- 1. composition of the single kernels ------------------------------- */

struct composed {
  float *a, *rstd1, *q, *k, *v, *o, *lse, *x1, *part, *m, *rstd2;
  float *gate, *up, *h, *out;
};

static void composed_forward(struct reference *ref, struct composed *c) {
  long n = ntok();
  int D = dims.dim, qw = dims.heads * dims.head_dim;
  int kvw = dims.kv_heads * dims.head_dim, F = dims.ffn;
  float *scratch = kc_alloc(hxk_attention_scratch_floats(dims.seq_len));
  hxk_rmsnorm_forward(c->a, c->rstd1, ref->x, ref->w.attn_norm, n, D,
                      dims.norm_eps);
  hxk_linear_forward(c->q, c->a, ref->w.wq, n, D, qw, 0.0f);
  hxk_linear_forward(c->k, c->a, ref->w.wk, n, D, kvw, 0.0f);
  hxk_linear_forward(c->v, c->a, ref->w.wv, n, D, kvw, 0.0f);
  hxk_rope_forward(c->q, ref->rope, n, dims.heads, dims.head_dim,
                   dims.seq_len);
  hxk_rope_forward(c->k, ref->rope, n, dims.kv_heads, dims.head_dim,
                   dims.seq_len);
  hxk_attention_forward(c->o, c->lse, c->q, c->k, c->v, ref->kv_of, NSEQ,
                        dims.seq_len, dims.heads, dims.kv_heads, dims.head_dim,
                        scratch);
  hxk_linear_forward(c->part, c->o, ref->w.wo, n, qw, D, 0.0f);
  hxk_residual_forward(c->x1, ref->x, c->part, n * D);
  hxk_rmsnorm_forward(c->m, c->rstd2, c->x1, ref->w.mlp_norm, n, D,
                      dims.norm_eps);
  hxk_linear_forward(c->gate, c->m, ref->w.w_gate, n, D, F, 0.0f);
  hxk_linear_forward(c->up, c->m, ref->w.w_up, n, D, F, 0.0f);
  hxk_swiglu_forward(c->h, c->gate, c->up, n * F);
  hxk_linear_forward(c->part, c->h, ref->w.w_down, n, F, D, 0.0f);
  hxk_residual_forward(c->out, c->x1, c->part, n * D);
  free(scratch);
}

/* The backward, kernel by kernel, into a gradient set bound to gbuf. */
static void composed_backward(struct reference *ref, struct composed *c,
                              float *gbuf, float *dx) {
  long n = ntok();
  int D = dims.dim, qw = dims.heads * dims.head_dim;
  int kvw = dims.kv_heads * dims.head_dim, F = dims.ffn;
  struct hxk_layer_params g;
  hxk_layer_bind(&g, gbuf, &dims, &ref->shard);
  float *scratch = kc_alloc(hxk_attention_scratch_floats(dims.seq_len));
  float *dx1 = kc_alloc(n * D), *dm = kc_alloc(n * D), *da = kc_alloc(n * D);
  float *dh = kc_alloc(n * F), *dgate = kc_alloc(n * F), *dup = kc_alloc(n * F);
  float *dpart_unused = kc_alloc(n * D);
  float *dov = kc_alloc(n * qw), *dq = kc_alloc(n * qw);
  float *dk = kc_alloc(n * kvw), *dv = kc_alloc(n * kvw);
  float *dq_rot = kc_alloc(n * qw), *dk_rot = kc_alloc(n * kvw);
  /* out = x1 + part: both get dout */
  hxk_residual_backward(dx1, dpart_unused, ref->dout, n * D);
  hxk_linear_backward(dh, g.w_down, ref->dout, c->h, ref->w.w_down, n, F, D);
  hxk_swiglu_backward(dgate, dup, dh, c->gate, c->up, n * F);
  hxk_linear_backward(dm, g.w_gate, dgate, c->m, ref->w.w_gate, n, D, F);
  hxk_linear_backward(dm, g.w_up, dup, c->m, ref->w.w_up, n, D, F);
  hxk_rmsnorm_backward(dx1, g.mlp_norm, dm, c->x1, ref->w.mlp_norm, c->rstd2,
                       n, D);
  /* x1 = x + part */
  memset(dx, 0, (size_t)(n * D) * sizeof *dx);
  memset(dpart_unused, 0, (size_t)(n * D) * sizeof *dx);
  hxk_residual_backward(dx, dpart_unused, dx1, n * D);
  hxk_linear_backward(dov, g.wo, dx1, c->o, ref->w.wo, n, qw, D);
  hxk_attention_backward(dq, dk, dv, dov, c->q, c->k, c->v, c->lse,
                         ref->kv_of, NSEQ, dims.seq_len, dims.heads,
                         dims.kv_heads, dims.head_dim, scratch);
  hxk_rope_backward(dq_rot, dq, ref->rope, n, dims.heads, dims.head_dim,
                    dims.seq_len);
  hxk_rope_backward(dk_rot, dk, ref->rope, n, dims.kv_heads, dims.head_dim,
                    dims.seq_len);
  hxk_linear_backward(da, g.wq, dq_rot, c->a, ref->w.wq, n, D, qw);
  hxk_linear_backward(da, g.wk, dk_rot, c->a, ref->w.wk, n, D, kvw);
  hxk_linear_backward(da, g.wv, dv, c->a, ref->w.wv, n, D, kvw);
  hxk_rmsnorm_backward(dx, g.attn_norm, da, ref->x, ref->w.attn_norm,
                       c->rstd1, n, D);
  float *bufs[] = {scratch, dx1, dm, da, dh, dgate, dup, dpart_unused,
                   dov, dq, dk, dv, dq_rot, dk_rot};
  for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++)
    free(bufs[i]);
}

static void test_composition(struct reference *ref) {
  long n = ntok();
  long qw = dims.heads * dims.head_dim, kvw = dims.kv_heads * dims.head_dim;
  struct composed c = {
      kc_alloc(n * dims.dim), kc_alloc(n),        kc_alloc(n * qw),
      kc_alloc(n * kvw),      kc_alloc(n * kvw),  kc_alloc(n * qw),
      kc_alloc(n * dims.heads), kc_alloc(n * dims.dim), kc_alloc(n * dims.dim),
      kc_alloc(n * dims.dim), kc_alloc(n),        kc_alloc(n * dims.ffn),
      kc_alloc(n * dims.ffn), kc_alloc(n * dims.ffn), kc_alloc(n * dims.dim)};
  long np = hxk_layer_floats(&dims, &ref->shard);
  float *gbuf = kc_alloc(np), *dx = kc_alloc(nact());
  composed_forward(ref, &c);
  composed_backward(ref, &c, gbuf, dx);
  double err_out = kc_max_err(ref->out, c.out, nact());
  double err_dx = kc_max_err(ref->dx, dx, nact());
  double err_g = kc_max_err(ref->gbuf, gbuf, np);
  printf("  composition: out %.2e dx %.2e grads %.2e\n", err_out, err_dx,
         err_g);
  KC_CHECK(err_out < 1e-6 && err_dx < 1e-6 && err_g < 1e-6,
           "layer differs from its kernels");
  float *bufs[] = {c.a, c.rstd1, c.q, c.k, c.v, c.o, c.lse, c.x1, c.part,
                   c.m, c.rstd2, c.gate, c.up, c.h, c.out, gbuf, dx};
  for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++)
    free(bufs[i]);
}

/* ---- 2. recompute, micro-batches in flight ------------------------------ */

static void test_recompute(struct reference *ref) {
  long np = hxk_layer_floats(&dims, &ref->shard);
  float *gbuf = kc_alloc(np), *out = kc_alloc(nact()), *dx = kc_alloc(nact());
  struct hxk_layer_ctx ctx = ctx_for(&ref->shard, ref->rope, ref->kv_of, true);
  KC_CHECK(hxk_layer_acts_floats(&ctx, NSEQ) == nact(),
           "recompute keeps more than the input");
  run_layer(&ctx, &ref->w, gbuf, ref->x, ref->dout, out, dx);
  KC_CHECK(memcmp(out, ref->out, (size_t)nact() * sizeof *out) == 0,
           "recompute: output differs");
  KC_CHECK(memcmp(dx, ref->dx, (size_t)nact() * sizeof *dx) == 0,
           "recompute: dx differs");
  KC_CHECK(memcmp(gbuf, ref->gbuf, (size_t)np * sizeof *gbuf) == 0,
           "recompute: weight gradients differ");

  /* Micro-batch B's forward between A's forward and backward. */
  struct hxk_layer_ctx keep = ctx_for(&ref->shard, ref->rope, ref->kv_of,
                                      false);
  float *acts_a = kc_alloc(hxk_layer_acts_floats(&keep, NSEQ));
  float *acts_b = kc_alloc(hxk_layer_acts_floats(&keep, NSEQ));
  float *scratch = kc_alloc(hxk_layer_scratch_floats(&keep, NSEQ));
  float *x_b = kc_alloc(nact()), *out_b = kc_alloc(nact());
  struct hxk_layer_params g;
  memset(gbuf, 0, (size_t)np * sizeof *gbuf);
  hxk_layer_bind(&g, gbuf, &dims, &ref->shard);
  kc_fill(x_b, nact(), 1.0f);
  hxk_layer_forward(&keep, &ref->w, ref->x, out, acts_a, scratch, NSEQ);
  hxk_layer_forward(&keep, &ref->w, x_b, out_b, acts_b, scratch, NSEQ);
  hxk_layer_backward(&keep, &ref->w, &g, ref->dout, dx, acts_a, scratch, NSEQ);
  KC_CHECK(memcmp(dx, ref->dx, (size_t)nact() * sizeof *dx) == 0 &&
               memcmp(gbuf, ref->gbuf, (size_t)np * sizeof *gbuf) == 0,
           "a micro-batch in flight changed another's backward");
  free(acts_a), free(acts_b), free(scratch), free(x_b), free(out_b);
  free(gbuf), free(out), free(dx);
}

/* ---- 3. tensor parallelism ---------------------------------------------- */

struct tp_group {
  int size;
  pthread_barrier_t barrier;
  float *bufs[MAX_TP];
  float *sum; /* nact() floats: the largest all-reduce */
};

struct tp_rank {
  struct tp_group *group;
  int rank;
  bool recompute, sp;
  long row0, rows; /* SP: the rank's token rows; else 0 and ntok() */
  struct reference *ref;
  struct hxk_shard shard;
  int kv_of[16];
  float *wbuf, *gbuf, *out, *dx;
};

/* The all-reduce, by hand: every rank posts its buffer, rank 0 sums them in
 * rank order, every rank copies the sum back. */
static void hand_allreduce(float *buf, long n, void *arg) {
  struct tp_rank *me = arg;
  struct tp_group *grp = me->group;
  grp->bufs[me->rank] = buf;
  pthread_barrier_wait(&grp->barrier);
  if (me->rank == 0) {
    for (long i = 0; i < n; i++) {
      float s = 0.0f;
      for (int r = 0; r < grp->size; r++)
        s += grp->bufs[r][i];
      grp->sum[i] = s;
    }
  }
  pthread_barrier_wait(&grp->barrier);
  memcpy(buf, grp->sum, (size_t)n * sizeof *buf);
  pthread_barrier_wait(&grp->barrier);
}

/* Sequence parallelism by hand: every rank posts its buffer; for the
 * reduce-scatter each rank sums its own rows over the ranks in rank order,
 * for the all-gather each copies every other rank's rows out of that rank's
 * buffer. */
static void hand_reduce_scatter(const float *send, float *recv, long n, int width, void *arg) {
  struct tp_rank *me = arg;
  struct tp_group *grp = me->group;
  grp->bufs[me->rank] = (float *)send;
  pthread_barrier_wait(&grp->barrier);
  long b = 0, e = 0;
  hxk_sp_rows(n, grp->size, me->rank, &b, &e);
  for (long i = b * width; i < e * width; i++) {
    float sum = 0.0f;
    for (int r = 0; r < grp->size; r++)
      sum += grp->bufs[r][i];
    recv[i - b * width] = sum;
  }
  pthread_barrier_wait(&grp->barrier);
}

static void hand_allgather(float *buf, long n, int width, void *arg) {
  struct tp_rank *me = arg;
  struct tp_group *grp = me->group;
  grp->bufs[me->rank] = buf;
  pthread_barrier_wait(&grp->barrier);
  for (int r = 0; r < grp->size; r++) {
    long b = 0, e = 0;
    hxk_sp_rows(n, grp->size, r, &b, &e);
    if (r != me->rank)
      memcpy(buf + b * width, grp->bufs[r] + b * width, (size_t)((e - b) * width) * sizeof *buf);
  }
  pthread_barrier_wait(&grp->barrier);
}

/* Copies the shard's slice of every tensor out of the full layer. */
static void slice_layer(float *dst, const float *full,
                        const struct hxk_shard *full_shard,
                        const struct hxk_shard *s) {
  for (int j = 0; j < HXK_LAYER_NPARAMS; j++) {
    long rows, cols, r0, r1, c0, c1;
    hxk_param_shape(&dims, (enum hxk_param)j, &rows, &cols);
    hxk_param_slice(&dims, s, (enum hxk_param)j, &r0, &r1, &c0, &c1);
    for (long r = r0; r < r1; r++)
      for (long c = c0; c < c1; c++)
        *dst++ = full[r * cols + c];
    full += hxk_layer_param_floats(&dims, full_shard, (enum hxk_param)j);
  }
}

static void *tp_rank_main(void *arg) {
  struct tp_rank *me = arg;
  struct hxk_layer_ctx ctx = ctx_for(&me->shard, me->ref->rope, me->kv_of,
                                     me->recompute);
  ctx.allreduce = hand_allreduce;
  ctx.allreduce_arg = me;
  if (me->sp) {
    ctx.sp_size = me->group->size;
    ctx.sp_rank = me->rank;
    ctx.reduce_scatter = hand_reduce_scatter;
    ctx.allgather = hand_allgather;
    ctx.sp_arg = me;
  }
  struct hxk_layer_params w;
  hxk_layer_bind(&w, me->wbuf, &dims, &me->shard);
  long at = me->row0 * dims.dim;
  run_layer(&ctx, &w, me->gbuf, me->ref->x + at, me->ref->dout + at, me->out, me->dx);
  return NULL;
}

/* Each rank's gradient tensors added into a full-size layer (norm gains,
 * complete on every rank, are compared per rank instead). */
static void gather_grads(float *full, const struct hxk_shard *full_shard,
                         struct tp_rank *ranks, int degree) {
  for (int p = 0; p < degree; p++) {
    const float *src = ranks[p].gbuf;
    float *dst = full;
    for (int j = 0; j < HXK_LAYER_NPARAMS; j++) {
      long rows, cols, r0, r1, c0, c1;
      hxk_param_shape(&dims, (enum hxk_param)j, &rows, &cols);
      hxk_param_slice(&dims, &ranks[p].shard, (enum hxk_param)j, &r0, &r1,
                      &c0, &c1);
      bool is_norm = j == HXK_ATTN_NORM || j == HXK_MLP_NORM;
      for (long r = r0; r < r1; r++)
        for (long c = c0; c < c1; c++, src++)
          if (!is_norm)
            dst[r * cols + c] += *src;
      dst += hxk_layer_param_floats(&dims, full_shard, (enum hxk_param)j);
    }
  }
}

/* The activations a layer keeps with and without SP, for one shard. */
static void check_sp_acts(const struct tp_rank *rk, const struct reference *ref, int degree) {
  struct hxk_layer_ctx ctx = ctx_for(&rk->shard, ref->rope, rk->kv_of, rk->recompute);
  long off = hxk_layer_acts_floats(&ctx, NSEQ);
  ctx.sp_size = degree;
  ctx.sp_rank = rk->rank;
  long on = hxk_layer_acts_floats(&ctx, NSEQ);
  /* x (or, recomputing, x alone), rstd1, a, x1, rstd2, m: six per-row
   * tensors, of which recompute keeps x only */
  long per_row = rk->recompute ? dims.dim : 4L * dims.dim + 2;
  KC_CHECK(off - on == (ntok() - rk->rows) * per_row,
           "tp=%d rank %d: SP keeps %ld floats, without %ld", degree, rk->rank, on, off);
}

static void check_tp_split(struct reference *ref, const int *q_bounds,
                           const int *f_bounds, int degree, bool recompute, bool sp) {
  struct tp_group grp = {.size = degree};
  struct tp_rank ranks[MAX_TP];
  pthread_t threads[MAX_TP];
  long np_full = hxk_layer_floats(&dims, &ref->shard);
  grp.sum = kc_alloc(nact());
  pthread_barrier_init(&grp.barrier, NULL, (unsigned)degree);
  for (int p = 0; p < degree; p++) {
    struct tp_rank *rk = &ranks[p];
    *rk = (struct tp_rank){.group = &grp, .rank = p, .recompute = recompute, .sp = sp,
                           .ref = ref, .row0 = 0, .rows = ntok()};
    if (sp) {
      long end = 0;
      hxk_sp_rows(ntok(), degree, p, &rk->row0, &end);
      rk->rows = end - rk->row0;
    }
    KC_CHECK(hxk_shard_make(&dims, q_bounds[p], q_bounds[p + 1], f_bounds[p],
                            f_bounds[p + 1], &rk->shard),
             "shard %d", p);
    hxk_kv_map(rk->kv_of, &dims, &rk->shard);
    long np = hxk_layer_floats(&dims, &rk->shard);
    rk->wbuf = kc_alloc(np), rk->gbuf = kc_alloc(np);
    rk->out = kc_alloc(rk->rows * dims.dim), rk->dx = kc_alloc(rk->rows * dims.dim);
    slice_layer(rk->wbuf, ref->wbuf, &ref->shard, &rk->shard);
    if (sp)
      check_sp_acts(rk, ref, degree);
  }
  for (int p = 0; p < degree; p++)
    pthread_create(&threads[p], NULL, tp_rank_main, &ranks[p]);
  for (int p = 0; p < degree; p++)
    pthread_join(threads[p], NULL);

  double worst = 0.0;
  long D = dims.dim;
  struct hxk_layer_params gref;
  hxk_layer_bind(&gref, ref->gbuf, &dims, &ref->shard);
  /* SP: each rank's norm gains' gradients hold its rows' part only */
  float *norm_sum = kc_alloc(2 * D);
  for (int p = 0; p < degree; p++) {
    struct hxk_layer_params g;
    hxk_layer_bind(&g, ranks[p].gbuf, &dims, &ranks[p].shard);
    long at = ranks[p].row0 * D, nrd = ranks[p].rows * D;
    worst = fmax(worst, kc_max_err(ranks[p].out, ref->out + at, nrd));
    worst = fmax(worst, kc_max_err(ranks[p].dx, ref->dx + at, nrd));
    for (long i = 0; i < D; i++)
      norm_sum[i] += g.attn_norm[i], norm_sum[D + i] += g.mlp_norm[i];
    if (!sp) {
      worst = fmax(worst, kc_max_err(g.attn_norm, gref.attn_norm, D));
      worst = fmax(worst, kc_max_err(g.mlp_norm, gref.mlp_norm, D));
    }
  }
  if (sp) {
    worst = fmax(worst, kc_max_err(norm_sum, gref.attn_norm, D));
    worst = fmax(worst, kc_max_err(norm_sum + D, gref.mlp_norm, D));
  }
  free(norm_sum);
  float *gathered = kc_alloc(np_full);
  gather_grads(gathered, &ref->shard, ranks, degree);
  memcpy(gathered, gref.attn_norm, (size_t)D * sizeof *gathered);
  memcpy(gathered + (gref.mlp_norm - ref->gbuf), gref.mlp_norm,
         (size_t)D * sizeof *gathered);
  worst = fmax(worst, kc_max_err(gathered, ref->gbuf, np_full));
  printf("  tp=%d%s%s: worst error %.2e\n", degree, sp ? " sp" : "",
         recompute ? " (recompute)" : "", worst);
  KC_CHECK(worst < 1e-5, "tp=%d%s differs from the unsplit layer by %.3g",
           degree, sp ? " sp" : "", worst);

  pthread_barrier_destroy(&grp.barrier);
  free(grp.sum), free(gathered);
  for (int p = 0; p < degree; p++)
    free(ranks[p].wbuf), free(ranks[p].gbuf), free(ranks[p].out),
        free(ranks[p].dx);
}

static void test_tp(struct reference *ref) {
  /* G = 3 query heads per kv head: both splits cut a group. */
  const int q2[] = {0, 2, 6}, f2[] = {0, 7, 20};
  const int q3[] = {0, 1, 4, 6}, f3[] = {0, 3, 12, 20};
  KC_CHECK(hxk_kv_owner_count(&dims, q2, 2, 0) == 2 &&
               hxk_kv_owner_count(&dims, q2, 2, 1) == 1,
           "kv owners of the 2-way split");
  KC_CHECK(hxk_kv_owner_count(&dims, q3, 3, 0) == 2 &&
               hxk_kv_owner_count(&dims, q3, 3, 1) == 2,
           "kv owners of the 3-way split");
  check_tp_split(ref, q2, f2, 2, false, false);
  check_tp_split(ref, q3, f3, 3, false, false);
  check_tp_split(ref, q3, f3, 3, true, false);
  /* Sequence parallelism: 14 token rows over 2, 3 (5+5+4) and 4 (4+4+3+3)
   * ranks, both recompute modes. */
  const int q4[] = {0, 1, 3, 5, 6}, f4[] = {0, 5, 9, 15, 20};
  check_tp_split(ref, q2, f2, 2, false, true);
  check_tp_split(ref, q3, f3, 3, false, true);
  check_tp_split(ref, q3, f3, 3, true, true);
  check_tp_split(ref, q4, f4, 4, false, true);
  check_tp_split(ref, q4, f4, 4, true, true);
}

int main(void) {
  /* The TP check calls BLAS from several threads at once. */
  openblas_set_num_threads(1);
  struct reference ref;
  make_reference(&ref);
  struct hxk_layer_ctx ctx = ctx_for(&ref.shard, ref.rope, ref.kv_of, false);
  run_layer(&ctx, &ref.w, ref.gbuf, ref.x, ref.dout, ref.out, ref.dx);
  test_composition(&ref);
  test_recompute(&ref);
  test_tp(&ref);
  free(ref.rope), free(ref.wbuf), free(ref.gbuf), free(ref.x), free(ref.dout);
  free(ref.out), free(ref.dx);
  return kc_finish("kernels_layer");
}
