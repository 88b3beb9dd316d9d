/* rtlib/seq's attention hook on real MPI ranks against the whole-sequence
 * kernels: `mpirun -np N test_rt_seq CASE` builds every rank's hx_rt_seq
 * table for the layout CASE names (CP only, HP only, CP x HP, ragged splits,
 * TP, a layout of hexic's own HexiSeq planner), runs the hook's forward and
 * backward on random q, k, v, dO of the whole sequence cut to the rank's
 * tokens and heads, and compares o, lse, dq, dk, dv with
 * hxk_attention_forward / _backward of the whole sequence on one process
 * (each rank checks its own rows and columns: together, everything).
 * `test_rt_seq refuse` (one rank) checks that broken tables are refused
 * with the reason; `test_rt_seq CASE stall R` has rank R stop answering;
 * `test_rt_seq CASE layer [recompute]` runs a whole decoder layer with the
 * hook against the whole-sequence layer.
 * Prints one line per rank and exits non-zero on any difference above 1e-5
 * relative to the tensor's largest entry. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "rtlib/rt_backend.h"
#include "rtlib/rt_init.h"
#include "rtlib/seq/rt_seq.h"
#ifdef HX_SEQ_TEST_CUDA
#include "rtlib/cuda/cuda_backend.h"
#endif

#define MAXU 8

/* A layout: units in ring order with their token ranges and their share of
 * every TP rank's query heads (offsets follow group order), world slots. */
struct spec {
  const char *name;
  int seq_len, heads, kv_heads, head_dim, tp, nseq;
  int nunits, ngroups;
  int group_size[MAXU];
  int nranges[MAXU];
  int64_t r[MAXU][4]; /* begin, end of up to two ranges */
  int nh[MAXU];       /* query heads of the TP share */
  int slot[MAXU];     /* unit u's device of TP rank t is world rank slot * tp + t */
};

