/* The decoder layer with token positions and an attention hook (issue 14:
 * context parallelism), against the plain layer on whole sequences:
 *  1. the local hook (hxk_attention_hook_local), and identity positions
 *     without a hook, give the plain layer's output, input gradient and
 *     weight gradients within 1e-5 (relative to max(1, |ref|)), recompute
 *     off and on; with the same hook, recompute is bit-identical;
 *  2. a 2-device ring in one process: two threads each run the layer on
 *     their own tokens of every sequence (zig-zag, uneven: the two ends vs
 *     the middle) at their global positions, with a hook that merges the
 *     peer's K/V block and sends the peer its dK/dV; their rows of out and
 *     dx, and the sum of their weight gradients, equal the full layer's
 *     within 1e-5, recompute off and on;
 *  3. a long sequence (T = 1024) given positions 0..T-1: the layer attends
 *     through the tiled kernel (its scratch holds nothing of T x T) and
 *     agrees within 1e-5 with the same layer without positions (today's
 *     whole-head kernel). */
/* pthread barriers are POSIX, outside strict C11 */
#define _POSIX_C_SOURCE 200809L
#include <cblas.h>
#include <pthread.h>

#include "kcheck.h"
#include "kernels/cpu/llama.h"

enum { NSEQ = 2, NDEV = 2 };

struct model {
  struct hxk_dims dims;
  struct hxk_shard shard;
  float *rope;
  int kv_of[16];
  float *wbuf;
  struct hxk_layer_params w;
  long np;
};

static void make_model(struct model *m, struct hxk_dims d) {
  m->dims = d;
  KC_CHECK(hxk_dims_check(&m->dims), "dims");
  KC_CHECK(hxk_shard_make(&m->dims, 0, d.heads, 0, d.ffn, &m->shard), "shard");
  m->rope = kc_alloc(hxk_rope_table_floats(&m->dims));
  hxk_rope_table(m->rope, &m->dims);
  hxk_kv_map(m->kv_of, &m->dims, &m->shard);
  m->np = hxk_layer_floats(&m->dims, &m->shard);
  m->wbuf = kc_alloc(m->np);
  hxk_layer_bind(&m->w, m->wbuf, &m->dims, &m->shard);
  kc_fill(m->wbuf, m->np, 0.3f);
  for (int i = 0; i < d.dim; i++) {
    m->w.attn_norm[i] = 1.0f + kc_uniform(0.3f);
    m->w.mlp_norm[i] = 1.0f + kc_uniform(0.3f);
  }
}

static struct hxk_layer_ctx ctx_for(const struct model *m, bool recompute) {
  struct hxk_layer_ctx ctx = {.dims = &m->dims, .shard = &m->shard,
                              .rope = m->rope, .kv_of = m->kv_of,
                              .recompute = recompute};
  return ctx;
}

/* Results of one layer run: out and dx [n, D], gradients [np]. */
struct run {
  float *out, *dx, *gbuf;
};

static struct run run_alloc(long n, const struct model *m) {
  struct run r = {kc_alloc(n * m->dims.dim), kc_alloc(n * m->dims.dim),
                  kc_alloc(m->np)};
  return r;
}

static void run_free(struct run *r) { free(r->out), free(r->dx), free(r->gbuf); }

static void run_layer(const struct hxk_layer_ctx *ctx, const struct model *m,
                      const float *x, const float *dout, struct run *r,
                      long nseq) {
  struct hxk_layer_params g;
  hxk_layer_bind(&g, r->gbuf, &m->dims, &m->shard);
  float *acts = kc_alloc(hxk_layer_acts_floats(ctx, nseq));
  float *scratch = kc_alloc(hxk_layer_scratch_floats(ctx, nseq));
  hxk_layer_forward(ctx, &m->w, x, r->out, acts, scratch, nseq);
  hxk_layer_backward(ctx, &m->w, &g, dout, r->dx, acts, scratch, nseq);
  free(acts), free(scratch);
}

static double run_err(const struct run *a, const struct run *ref, long nact,
                      long np) {
  double e = kc_max_err(a->out, ref->out, nact);
  e = fmax(e, kc_max_err(a->dx, ref->dx, nact));
  return fmax(e, kc_max_err(a->gbuf, ref->gbuf, np));
}

static bool run_same(const struct run *a, const struct run *b, long nact,
                     long np) {
  return memcmp(a->out, b->out, (size_t)nact * sizeof(float)) == 0 &&
         memcmp(a->dx, b->dx, (size_t)nact * sizeof(float)) == 0 &&
         memcmp(a->gbuf, b->gbuf, (size_t)np * sizeof(float)) == 0;
}