/* One layout a few lines each (clang-format would give every field its own). */
/* clang-format off */
static const struct spec specs[] = {
    /* CP on two ranks: the ring's one neighbour is both the next and the
     * previous unit; one kv head (MQA). */
    {.name = "cp2", .seq_len = 33, .heads = 2, .kv_heads = 1, .head_dim = 8, .tp = 1, .nseq = 1,
     .nunits = 2, .ngroups = 2, .group_size = {1, 1}, .nranges = {2, 1},
     .r = {{0, 5, 20, 33}, {5, 20}}, .nh = {2, 2}, .slot = {1, 0}},
    /* CP only: four groups of one unit, uneven zig-zag chunks (the ring's
     * sendrecv path). */
    {.name = "cp4", .seq_len = 100, .heads = 4, .kv_heads = 2, .head_dim = 16, .tp = 1, .nseq = 1,
     .nunits = 4, .ngroups = 4, .group_size = {1, 1, 1, 1}, .nranges = {2, 2, 2, 1},
     .r = {{0, 7, 88, 100}, {7, 30, 70, 88}, {30, 41, 59, 70}, {41, 59}}, .nh = {4, 4, 4, 4},
     .slot = {0, 1, 2, 3}},
    /* HP only: one group, heads 1 / 3 / 2 of 6 (GQA 3:1, kv heads
     * replicated), world order unlike ring order, two sequences. */
    {.name = "hp3", .seq_len = 77, .heads = 6, .kv_heads = 2, .head_dim = 8, .tp = 1, .nseq = 2,
     .nunits = 3, .ngroups = 1, .group_size = {3}, .nranges = {1, 1, 1},
     .r = {{0, 20}, {20, 51}, {51, 77}}, .nh = {1, 3, 2}, .slot = {2, 0, 1}},
    /* USP: two groups of two, even split, MHA. */
    {.name = "usp", .seq_len = 64, .heads = 4, .kv_heads = 4, .head_dim = 16, .tp = 1, .nseq = 1,
     .nunits = 4, .ngroups = 2, .group_size = {2, 2}, .nranges = {2, 2, 2, 2},
     .r = {{0, 8, 56, 64}, {8, 16, 48, 56}, {16, 24, 40, 48}, {24, 32, 32, 40}},
     .nh = {2, 2, 2, 2}, .slot = {0, 1, 2, 3}},
    /* Ragged CP x HP: groups of 1, 3, 2 units splitting 8 heads (GQA 4:1)
     * as [8], [1, 4, 3], [5, 3]; ranges cut at odd places, one front only. */
    {.name = "ragged", .seq_len = 101, .heads = 8, .kv_heads = 2, .head_dim = 8, .tp = 1,
     .nseq = 1, .nunits = 6, .ngroups = 3, .group_size = {1, 3, 2}, .nranges = {2, 2, 1, 2, 2, 1},
     .r = {{0, 9, 90, 101}, {9, 10, 85, 90}, {10, 31}, {31, 40, 70, 85}, {40, 57, 62, 70},
           {57, 62}},
     .nh = {8, 1, 4, 3, 5, 3}, .slot = {5, 3, 1, 0, 2, 4}},
    /* hexic's planner: `hexic --strategy=hexiseq` of a 2-layer model
     * (hidden 64, heads 8, kv_heads 2, seq_len 192) on 3 + 2 + 1 CPU
     * devices of three speeds (cpu8.hx's figures): plan.json's cp_ring
     * [4, 5, 1, 2, 0, 3], hp_a2a groups [4, 5], [1, 2], [0, 3], devices'
     * seq and heads as below. */
    {.name = "planner", .seq_len = 192, .heads = 8, .kv_heads = 2, .head_dim = 8, .tp = 1,
     .nseq = 1, .nunits = 6, .ngroups = 3, .group_size = {2, 2, 2}, .nranges = {2, 2, 2, 2, 2, 2},
     .r = {{0, 11, 180, 192}, {11, 16, 177, 180}, {16, 38, 153, 177}, {38, 60, 129, 153},
           {60, 82, 105, 129}, {82, 93, 93, 105}},
     .nh = {5, 3, 4, 4, 5, 3}, .slot = {4, 5, 1, 2, 0, 3}},
    /* TP 2 inside units: each TP rank's ring and groups on its share of
     * 4 heads (2 kv heads), groups of 2 and 1 units. */
    {.name = "tp2", .seq_len = 90, .heads = 8, .kv_heads = 4, .head_dim = 8, .tp = 2, .nseq = 1,
     .nunits = 3, .ngroups = 2, .group_size = {2, 1}, .nranges = {2, 2, 1},
     .r = {{0, 10, 75, 90}, {10, 30, 60, 75}, {30, 60}}, .nh = {3, 1, 4}, .slot = {1, 2, 0}},
    /* Eight ranks: groups of 3, 1, 4 units of 12 heads (GQA 4:1), one-head
     * devices, units holding no tokens (one with heads), two sequences. */
    {.name = "gqa8", .seq_len = 120, .heads = 12, .kv_heads = 3, .head_dim = 8, .tp = 1,
     .nseq = 2, .nunits = 8, .ngroups = 3, .group_size = {3, 1, 4},
     .nranges = {2, 2, 0, 2, 2, 1, 2, 0},
     .r = {{0, 14, 110, 120}, {14, 20, 100, 110}, {0}, {20, 44, 80, 100}, {44, 50, 74, 80},
           {50, 61}, {61, 67, 67, 74}, {0}},
     .nh = {1, 6, 5, 12, 2, 3, 1, 6}, .slot = {7, 6, 5, 4, 3, 2, 1, 0}},
};
/* clang-format on */

static const struct spec *find_spec(const char *name) {
  for (size_t i = 0; i < sizeof specs / sizeof specs[0]; i++)
    if (!strcmp(specs[i].name, name))
      return &specs[i];
  return NULL;
}

/* ---- the tables ---- */

struct tables {
  struct hx_rt_seq seq;
  struct hx_rt_seq_unit units[MAXU];
  struct hx_rt_seq_group groups[MAXU];
  int64_t split[MAXU][MAXU * MAXU];
};

static int group_of(const struct spec *sp, int u) {
  for (int g = 0, first = 0; g < sp->ngroups; first += sp->group_size[g++])
    if (u < first + sp->group_size[g])
      return g;
  return -1;
}