/* ---- 1. local hook and identity positions -------------------------------- */

static struct model small;
static float *x_full, *dout_full;
static struct run ref_full; /* the plain layer on whole sequences */

static long small_nact(void) { return NSEQ * (long)small.dims.seq_len * small.dims.dim; }

static void test_local(void) {
  const struct hxk_dims *d = &small.dims;
  int T = d->seq_len, ident[64];
  for (int i = 0; i < T; i++)
    ident[i] = i;
  struct hxk_attention_local local = {NULL, T, small.kv_of, d->heads,
                                      d->kv_heads, d->head_dim};
  struct hxk_attention_hook hook;
  hxk_attention_hook_local(&hook, &local);
  struct run with_hook[2];
  for (int rc = 0; rc < 2; rc++) {
    struct hxk_layer_ctx ctx = ctx_for(&small, rc);
    ctx.attention = &hook;
    with_hook[rc] = run_alloc(NSEQ * (long)T, &small);
    run_layer(&ctx, &small, x_full, dout_full, &with_hook[rc], NSEQ);
    double e = run_err(&with_hook[rc], &ref_full, small_nact(), small.np);
    printf("  local hook%s: %.2e\n", rc ? " (recompute)" : "", e);
    KC_CHECK(e < 1e-5, "local hook%s differs by %.3g", rc ? ", recompute" : "",
             e);

    struct hxk_layer_ctx pctx = ctx_for(&small, rc);
    pctx.positions = ident;
    pctx.local_len = T;
    struct run by_pos = run_alloc(NSEQ * (long)T, &small);
    run_layer(&pctx, &small, x_full, dout_full, &by_pos, NSEQ);
    e = run_err(&by_pos, &ref_full, small_nact(), small.np);
    printf("  identity positions%s: %.2e\n", rc ? " (recompute)" : "", e);
    KC_CHECK(e < 1e-5, "identity positions%s differ by %.3g",
             rc ? ", recompute" : "", e);
    run_free(&by_pos);
  }
  KC_CHECK(run_same(&with_hook[0], &with_hook[1], small_nact(), small.np),
           "the hook's recompute is not bit-identical");
  run_free(&with_hook[0]), run_free(&with_hook[1]);
}

/* ---- 2. a 2-device ring, one thread per device --------------------------- */

struct ring {
  pthread_barrier_t barrier;
  const float *k[NDEV], *v[NDEV];
  float *dk_peer[NDEV], *dv_peer[NDEV]; /* written by d: grads of the peer's keys */
};

struct ring_dev {
  struct ring *ring;
  int rank;
  int npos;
  int pos[64];
  const struct ring_dev *peer;
  int nq, nkv, hd;
  const int *kv_of;
  bool recompute;
  float *x, *dout; /* gathered rows */
  struct run res;
};

static long ring_saved_floats(long nseq, void *arg) {
  const struct ring_dev *me = arg;
  return nseq * me->npos * me->nq; /* lse */
}

static long block_scratch(const struct ring_dev *me) {
  return hxk_attention_block_scratch_floats(me->npos, me->peer->npos, me->nq,
                                            me->hd);
}

static long ring_scratch_floats(long nseq, void *arg) {
  const struct ring_dev *me = arg;
  return block_scratch(me) + nseq * me->npos * me->nq; /* + delta */
}

/* Merges the own block and the peer's, rank 0 own first, rank 1 peer first
 * (the state may merge blocks in any order). */
static void ring_forward(float *o, const float *q, const float *k,
                         const float *v, long nseq, float *saved,
                         float *scratch, void *arg) {
  struct ring_dev *me = arg;
  struct ring *r = me->ring;
  const struct ring_dev *peer = me->peer;
  r->k[me->rank] = k, r->v[me->rank] = v;
  pthread_barrier_wait(&r->barrier);
  for (int hop = 0; hop < NDEV; hop++) {
    bool own = (hop == 0) == (me->rank == 0);
    const struct ring_dev *src = own ? me : peer;
    hxk_attention_block_forward(o, saved, q, me->pos, me->npos,
                                r->k[src->rank], r->v[src->rank], src->pos,
                                src->npos, me->kv_of, nseq, me->nq, me->nkv,
                                me->hd, hop == 0, scratch);
  }
  pthread_barrier_wait(&r->barrier); /* the peer is done reading k, v */
}

static void ring_backward(float *dq, float *dk, float *dv, const float *dout,
                          const float *q, const float *k, const float *v,
                          const float *o, const float *saved, long nseq,
                          float *scratch, void *arg) {
  struct ring_dev *me = arg;
  struct ring *r = me->ring;
  const struct ring_dev *peer = me->peer;
  long peer_kv = nseq * peer->npos * me->nkv * me->hd;
  float *delta = scratch + block_scratch(me);
  hxk_attention_block_delta(delta, dout, o, nseq * me->npos, me->nq, me->hd);
  r->k[me->rank] = k, r->v[me->rank] = v;
  memset(r->dk_peer[me->rank], 0, (size_t)peer_kv * sizeof(float));
  memset(r->dv_peer[me->rank], 0, (size_t)peer_kv * sizeof(float));
  pthread_barrier_wait(&r->barrier);
  hxk_attention_block_backward(dq, dk, dv, dout, q, me->pos, me->npos, k, v,
                               me->pos, me->npos, saved, delta, me->kv_of, nseq,
                               me->nq, me->nkv, me->hd, scratch);
  hxk_attention_block_backward(dq, r->dk_peer[me->rank], r->dv_peer[me->rank],
                               dout, q, me->pos, me->npos, r->k[peer->rank],
                               r->v[peer->rank], peer->pos, peer->npos, saved,
                               delta, me->kv_of, nseq, me->nq, me->nkv, me->hd,
                               scratch);
  pthread_barrier_wait(&r->barrier); /* the peer's dK/dV of my keys are in */
  long my_kv = nseq * me->npos * me->nkv * me->hd;
  for (long i = 0; i < my_kv; i++) {
    dk[i] += r->dk_peer[peer->rank][i];
    dv[i] += r->dv_peer[peer->rank][i];
  }
  pthread_barrier_wait(&r->barrier); /* before the buffers are reused */
}

static void *ring_main(void *arg) {
  struct ring_dev *me = arg;
  struct hxk_attention_hook hook = {ring_saved_floats, ring_scratch_floats,
                                    ring_forward, ring_backward, me};
  struct hxk_layer_ctx ctx = ctx_for(&small, me->recompute);
  ctx.positions = me->pos;
  ctx.local_len = me->npos;
  ctx.attention = &hook;
  run_layer(&ctx, &small, me->x, me->dout, &me->res, NSEQ);
  return NULL;
}

static void gather_rows(float *dst, const float *full, const int *pos,
                        int npos, int T, int w) {
  for (int s = 0; s < NSEQ; s++)
    for (int i = 0; i < npos; i++)
      memcpy(dst + ((long)s * npos + i) * w, full + ((long)s * T + pos[i]) * w,
             (size_t)w * sizeof *dst);
}

static void test_ring(bool recompute) {
  const struct hxk_dims *d = &small.dims;
  int T = d->seq_len, D = d->dim;
  struct ring ring;
  struct ring_dev devs[NDEV];
  pthread_barrier_init(&ring.barrier, NULL, NDEV);
  memset(devs, 0, sizeof devs);
  /* device 0: the two ends (4 + 3 tokens), device 1: the middle */
  for (int p = 0; p < T; p++) {
    struct ring_dev *dv = &devs[(p < 4 || p >= T - 3) ? 0 : 1];
    dv->pos[dv->npos++] = p;
  }
  for (int r = 0; r < NDEV; r++) {
    struct ring_dev *me = &devs[r];
    me->ring = &ring, me->rank = r, me->peer = &devs[1 - r];
    me->nq = d->heads, me->nkv = d->kv_heads, me->hd = d->head_dim;
    me->kv_of = small.kv_of, me->recompute = recompute;
    long n = NSEQ * (long)me->npos;
    me->x = kc_alloc(n * D), me->dout = kc_alloc(n * D);
    gather_rows(me->x, x_full, me->pos, me->npos, T, D);
    gather_rows(me->dout, dout_full, me->pos, me->npos, T, D);
    me->res = run_alloc(n, &small);
  }
  for (int r = 0; r < NDEV; r++) {
    long peer_kv = NSEQ * (long)devs[1 - r].npos * d->kv_heads * d->head_dim;
    ring.dk_peer[r] = kc_alloc(peer_kv), ring.dv_peer[r] = kc_alloc(peer_kv);
  }
  pthread_t threads[NDEV];
  for (int r = 0; r < NDEV; r++)
    pthread_create(&threads[r], NULL, ring_main, &devs[r]);
  for (int r = 0; r < NDEV; r++)
    pthread_join(threads[r], NULL);

  double worst = 0.0;
  float *grads = kc_alloc(small.np);
  for (int r = 0; r < NDEV; r++) {
    struct ring_dev *me = &devs[r];
    long nrow = NSEQ * (long)me->npos * D;
    float *want = kc_alloc(nrow);
    gather_rows(want, ref_full.out, me->pos, me->npos, T, D);
    worst = fmax(worst, kc_max_err(me->res.out, want, nrow));
    gather_rows(want, ref_full.dx, me->pos, me->npos, T, D);
    worst = fmax(worst, kc_max_err(me->res.dx, want, nrow));
    for (long i = 0; i < small.np; i++)
      grads[i] += me->res.gbuf[i];
    free(want);
  }
  worst = fmax(worst, kc_max_err(grads, ref_full.gbuf, small.np));
  printf("  2-device ring%s: worst error %.2e\n",
         recompute ? " (recompute)" : "", worst);
  KC_CHECK(worst < 1e-5, "the ring%s differs from the full layer by %.3g",
           recompute ? " (recompute)" : "", worst);
  pthread_barrier_destroy(&ring.barrier);
  free(grads);
  for (int r = 0; r < NDEV; r++) {
    free(devs[r].x), free(devs[r].dout), run_free(&devs[r].res);
    free(ring.dk_peer[r]), free(ring.dv_peer[r]);
  }
}