/* The table of world rank `rank` (TP rank rank % tp). */
static void build_tables(const struct spec *sp, int rank, struct tables *tb) {
  int t = rank % sp->tp, share = sp->heads / sp->tp;
  memset(tb, 0, sizeof *tb);
  for (int g = 0, u = 0; g < sp->ngroups; g++) {
    struct hx_rt_seq_group *gr = &tb->groups[g];
    gr->first = u;
    gr->n = sp->group_size[g];
    int head = t * share;
    for (int x = 0; x < gr->n; x++, u++) {
      struct hx_rt_seq_unit *un = &tb->units[u];
      un->rank = sp->slot[u] * sp->tp + t;
      un->nranges = sp->nranges[u];
      for (int k = 0; k < un->nranges; k++)
        un->ranges[k] = (struct hx_rt_seq_range){sp->r[u][2 * k], sp->r[u][2 * k + 1]};
      un->head_begin = head;
      un->head_end = head += sp->nh[u];
      if (un->rank == rank)
        tb->seq.unit = u;
    }
  }
  for (int g = 0; g < sp->ngroups; g++) {
    struct hx_rt_seq_group *gr = &tb->groups[g];
    for (int x = 0; x < gr->n; x++)
      for (int y = 0; y < gr->n; y++) {
        const struct hx_rt_seq_unit *ux = &tb->units[gr->first + x],
                                    *uy = &tb->units[gr->first + y];
        int64_t tokens = 0;
        for (int k = 0; k < ux->nranges; k++)
          tokens += ux->ranges[k].end - ux->ranges[k].begin;
        tb->split[g][x * gr->n + y] = tokens * (uy->head_end - uy->head_begin);
      }
    gr->split_table = tb->split[g];
  }
  tb->seq.tp = sp->tp;
  tb->seq.tp_rank = t;
  tb->seq.nunits = sp->nunits;
  tb->seq.units = tb->units;
  tb->seq.ngroups = sp->ngroups;
  tb->seq.groups = tb->groups;
  tb->seq.group = group_of(sp, tb->seq.unit);
}

static struct hxk_dims dims_of(const struct spec *sp) {
  struct hxk_dims d = {0};
  d.heads = sp->heads;
  d.kv_heads = sp->kv_heads;
  d.dim = sp->heads * sp->head_dim;
  d.ffn = 4;
  d.vocab = 4;
  d.seq_len = sp->seq_len;
  d.layers = 1;
  d.norm_eps = 1e-5f;
  d.rope_theta = 10000;
  if (!hxk_dims_check(&d)) {
    fprintf(stderr, "test_rt_seq: bad dims in case %s\n", sp->name);
    exit(2);
  }
  return d;
}

/* ---- data ---- */

static uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

static float *random_floats(long n, uint64_t seed) {
  float *a = hx_rt_calloc((size_t)n, sizeof *a);
  for (long i = 0; i < n; i++)
    a[i] = (float)((double)(mix(seed * 0x100000001ULL + (uint64_t)i) >> 11) * 0x1p-53 * 2 - 1);
  return a;
}

/* The whole sequence's tensors and their reference attention. */
struct whole {
  long n;
  int wq, wkv; /* floats per token */
  float *q, *k, *v, *dout, *o, *lse, *dq, *dk, *dv;
};

static void reference(const struct spec *sp, const struct hxk_dims *d, struct whole *w) {
  int hd = d->head_dim;
  w->n = (long)sp->nseq * sp->seq_len;
  w->wq = sp->heads * hd;
  w->wkv = sp->kv_heads * hd;
  w->q = random_floats(w->n * w->wq, 1);
  w->k = random_floats(w->n * w->wkv, 2);
  w->v = random_floats(w->n * w->wkv, 3);
  w->dout = random_floats(w->n * w->wq, 4);
  w->o = hx_rt_calloc((size_t)(w->n * w->wq), sizeof(float));
  w->lse = hx_rt_calloc((size_t)(w->n * sp->heads), sizeof(float));
  w->dq = hx_rt_calloc((size_t)(w->n * w->wq), sizeof(float));
  w->dk = hx_rt_calloc((size_t)(w->n * w->wkv), sizeof(float));
  w->dv = hx_rt_calloc((size_t)(w->n * w->wkv), sizeof(float));
  int *kv_of = hx_rt_calloc((size_t)sp->heads, sizeof(int));
  for (int h = 0; h < sp->heads; h++)
    kv_of[h] = h / (sp->heads / sp->kv_heads);
  float *scratch = hx_rt_calloc((size_t)hxk_attention_scratch_floats(sp->seq_len), sizeof(float));
  hxk_attention_forward(w->o, w->lse, w->q, w->k, w->v, kv_of, sp->nseq, sp->seq_len, sp->heads,
                        sp->kv_heads, hd, scratch);
  hxk_attention_backward(w->dq, w->dk, w->dv, w->dout, w->q, w->k, w->v, w->lse, kv_of, sp->nseq,
                         sp->seq_len, sp->heads, sp->kv_heads, hd, scratch);
  free(scratch);
  free(kv_of);
}

/* The rows at pos (nseq sequences) and per-token columns [col0, col0 +
 * ncols) of a whole tensor of width floats per token. */
static float *cut(const float *whole, int width, int col0, int ncols, const int *pos, long local,
                  const struct spec *sp) {
  float *a = hx_rt_calloc((size_t)(sp->nseq * local * ncols) + 1, sizeof *a);
  for (int s = 0; s < sp->nseq; s++)
    for (long i = 0; i < local; i++)
      memcpy(a + (s * local + i) * ncols, whole + ((long)s * sp->seq_len + pos[i]) * width + col0,
             sizeof(float) * (size_t)ncols);
  return a;
}

/* max |got - want| over the tensor, relative to want's largest entry. */
static double rel_err(const float *got, const float *want, long n) {
  double diff = 0, peak = 0;
  for (long i = 0; i < n; i++) {
    diff = fmax(diff, fabs((double)got[i] - want[i]));
    peak = fmax(peak, fabs((double)want[i]));
  }
  return peak > 0 ? diff / peak : diff;
}

/* ---- one rank of a case ---- */

/* `test_rt_seq CASE stall R`: world rank R stops answering (its watchdog
 * off) where the hook would start; the others' waits must trace the stall to
 * R and end the job (rtlib.seq.stall). */
static void maybe_stall(int stalled) {
  if (hx_rt_rank() != stalled)
    return;
  fprintf(stderr, "test_rt_seq: rank %d stops answering\n", stalled);
  hx_rt_watchdog_stop();
  sleep(120);
  exit(0);
}