/* ---- 3. long sequences: the tiled path ----------------------------------- */

static void test_long(void) {
  struct model big;
  make_model(&big, (struct hxk_dims){.dim = 16, .ffn = 16, .heads = 2,
                                     .kv_heads = 1, .vocab = 8,
                                     .seq_len = 1024, .layers = 2,
                                     .norm_eps = 1e-5f, .rope_theta = 10000.0});
  long T = big.dims.seq_len, nact = T * big.dims.dim;
  float *x = kc_alloc(nact), *dout = kc_alloc(nact);
  kc_fill(x, nact, 1.0f), kc_fill(dout, nact, 1.0f);
  int *ident = malloc((size_t)T * sizeof *ident);
  for (int i = 0; i < T; i++)
    ident[i] = i;
  /* positions given (here 0..T-1): the tiled kernel; none: today's kernel */
  struct hxk_layer_ctx tiled = ctx_for(&big, false), plain = tiled;
  tiled.positions = ident;
  tiled.local_len = T;
  long scratch = hxk_layer_scratch_floats(&tiled, 1);
  KC_CHECK(scratch < T * T, "layer scratch %ld floats at T = %ld", scratch, T);
  struct run a = run_alloc(T, &big), b = run_alloc(T, &big);
  run_layer(&tiled, &big, x, dout, &a, 1);
  run_layer(&plain, &big, x, dout, &b, 1);
  double e_out = kc_max_err(a.out, b.out, nact);
  double e_dx = kc_max_err(a.dx, b.dx, nact);
  double e_g = kc_max_err(a.gbuf, b.gbuf, big.np);
  printf("  T=%ld tiled vs whole-head attention: out %.2e dx %.2e grads %.2e "
         "(scratch %ld floats, plain %ld)\n",
         T, e_out, e_dx, e_g, scratch, hxk_layer_scratch_floats(&plain, 1));
  KC_CHECK(e_out < 1e-5 && e_dx < 1e-5 && e_g < 1e-5,
           "tiled layer differs: out %.3g dx %.3g grads %.3g", e_out, e_dx,
           e_g);
  free(ident);
  run_free(&a), run_free(&b);
  free(x), free(dout), free(big.rope), free(big.wbuf);
}

int main(void) {
  /* the ring calls BLAS from two threads at once */
  openblas_set_num_threads(1);
  make_model(&small, (struct hxk_dims){.dim = 24, .ffn = 20, .heads = 6,
                                       .kv_heads = 2, .vocab = 8,
                                       .seq_len = 13, .layers = 2,
                                       .norm_eps = 1e-5f, .rope_theta = 500.0});
  long nact = small_nact();
  x_full = kc_alloc(nact), dout_full = kc_alloc(nact);
  kc_fill(x_full, nact, 1.0f), kc_fill(dout_full, nact, 1.0f);
  ref_full = run_alloc(NSEQ * (long)small.dims.seq_len, &small);
  struct hxk_layer_ctx ctx = ctx_for(&small, false);
  run_layer(&ctx, &small, x_full, dout_full, &ref_full, NSEQ);
  test_local();
  test_ring(false);
  test_ring(true);
  test_long();
  run_free(&ref_full);
  free(x_full), free(dout_full), free(small.rope), free(small.wbuf);
  return kc_finish("kernels_layer_seq");
}