static int run_case(const struct spec *sp, int stalled) {
  int rank = hx_rt_rank();
  if (hx_rt_world_size() != sp->nunits * sp->tp) {
    fprintf(stderr, "test_rt_seq: case %s needs %d ranks\n", sp->name, sp->nunits * sp->tp);
    return 2;
  }
  struct hxk_dims d = dims_of(sp);
  struct tables tb;
  build_tables(sp, rank, &tb);
  const char *bad = rt_seq_check(&tb.seq, &d, rank);
  if (bad) {
    fprintf(stderr, "test_rt_seq: case %s: table refused: %s\n", sp->name, bad);
    return 1;
  }
  int tp_group[1] = {rank};
  struct hx_rt_rank_config cfg = {0};
  cfg.rank = rank;
  cfg.world_size = hx_rt_world_size();
  cfg.tp = 1;
  cfg.tp_group = tp_group;
  const struct rt_transport *t = rt_transport_open(&cfg, NULL);
  struct rt_seq *s = rt_seq_open(&tb.seq, &d, t);
#ifdef HX_SEQ_TEST_CUDA
  /* test_rt_seq_emu: the CUDA backend's kernel table on the host emulator
   * (its device memory is host memory), tests/gpu/tests.cmake */
  rt_seq_use_kernels(s, rt_cuda_seq_kernels(rt_cuda_stream()));
#endif
  const struct hxk_attention_hook *hook = rt_seq_attention_hook(s);

  struct whole w;
  reference(sp, &d, &w);
  long local = rt_seq_local_tokens(&tb.seq), n = sp->nseq * local;
  int *pos = hx_rt_calloc((size_t)local + 1, sizeof(int));
  rt_seq_positions(&tb.seq, pos);
  int hd = d.head_dim, hs = sp->heads / sp->tp, ks = sp->kv_heads / sp->tp, tr = tb.seq.tp_rank;
  float *q = cut(w.q, w.wq, tr * hs * hd, hs * hd, pos, local, sp);
  float *k = cut(w.k, w.wkv, tr * ks * hd, ks * hd, pos, local, sp);
  float *v = cut(w.v, w.wkv, tr * ks * hd, ks * hd, pos, local, sp);
  float *dout = cut(w.dout, w.wq, tr * hs * hd, hs * hd, pos, local, sp);
  float *o_want = cut(w.o, w.wq, tr * hs * hd, hs * hd, pos, local, sp);
  float *lse_want = cut(w.lse, sp->heads, tr * hs, hs, pos, local, sp);
  float *dq_want = cut(w.dq, w.wq, tr * hs * hd, hs * hd, pos, local, sp);
  float *dk_want = cut(w.dk, w.wkv, tr * ks * hd, ks * hd, pos, local, sp);
  float *dv_want = cut(w.dv, w.wkv, tr * ks * hd, ks * hd, pos, local, sp);

  float *o = hx_rt_calloc((size_t)(n * hs * hd) + 1, sizeof(float));
  float *saved = hx_rt_calloc((size_t)hook->saved_floats(sp->nseq, hook->arg) + 1, sizeof(float));
  float *scratch =
      hx_rt_calloc((size_t)hook->scratch_floats(sp->nseq, hook->arg) + 1, sizeof(float));
  float *dq = hx_rt_calloc((size_t)(n * hs * hd) + 1, sizeof(float));
  float *dk = hx_rt_calloc((size_t)(n * ks * hd) + 1, sizeof(float));
  float *dv = hx_rt_calloc((size_t)(n * ks * hd) + 1, sizeof(float));
  maybe_stall(stalled);
  hook->forward(o, q, k, v, sp->nseq, saved, scratch, hook->arg);
  hook->backward(dq, dk, dv, dout, q, k, v, o, saved, sp->nseq, scratch, hook->arg);

  double err[5] = {rel_err(o, o_want, n * hs * hd), rel_err(saved, lse_want, n * hs),
                   rel_err(dq, dq_want, n * hs * hd), rel_err(dk, dk_want, n * ks * hd),
                   rel_err(dv, dv_want, n * ks * hd)};
  const char *names[5] = {"o", "lse", "dq", "dk", "dv"};
  int fails = 0;
  for (int i = 0; i < 5; i++)
    fails += !(err[i] <= 1e-5);
  /* Again on a scratch full of garbage: the same bits (nothing depends on
   * message timing or on what the scratch held). */
  long sizes[5] = {n * hs * hd, n * hs, n * hs * hd, n * ks * hd, n * ks * hd};
  float *first[5] = {o, saved, dq, dk, dv}, *again[5];
  for (int i = 0; i < 5; i++)
    again[i] = hx_rt_calloc((size_t)sizes[i] + 1, sizeof(float));
  memset(scratch, 0xff, sizeof(float) * (size_t)hook->scratch_floats(sp->nseq, hook->arg));
  hook->forward(again[0], q, k, v, sp->nseq, again[1], scratch, hook->arg);
  hook->backward(again[2], again[3], again[4], dout, q, k, v, again[0], again[1], sp->nseq, scratch,
                 hook->arg);
  for (int i = 0; i < 5; i++) {
    if (memcmp(first[i], again[i], sizeof(float) * (size_t)sizes[i])) {
      printf("%s: rank %d: %s differs between two runs\n", sp->name, rank, names[i]);
      fails++;
    }
    free(again[i]);
  }
  printf("%s: rank %d (unit %d, group %d, %ld tokens, heads [%d, %d)): o %.1e lse %.1e dq %.1e dk "
         "%.1e dv %.1e%s\n",
         sp->name, rank, tb.seq.unit, tb.seq.group, local, tb.units[tb.seq.unit].head_begin,
         tb.units[tb.seq.unit].head_end, err[0], err[1], err[2], err[3], err[4],
         fails ? "  FAIL" : "");
  for (int i = 0; i < 5 && fails; i++)
    if (!(err[i] <= 1e-5))
      printf("%s: rank %d: %s differs from the whole-sequence kernel by %.3e (relative)\n",
             sp->name, rank, names[i], err[i]);
  rt_seq_close(s);
  float *bufs[] = {q,       k,   v,      dout,    o_want, lse_want, dq_want, dk_want,
                   dv_want, o,   saved,  scratch, dq,     dk,       dv,      w.q,
                   w.k,     w.v, w.dout, w.o,     w.lse,  w.dq,     w.dk,    w.dv};
  for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
    free(bufs[i]);
  free(pos);
  int all = 0;
  MPI_Allreduce(&fails, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  return all ? 1 : 0;
}

/* ---- a whole decoder layer with the hook ---- */

static float *random_weights(long n, uint64_t seed, float scale) {
  float *a = random_floats(n, seed);
  for (long i = 0; i < n; i++)
    a[i] *= scale;
  return a;
}

/* One layer's forward and backward: out and dx [n, D] and the weight
 * gradients, of x and dout [n, D] (n = nseq * local_len). */
struct layer_run {
  float *out, *dx, *g;
};

static struct layer_run run_layer(const struct hxk_layer_ctx *ctx, float *wbuf, long np,
                                  const float *x, const float *dout, long n, long nseq) {
  const struct hxk_dims *d = ctx->dims;
  struct layer_run r = {hx_rt_calloc((size_t)(n * d->dim) + 1, sizeof(float)),
                        hx_rt_calloc((size_t)(n * d->dim) + 1, sizeof(float)),
                        hx_rt_calloc((size_t)np, sizeof(float))};
  struct hxk_layer_params w, g;
  hxk_layer_bind(&w, wbuf, d, ctx->shard);
  hxk_layer_bind(&g, r.g, d, ctx->shard);
  float *acts = hx_rt_calloc((size_t)hxk_layer_acts_floats(ctx, nseq), sizeof(float));
  float *scratch = hx_rt_calloc((size_t)hxk_layer_scratch_floats(ctx, nseq), sizeof(float));
  hxk_layer_forward(ctx, &w, x, r.out, acts, scratch, nseq);
  hxk_layer_backward(ctx, &w, &g, dout, r.dx, acts, scratch, nseq);
  free(acts);
  free(scratch);
  return r;
}

/* `test_rt_seq CASE layer [recompute]` (TP 1 layouts): the decoder layer
 * with the hook and the rank's positions against the whole-sequence layer:
 * out and dx of the rank's tokens, and the weight gradients summed over
 * every unit (what the gradient sync of CP/HP replicas does). */
static int run_layer_case(const struct spec *sp, bool recompute) {
  int rank = hx_rt_rank();
  if (sp->tp != 1 || hx_rt_world_size() != sp->nunits)
    return 2;
  struct hxk_dims d = dims_of(sp);
  d.ffn = 24;
  struct tables tb;
  build_tables(sp, rank, &tb);
  struct hx_rt_rank_config cfg = {0};
  cfg.rank = rank;
  cfg.world_size = sp->nunits;
  cfg.tp = 1;
  cfg.tp_group = &rank;
  struct rt_seq *s = rt_seq_open(&tb.seq, &d, rt_transport_open(&cfg, NULL));

  struct hxk_shard shard;
  hxk_shard_make(&d, 0, d.heads, 0, d.ffn, &shard);
  int *kv_of = hx_rt_calloc((size_t)d.heads, sizeof(int));
  hxk_kv_map(kv_of, &d, &shard);
  float *rope = hx_rt_calloc((size_t)hxk_rope_table_floats(&d), sizeof(float));
  hxk_rope_table(rope, &d);
  long np = hxk_layer_floats(&d, &shard), T = sp->seq_len, D = d.dim;
  float *wbuf = random_weights(np, 11, 0.3f), *x = random_floats(sp->nseq * T * D, 12);
  float *dout = random_floats(sp->nseq * T * D, 13);
  struct hxk_layer_ctx whole = {
      .dims = &d, .shard = &shard, .rope = rope, .kv_of = kv_of, .recompute = recompute};
  struct layer_run ref = run_layer(&whole, wbuf, np, x, dout, sp->nseq * T, sp->nseq);

  long local = rt_seq_local_tokens(&tb.seq), n = sp->nseq * local;
  int *pos = hx_rt_calloc((size_t)local + 1, sizeof(int));
  rt_seq_positions(&tb.seq, pos);
  struct hxk_layer_ctx ctx = whole;
  ctx.positions = pos;
  ctx.local_len = local;
  ctx.attention = rt_seq_attention_hook(s);
  float *x_local = cut(x, (int)D, 0, (int)D, pos, local, sp);
  float *dout_local = cut(dout, (int)D, 0, (int)D, pos, local, sp);
  struct layer_run got = run_layer(&ctx, wbuf, np, x_local, dout_local, n, sp->nseq);
  MPI_Allreduce(MPI_IN_PLACE, got.g, (int)np, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  float *out_want = cut(ref.out, (int)D, 0, (int)D, pos, local, sp);
  float *dx_want = cut(ref.dx, (int)D, 0, (int)D, pos, local, sp);
  double err[3] = {rel_err(got.out, out_want, n * D), rel_err(got.dx, dx_want, n * D),
                   rel_err(got.g, ref.g, np)};
  int fails = 0;
  for (int i = 0; i < 3; i++)
    fails += !(err[i] <= 1e-5);
  printf("%s layer%s: rank %d (%ld tokens): out %.1e dx %.1e weight gradients %.1e%s\n", sp->name,
         recompute ? " (recompute)" : "", rank, local, err[0], err[1], err[2],
         fails ? "  FAIL" : "");
  rt_seq_close(s);
  float *bufs[] = {rope,    wbuf,       x,       dout,   ref.out, ref.dx,   ref.g,
                   x_local, dout_local, got.out, got.dx, got.g,   out_want, dx_want};
  for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
    free(bufs[i]);
  free(kv_of);
  free(pos);
  int all = 0;
  MPI_Allreduce(&fails, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  return all ? 1 : 0;
}

/* ---- broken tables ---- */

static int expect_refused(struct tables *tb, const struct hxk_dims *d, int rank, const char *want,
                          const char *what) {
  const char *got = rt_seq_check(&tb->seq, d, rank);
  if (got && strstr(got, want)) {
    printf("refuse: %s: %s\n", what, got);
    return 0;
  }
  printf("refuse: %s: FAIL: got '%s', want '%s'\n", what, got ? got : "(accepted)", want);
  return 1;
}

static int run_refuse(void) {
  const struct spec *sp = find_spec("planner");
  struct hxk_dims d = dims_of(sp);
  struct tables tb;
  int fails = 0, rank = sp->slot[0]; /* the table of unit 0 (rank 4) */
  build_tables(sp, rank, &tb);
  fails += rt_seq_check(&tb.seq, &d, rank) != NULL;
  tb.units[3].nranges = 1; /* [129, 153) dropped */
  fails += expect_refused(&tb, &d, rank, "tokens [129, 153) are held by no unit", "range dropped");
  build_tables(sp, rank, &tb);
  tb.units[2].ranges[1] = (struct hx_rt_seq_range){150, 177}; /* overlaps [129, 153) */
  fails += expect_refused(&tb, &d, rank, "tokens from 150 on are held twice", "range duplicated");
  build_tables(sp, rank, &tb);
  tb.units[1].head_begin = 4; /* heads [4, 8) next to [0, 5): head 4 twice */
  fails += expect_refused(&tb, &d, rank, "held twice in group 0", "head given twice");
  build_tables(sp, rank, &tb);
  tb.split[1][1] = 89;
  fails += expect_refused(&tb, &d, rank, "group 1's split table [0][1] is not 184", "split table");
  build_tables(sp, rank, &tb);
  tb.groups[1].n = 1;
  fails += expect_refused(&tb, &d, rank, "group 2 is not the next run", "groups");
  build_tables(sp, rank, &tb);
  fails += expect_refused(&tb, &d, 3, "this rank (3) is not unit 0", "another rank's table");
  return fails ? 1 : 0;
}

int main(int argc, char **argv) {
  hx_rt_init(&argc, &argv);
  int rc;
  if (argc == 2 && !strcmp(argv[1], "refuse")) {
    rc = run_refuse();
  } else if (argc == 2 && find_spec(argv[1])) {
    rc = run_case(find_spec(argv[1]), -1);
  } else if (argc >= 3 && argc <= 4 && find_spec(argv[1]) && !strcmp(argv[2], "layer")) {
    rc = run_layer_case(find_spec(argv[1]), argc == 4 && !strcmp(argv[3], "recompute"));
  } else if (argc == 4 && find_spec(argv[1]) && !strcmp(argv[2], "stall")) {
    rc = run_case(find_spec(argv[1]), atoi(argv[3]));
  } else {
    fprintf(stderr, "usage: test_rt_seq CASE [stall RANK | layer [recompute]] | refuse\n");
    rc = 2;
  }
  fflush(stdout);
  hx_rt_finalize();
  return rc;
}
