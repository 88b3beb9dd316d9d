/* hexic-profile: measures the machine it runs on and writes a cluster .hx
 * that hexic reads, so that a plan is priced with measured figures instead
 * of guesses:
 *   - sgemm throughput through OpenBLAS at the shapes one decoder layer of a
 *     model (hidden, ffn) multiplies, on one thread: the generated programs'
 *     launch.sh sets OPENBLAS_NUM_THREADS=1 (one rank = one core);
 *   - the forward and, apart, the backward of a stack of decoder layers
 *     through kernels/cpu/ (what the programs run), counted with
 *     model-stats' FLOPs (the backward 2x the forward's): each one's rate
 *     over the sgemm rate is the efficiency and the backward_efficiency;
 *     and the LM head's forward + backward (--vocab), run between them as
 *     the last stage's forward op runs it: head_efficiency;
 *   - memory bandwidth, with a streaming triad a[i] = b[i] + s * c[i], and
 *     the runtime's optimizer step (the gradient norm, clipping, AdamW
 *     through kernels/cpu) on the stack's parameters, as the bytes hexic
 *     prices it by over its time: the gpu block's mem_bandwidth; and a copy
 *     of those parameters there and back from memory (the caches written
 *     over first), ZeRO-1's weight pack and unpack: its copy_bandwidth;
 *   - under mpirun with 2 or more ranks, the MPI ping-pong latency (8-byte
 *     messages, half a round trip) and bandwidth (large messages) between
 *     ranks 0 and 1, which fill the node's and the network's figures;
 *   - the TP efficiency curve (issue 18): the same GEMMs at the shapes one
 *     rank of a TP group of degree 2, 4, 8 multiplies (Megatron's column-
 *     and row-parallel shards), each degree's rate over degree 1's;
 *   - with --profile, a measured profile per TP degree: one rank's shard of
 *     the layer, forward and backward timed apart through kernels/cpu/ at
 *     each --micro-batches size (a stack of --layers, as the efficiency),
 *     and the activations it keeps.
 * The GPU block's tflops is the sgemm throughput and efficiency the layer's
 * fraction of it, so tflops x efficiency is what training reaches. Compute is
 * timed in the thread's CPU seconds, the fewest of repeated runs, as
 * --emulate takes an op's reference (rtlib/rt_emulate.c): a figure then
 * leaves out what other processes on a shared machine take from it. Every
 * measurement is repeated in --rounds rounds, one after the other, and each
 * figure is the median of its rounds, so that no figure is taken only in a
 * stretch where the machine ran slow. Only rank 0 writes. */
#include <cblas.h>
#include <errno.h>
#include <math.h>
#include <mpi.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "kernels/cpu/llama.h"

enum { MAX_TP = 8, MAX_MICRO_BATCHES = 8 };

struct options {
  long hidden, ffn, heads, tokens;
  long vocab; /* the LM head's rows */
  long layers; /* the decoder stack the efficiency is measured on */
  double seconds; /* time spent on each measurement in each round, at least */
  int rounds;     /* every measurement repeated this many times, spread over the run */
  bool verbose;   /* each round's figures on stderr */
  long stream_mib;
  int gpus; /* 0: the number of MPI ranks */
  const char *name, *out;
  bool profile; /* write profile blocks */
  long micro_batches[MAX_MICRO_BATCHES];
  int nmicro_batches;
};

static void usage(FILE *f) {
  fputs("usage: hexic-profile [options]\n"
        "  Measures this machine and writes a cluster .hx for hexic: a gpu block (sgemm\n"
        "  TFLOP/s through OpenBLAS on one thread at one decoder layer's shapes; efficiency\n"
        "  and backward_efficiency: the rate of the layers' forward and of their backward\n"
        "  through the CPU kernels over it; mem_bandwidth: the optimizer step on the\n"
        "  layers' parameters; copy_bandwidth: a copy of them, as ZeRO-1 packs weights;\n"
        "  memory), a node of --gpus such devices and, under\n"
        "  mpirun with 2 ranks, the MPI ping-pong bandwidth and latency as the node's and\n"
        "  the network's figures.\n"
        "  --hidden N     the model's hidden size (default 768)\n"
        "  --ffn N        the model's ffn size (default 2048)\n"
        "  --heads N      the model's attention heads (default hidden / 64, at least 1)\n"
        "  --tokens N     rows of each GEMM: tokens of a micro-batch (default 1024)\n"
        "  --vocab N      the model's vocabulary: the LM head's rows (default 32000)\n"
        "  --layers N     the efficiency is measured on a stack of N layers, forward through\n"
        "                 all then backward through all, as a stage runs them: their\n"
        "                 weights and activations compete for the caches (default 1)\n"
        "  --seconds S    time spent on each measurement in each round, at least (default 1)\n"
        "  --rounds N     every measurement taken in N rounds, one after the other, each\n"
        "                 figure the median of them (default 3): a machine whose speed\n"
        "                 moves from second to second is not measured in one stretch\n"
        "  --verbose      each round's figures on stderr, as the rounds go (how much\n"
        "                 this machine's speed moves)\n"
        "  --stream-mib N size of each array of the triad (a comment) and of the buffer\n"
        "                 written over the caches before each copy, in MiB (default 64)\n"
        "  --gpus N       devices in the node (default: the number of MPI ranks)\n"
        "  --name NAME    the gpu type's name (default \"cpu\")\n"
        "  --profile      also write a profile block per TP degree (1, 2, 4, 8 up to\n"
        "                 --gpus, dividing --heads and --ffn): one rank's shard of the\n"
        "                 layer, forward and backward timed apart, and its activations\n"
        "  --micro-batches LIST  micro-batch sizes of the profiles, increasing, e.g.\n"
        "                 1,2,4 (the default)\n"
        "  -o FILE        write the .hx to FILE (default: stdout)\n",
        f);
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* This thread's CPU seconds (OpenBLAS runs on it: one thread). */
static double cpu_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static bool parse_long(const char *s, long lo, long hi, long *out) {
  char *end;
  errno = 0;
  long v = strtol(s, &end, 10);
  if (errno || end == s || *end || v < lo || v > hi)
    return false;
  *out = v;
  return true;
}

static bool parse_double(const char *s, double lo, double hi, double *out) {
  char *end;
  errno = 0;
  double v = strtod(s, &end);
  if (errno || end == s || *end || !(v >= lo && v <= hi))
    return false;
  *out = v;
  return true;
}

/* A name goes into a .hx string: printable ASCII without quotes or backslashes. */
static bool plain_name(const char *s) {
  if (!*s)
    return false;
  for (; *s; s++)
    if (*s < 0x20 || *s > 0x7e || *s == '"' || *s == '\\')
      return false;
  return true;
}

/* "1,2,4": increasing sizes of at most MAX_MICRO_BATCHES, each 1..4096. */
static bool parse_sizes(const char *s, struct options *o) {
  o->nmicro_batches = 0;
  char buf[256];
  if (strlen(s) >= sizeof buf)
    return false;
  strcpy(buf, s);
  for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
    long n;
    int k = o->nmicro_batches;
    if (k == MAX_MICRO_BATCHES || !parse_long(tok, 1, 4096, &n) ||
        (k > 0 && n <= o->micro_batches[k - 1]))
      return false;
    o->micro_batches[o->nmicro_batches++] = n;
  }
  return o->nmicro_batches > 0;
}

/* Returns 0, or 2 after a usage message. */
static int parse_options(int argc, char **argv, struct options *o) {
  *o = (struct options){.hidden = 768,
                        .ffn = 2048,
                        .tokens = 1024,
                        .vocab = 32000,
                        .layers = 1,
                        .seconds = 1.0,
                        .rounds = 3,
                        .stream_mib = 64,
                        .name = "cpu",
                        .micro_batches = {1, 2, 4},
                        .nmicro_batches = 3};
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    long n;
    bool ok = v != NULL;
    if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
      usage(stdout);
      exit(0);
    } else if (!strcmp(a, "--profile")) {
      o->profile = true;
      continue; /* takes no value */
    } else if (!strcmp(a, "--verbose")) {
      o->verbose = true;
      continue;
    } else if (!strcmp(a, "--micro-batches") && ok)
      ok = parse_sizes(v, o);
    else if (!strcmp(a, "--hidden") && ok && (ok = parse_long(v, 1, 65536, &n)))
      o->hidden = n;
    else if (!strcmp(a, "--ffn") && ok && (ok = parse_long(v, 1, 262144, &n)))
      o->ffn = n;
    else if (!strcmp(a, "--heads") && ok && (ok = parse_long(v, 1, 65536, &n)))
      o->heads = n;
    else if (!strcmp(a, "--tokens") && ok && (ok = parse_long(v, 1, 65536, &n)))
      o->tokens = n;
    else if (!strcmp(a, "--vocab") && ok && (ok = parse_long(v, 1, 16777216, &n)))
      o->vocab = n;
    else if (!strcmp(a, "--layers") && ok && (ok = parse_long(v, 1, 1024, &n)))
      o->layers = n;
    else if (!strcmp(a, "--seconds") && ok)
      ok = parse_double(v, 0.001, 3600, &o->seconds);
    else if (!strcmp(a, "--rounds") && ok && (ok = parse_long(v, 1, 100, &n)))
      o->rounds = (int)n;
    else if (!strcmp(a, "--stream-mib") && ok && (ok = parse_long(v, 1, 65536, &n)))
      o->stream_mib = n;
    else if (!strcmp(a, "--gpus") && ok && (ok = parse_long(v, 1, 1024, &n)))
      o->gpus = (int)n;
    else if (!strcmp(a, "--name") && ok && (ok = plain_name(v)))
      o->name = v;
    else if (!strcmp(a, "-o") && ok)
      o->out = v;
    else
      ok = false;
    if (!ok) { /* an unknown option, or a value the branch above refused */
      fprintf(stderr, "hexic-profile: bad option or value: '%s%s%s'\n", a, v ? " " : "",
              v && strncmp(a, "--", 2) == 0 ? v : "");
      usage(stderr);
      return 2;
    }
    i++;
  }
  if (!o->heads)
    o->heads = o->hidden >= 128 ? o->hidden / 64 : 1;
  if (o->hidden % o->heads || (o->hidden / o->heads) % 2) {
    fprintf(stderr, "hexic-profile: --heads %ld must divide --hidden %ld into even head sizes\n",
            o->heads, o->hidden);
    return 2;
  }
  return 0;
}

/* One GEMM C[m x n] = A[m x k] B[k x n]. */
struct gemm_shape {
  long m, n, k;
};

/* sgemm TFLOP/s over the shapes one rank of a TP group of degree tp
 * multiplies in a decoder layer's forward (tp 1: the whole layer), each
 * weighed by how often it occurs, repeated for seconds: wq, wk, wv and
 * w_gate, w_up split by columns (hidden x hidden/tp, hidden x ffn/tp), wo
 * and w_down by rows (hidden/tp x hidden, ffn/tp x hidden), as Megatron
 * shards them. */
static double measure_gemm_tflops(const struct options *o, long tp, double seconds) {
  const struct gemm_shape shapes[] = {
      {o->tokens, o->hidden / tp, o->hidden}, /* wq, wk, wv */
      {o->tokens, o->hidden, o->hidden / tp}, /* wo */
      {o->tokens, o->ffn / tp, o->hidden},    /* w_gate, w_up */
      {o->tokens, o->hidden, o->ffn / tp},    /* w_down */
  };
  const int counts[] = {3, 1, 2, 1};
  enum { NSHAPES = sizeof counts / sizeof counts[0] };
  long big = o->hidden > o->ffn ? o->hidden : o->ffn;
  float *a = calloc((size_t)(o->tokens * big), sizeof *a);
  float *b = calloc((size_t)(big * big), sizeof *b);
  float *c = calloc((size_t)(o->tokens * big), sizeof *c);
  if (!a || !b || !c) {
    fprintf(stderr, "hexic-profile: out of memory for the GEMM operands\n");
    exit(1);
  }
  for (long i = 0; i < o->tokens * big; i++)
    a[i] = (float)(i % 7) * 0.01f;
  for (long i = 0; i < big * big; i++)
    b[i] = (float)(i % 5) * 0.01f;
  double flops = 0, start = cpu_s(), elapsed = 0;
  do {
    for (int s = 0; s < NSHAPES; s++)
      for (int r = 0; r < counts[s]; r++) {
        const struct gemm_shape *g = &shapes[s];
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)g->m, (int)g->n, (int)g->k,
                    1.0f, a, (int)g->k, b, (int)g->n, 0.0f, c, (int)g->n);
        flops += 2.0 * (double)g->m * (double)g->n * (double)g->k;
      }
    elapsed = cpu_s() - start;
  } while (elapsed < seconds);
  free(a);
  free(b);
  free(c);
  return flops / elapsed / 1e12;
}

/* The TP degrees to measure: 1, 2, 4, 8 while they divide the heads and
 * the ffn size and stay within `most`. Returns how many. */
static int tp_degrees(const struct options *o, int most, long *tp) {
  int n = 0;
  for (long t = 1; t <= MAX_TP && t <= most && o->heads % t == 0 && o->ffn % t == 0; t *= 2)
    tp[n++] = t;
  return n;
}

/* The sharded GEMMs' TFLOP/s at each TP degree above 1 (rate[k] for
 * degree tp_degrees' k; rate[0] is left to the caller). Returns how many
 * degrees. */
static int measure_tp_rates(const struct options *o, double *rate) {
  long tp[4];
  int n = tp_degrees(o, MAX_TP, tp);
  for (int k = 1; k < n; k++)
    rate[k] = measure_gemm_tflops(o, tp[k], o->seconds / 2);
  return n;
}

/* tp_efficiency: each degree's sharded-GEMM rate over degree 1's (at most
 * 1, never growing with the degree, as hexic requires). eff[0] = 1. */
static void tp_curve(const double *rate, int n, double *eff) {
  eff[0] = 1;
  for (int k = 1; k < n; k++) {
    double e = rate[0] > 0 ? rate[k] / rate[0] : 1;
    eff[k] = e < eff[k - 1] ? e : eff[k - 1];
  }
}

static float *floats(long n) {
  float *p = calloc((size_t)(n > 0 ? n : 1), sizeof *p);
  if (!p) {
    fprintf(stderr, "hexic-profile: out of memory for the layer's buffers\n");
    exit(1);
  }
  return p;
}

/* Forward FLOPs per token of one decoder layer as model-stats counts them
 * (passes/model_stats.c; kv heads = heads): projections, causal attention
 * averaged over the sequence, norms and gating. */
static double layer_fwd_flops_per_token(const struct options *o) {
  double d = (double)o->hidden, f = (double)o->ffn, t = (double)o->tokens;
  return 2 * d * (d + 2 * d) + 2 * d * d + 6 * d * f + 2 * d * (t + 1) + 8 * d + 4 * f;
}

/* Forward FLOPs per token of the final norm, LM head and cross-entropy as
 * model-stats counts them (passes/model_stats.c: head_fwd_flops). */
static double head_fwd_flops_per_token(const struct options *o) {
  double d = (double)o->hidden, v = (double)o->vocab;
  return 4 * d + 2 * d * v + 3 * v;
}

/* One rank's shard of a decoder layer in a TP group of degree tp, ready
 * to run on nseq sequences of --tokens tokens through kernels/cpu/ (no TP
 * all-reduce: the layer's compute alone, as a profile block gives it). */
struct layer_bench {
  struct hxk_dims d;
  struct hxk_shard s;
  struct hxk_layer_ctx ctx;
  struct hxk_layer_params lw, lg;
  float *rope, *w, *g, *x, *y, *dout, *dx, *acts, *scratch;
  int *kv_of;
  long nseq, acts_floats;
  bool owner; /* of the buffers a stack's layers share (the first layer) */
};

/* b's shape, its buffers not yet made: one layer of the options' shape,
 * TP-sharded tp ways. */
static void layer_bench_shape(struct layer_bench *b, const struct options *o, long tp) {
  memset(b, 0, sizeof *b);
  b->d = (struct hxk_dims){.dim = (int)o->hidden, .ffn = (int)o->ffn, .heads = (int)o->heads,
                           .kv_heads = (int)o->heads, .vocab = 256, .seq_len = (int)o->tokens,
                           .layers = 1, .norm_eps = 1e-5f, .rope_theta = 10000.0};
  if (!hxk_dims_check(&b->d) ||
      !hxk_shard_make(&b->d, 0, (int)(o->heads / tp), 0, (int)(o->ffn / tp), &b->s)) {
    fprintf(stderr, "hexic-profile: not a valid layer shape\n");
    exit(2);
  }
  b->ctx.dims = &b->d;
  b->ctx.shard = &b->s;
}

/* The bytes of the --layers stack measure_layer_tflops (and, with
 * --profile, measure_profile_point at the largest --micro-batches size)
 * allocates (each layer's weights, gradients and saved activations; the
 * four streams of its tokens, the scratch and the rope table the layers
 * share), before any is
 * made: a stack larger than the machine's memory is refused up front
 * instead of being killed part-way through the measurements. */
static bool layer_stack_fits(const struct options *o) {
  struct layer_bench b;
  layer_bench_shape(&b, o, 1);
  long nseq = o->profile ? o->micro_batches[o->nmicro_batches - 1] : 1;
  double own =
      2.0 * (double)hxk_layer_floats(&b.d, &b.s) + (double)hxk_layer_acts_floats(&b.ctx, nseq);
  double shared = 4.0 * (double)nseq * (double)o->tokens * (double)o->hidden +
                  (double)hxk_layer_scratch_floats(&b.ctx, nseq) +
                  (double)hxk_rope_table_floats(&b.d);
  double need = ((double)o->layers * own + shared) * sizeof(float);
  long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  double have = pages > 0 && page > 0 ? (double)pages * (double)page : 0;
  if (have <= 0 || need <= have)
    return true;
  fprintf(stderr,
          "hexic-profile: --layers %ld of this shape needs %.1f GiB, more than this machine's "
          "%.1f GiB: ask for fewer layers\n",
          o->layers, need / 1073741824.0, have / 1073741824.0);
  return false;
}

/* b ready to run, below `below` in a stack (NULL: the stack's first). As
 * the programs run a stage (rtlib/rt_exec_ops.c), every layer has its own
 * weights, gradients and saved activations, and the layers share the rest:
 * one scratch, and the residual stream and its gradient passed from layer
 * to layer through two buffers each (a layer's output is the next one's
 * input). A stack whose every layer had its own scratch and streams (16 MB
 * more at micro-batch 8 on 8 layers of the bench model) ran 12-20% slower
 * a sequence at micro-batches 4 and 8 than the programs did. */
static void layer_bench_init(struct layer_bench *b, const struct options *o, long tp, long nseq,
                             const struct layer_bench *below) {
  layer_bench_shape(b, o, tp);
  b->nseq = nseq;
  long lf = hxk_layer_floats(&b->d, &b->s), nd = nseq * o->tokens * o->hidden;
  b->owner = below == NULL;
  if (below) {
    b->rope = below->rope, b->kv_of = below->kv_of, b->scratch = below->scratch;
    b->x = below->y, b->y = below->x, b->dout = below->dx, b->dx = below->dout;
  } else {
    b->rope = floats(hxk_rope_table_floats(&b->d));
    b->kv_of = calloc((size_t)b->d.heads, sizeof *b->kv_of);
    hxk_rope_table(b->rope, &b->d);
    hxk_kv_map(b->kv_of, &b->d, &b->s);
    b->x = floats(nd), b->y = floats(nd), b->dout = floats(nd), b->dx = floats(nd);
    for (long i = 0; i < nd; i++)
      b->x[i] = b->dout[i] = (float)((i * 7919) % 13) * 0.05f - 0.3f;
  }
  b->ctx.rope = b->rope;
  b->ctx.kv_of = b->kv_of;
  b->w = floats(lf), b->g = floats(lf);
  b->acts_floats = hxk_layer_acts_floats(&b->ctx, nseq);
  b->acts = floats(b->acts_floats);
  if (!below)
    b->scratch = floats(hxk_layer_scratch_floats(&b->ctx, nseq));
  hxk_layer_bind(&b->lw, b->w, &b->d, &b->s);
  hxk_layer_bind(&b->lg, b->g, &b->d, &b->s);
  struct hxk_layer_params *lw = &b->lw;
  float *tensors[HXK_LAYER_NPARAMS] = {lw->attn_norm, lw->wq,     lw->wk,   lw->wv,    lw->wo,
                                       lw->mlp_norm,  lw->w_gate, lw->w_up, lw->w_down};
  for (int j = 0; j < HXK_LAYER_NPARAMS; j++)
    hxk_init_param(tensors[j], &b->d, &b->s, 1, (enum hxk_param)j, 0);
}

static void layer_bench_forward(struct layer_bench *b) {
  hxk_layer_forward(&b->ctx, &b->lw, b->x, b->y, b->acts, b->scratch, b->nseq);
}

static void layer_bench_backward(struct layer_bench *b) {
  hxk_layer_backward(&b->ctx, &b->lw, &b->lg, b->dout, b->dx, b->acts, b->scratch, b->nseq);
}

static void layer_bench_free(struct layer_bench *b) {
  free(b->w);
  free(b->g);
  free(b->acts);
  if (!b->owner)
    return;
  float *shared[] = {b->rope, b->x, b->y, b->dout, b->dx, b->scratch};
  for (size_t i = 0; i < sizeof shared / sizeof *shared; i++)
    free(shared[i]);
  free(b->kv_of);
}

/* TFLOP/s of a stack of decoder layers' forward and backward apart, and
 * of the LM head run between them. */
struct layer_rates {
  double fwd, bwd, head;
};

/* The final norm, LM head and cross-entropy of one sequence of --tokens
 * tokens at --vocab, ready to run forward and backward in one call. */
struct head_bench {
  struct hxk_dims d;
  struct hxk_head_params hw, hg;
  float *w, *g, *dx, *scratch;
  int32_t *targets;
};

static void head_bench_init(struct head_bench *h, const struct options *o) {
  h->d = (struct hxk_dims){.dim = (int)o->hidden, .ffn = (int)o->ffn, .heads = (int)o->heads,
                           .kv_heads = (int)o->heads, .vocab = (int)o->vocab,
                           .seq_len = (int)o->tokens, .layers = 1, .norm_eps = 1e-5f,
                           .rope_theta = 10000.0};
  long n = o->tokens, dv = o->hidden * o->vocab;
  h->dx = floats(n * o->hidden);
  h->scratch = floats(hxk_head_scratch_floats(&h->d, n));
  h->w = floats(o->hidden + dv), h->g = floats(o->hidden + dv);
  h->targets = calloc((size_t)n, sizeof *h->targets);
  if (!h->targets) {
    fprintf(stderr, "hexic-profile: out of memory for the head's targets\n");
    exit(1);
  }
  for (long i = 0; i < n; i++)
    h->targets[i] = (int32_t)((i * 7919) % o->vocab);
  for (long i = 0; i < o->hidden + dv; i++)
    h->w[i] = i < o->hidden ? 1.0f : (float)(i % 7 - 3) * 0.01f;
  h->hw = (struct hxk_head_params){h->w, h->w + o->hidden};
  h->hg = (struct hxk_head_params){h->g, h->g + o->hidden};
}

/* The head on x (the stack's output), its gradient added into h->g. */
static void head_bench_run(struct head_bench *h, const float *x) {
  long n = h->d.seq_len;
  hxk_head_forward_backward(&h->d, &h->hw, &h->hg, x, h->targets, n, 1.0 / (double)n, h->dx,
                            h->scratch);
}

static void head_bench_free(struct head_bench *h) {
  float *buffers[] = {h->w, h->g, h->dx, h->scratch};
  for (size_t i = 0; i < sizeof buffers / sizeof *buffers; i++)
    free(buffers[i]);
  free(h->targets);
}

/* The fewest CPU seconds of a stack's forward (through all its layers),
 * its head's run after it (h: NULL for none) and its backward (through all
 * from the top), each over the passes after the first (which touches the
 * buffers): at least min_passes of them, and for at least `seconds`. */
struct stack_times {
  double fwd, head, bwd;
};

static struct stack_times time_stack(struct layer_bench *b, long layers, struct head_bench *h,
                                     int min_passes, double seconds) {
  struct stack_times t = {INFINITY, INFINITY, INFINITY};
  double start = cpu_s();
  for (int pass = 0; pass < min_passes || cpu_s() - start < seconds; pass++) {
    double t0 = cpu_s();
    for (long l = 0; l < layers; l++)
      layer_bench_forward(&b[l]);
    double t1 = cpu_s();
    if (h)
      head_bench_run(h, b[layers - 1].y);
    double t2 = cpu_s();
    for (long l = layers - 1; l >= 0; l--)
      layer_bench_backward(&b[l]);
    double t3 = cpu_s();
    if (pass > 0) {
      t.fwd = fmin(t.fwd, t1 - t0);
      t.head = fmin(t.head, t2 - t1);
      t.bwd = fmin(t.bwd, t3 - t2);
    }
  }
  return t;
}

/* --layers layers of a TP rank's shard at nseq sequences, made. */
static struct layer_bench *stack_init(const struct options *o, long tp, long nseq) {
  struct layer_bench *b = calloc((size_t)o->layers, sizeof *b);
  if (!b) {
    fprintf(stderr, "hexic-profile: out of memory for %ld layers\n", o->layers);
    exit(1);
  }
  for (long l = 0; l < o->layers; l++)
    layer_bench_init(&b[l], o, tp, nseq, l ? &b[l - 1] : NULL);
  return b;
}

static void stack_free(struct layer_bench *b, long layers) {
  for (long l = 0; l < layers; l++)
    layer_bench_free(&b[l]);
  free(b);
}

/* The forward's and the backward's (2 x the forward's FLOPs) TFLOP/s on a
 * stack of --layers decoder layers, each with its own weights, gradients
 * and activations, on one sequence of --tokens tokens through kernels/cpu/,
 * and the LM head's (forward and backward, 3 x its forward's FLOPs), as the
 * last pipeline stage runs one micro-batch: its forward op runs the stack,
 * then the head forward and backward in one call (rtlib/rt_exec_ops.c), its
 * backward op the stack from its top. The head is timed there, after the
 * stack has streamed its weights and activations through the caches, not
 * alone: called back to back, its weights and logits stay in the caches and
 * it ran 10-20% faster than in the programs. Each the fewest CPU seconds of
 * the passes (after a first that touches every buffer), as --emulate takes
 * an op's reference. */
static struct layer_rates measure_layer_tflops(const struct options *o) {
  struct layer_bench *b = stack_init(o, 1, 1);
  struct head_bench h;
  head_bench_init(&h, o);
  struct stack_times t = time_stack(b, o->layers, &h, 3, o->seconds);
  stack_free(b, o->layers);
  head_bench_free(&h);
  double flops = (double)o->layers * layer_fwd_flops_per_token(o) * (double)o->tokens;
  double head_flops = 3 * head_fwd_flops_per_token(o) * (double)o->tokens;
  return (struct layer_rates){flops / t.fwd / 1e12, 2 * flops / t.bwd / 1e12,
                              head_flops / t.head / 1e12};
}

struct profile_point {
  double fwd_s, bwd_s, act_bytes;
};

/* One profile point: seconds of one forward and one backward of one
 * decoder layer (a TP rank's shard) on nseq sequences, and the bytes its
 * activations keep. Timed as measure_layer_tflops times the layers: a stack
 * of --layers of them, forward through all then backward through all, as a
 * stage runs them, the fewest CPU seconds of the passes after the first,
 * over the layers. One layer run back to back over itself kept its weights
 * and activations in the caches and read 10-20% faster than the programs;
 * a mean of wall-clock repetitions took what else ran on the machine as
 * its own, where --emulate's reference leaves that out. */
static struct profile_point measure_profile_point(const struct options *o, long tp, long nseq,
                                                  double seconds) {
  struct layer_bench *b = stack_init(o, tp, nseq);
  /* at least 4 timed passes a round and 8 over all the rounds: the fewest
   * of 2 (a point's share of --seconds often allowed no more) read the
   * backward 10% slow, and one a round for 6 rounds read a layer's
   * forward and backward 15-30% slow */
  int timed = (8 + o->rounds - 1) / o->rounds;
  struct stack_times t = time_stack(b, o->layers, NULL, 1 + (timed > 4 ? timed : 4), seconds);
  double layers = (double)o->layers;
  struct profile_point p = {t.fwd / layers, t.bwd / layers, 4.0 * (double)b[0].acts_floats};
  stack_free(b, o->layers);
  return p;
}

/* The profile points of every TP degree up to the node's GPUs (rows) at
 * every --micro-batches size, one round of them: the round's --seconds
 * shared among the points. */
static void measure_profiles(const struct options *o, int gpus,
                             struct profile_point p[][MAX_MICRO_BATCHES]) {
  long tp[4];
  int nt = tp_degrees(o, gpus, tp);
  double each = o->seconds / (nt * o->nmicro_batches) > 0.02 ? o->seconds / (nt * o->nmicro_batches)
                                                            : 0.02;
  for (int k = 0; k < nt; k++)
    for (int i = 0; i < o->nmicro_batches; i++)
      p[k][i] = measure_profile_point(o, tp[k], o->micro_batches[i], each);
}

/* profile blocks: one per TP degree up to the node's GPUs, each over the
 * --micro-batches sizes, from measure_profiles' points. */
static void write_profiles(FILE *f, const struct options *o, int gpus,
                           const struct profile_point p[][MAX_MICRO_BATCHES]) {
  long tp[4];
  int nt = tp_degrees(o, gpus, tp);
  for (int k = 0; k < nt; k++) {
    fprintf(f, "profile \"%s\" {\n  tp = %ld\n  micro_batch = [", o->name, tp[k]);
    for (int i = 0; i < o->nmicro_batches; i++)
      fprintf(f, "%s%ld", i ? ", " : "", o->micro_batches[i]);
    fputs("]\n  forward = [", f);
    for (int i = 0; i < o->nmicro_batches; i++)
      fprintf(f, "%s%.6f ms", i ? ", " : "", p[k][i].fwd_s * 1e3);
    fputs("]\n  backward = [", f);
    for (int i = 0; i < o->nmicro_batches; i++)
      fprintf(f, "%s%.6f ms", i ? ", " : "", p[k][i].bwd_s * 1e3);
    fputs("]\n  memory = [", f);
    for (int i = 0; i < o->nmicro_batches; i++)
      fprintf(f, "%s%.0f B", i ? ", " : "", p[k][i].act_bytes);
    fputs("]\n}\n", f);
  }
}

/* Streaming triad bandwidth in bytes/s (three arrays touched per element). */
static double measure_mem_bandwidth(const struct options *o) {
  size_t n = (size_t)o->stream_mib * 1024 * 1024 / sizeof(double);
  double *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y), *z = malloc(n * sizeof *z);
  if (!x || !y || !z) {
    fprintf(stderr, "hexic-profile: out of memory for the streaming arrays\n");
    exit(1);
  }
  for (size_t i = 0; i < n; i++) {
    y[i] = (double)i;
    z[i] = 1.0;
  }
  double best = 0, start = now_s();
  volatile double sink = 0;
  do {
    double t0 = now_s();
    for (size_t i = 0; i < n; i++)
      x[i] = y[i] + 0.5 * z[i];
    double t = now_s() - t0;
    sink += x[n / 2];
    double bw = 3.0 * (double)n * sizeof(double) / t;
    if (bw > best)
      best = bw;
  } while (now_s() - start < o->seconds);
  (void)sink;
  free(x);
  free(y);
  free(z);
  return best;
}

/* Bytes a parameter that hexic prices an fp32 optimizer step by
 * (passes/cost: hx_optimizer_traffic_per_param): the gradient norm reads g
 * (4), clipping reads and writes it (8), AdamW reads w g m v and writes w m v
 * (28). */
#define OPTIMIZER_BYTES_PER_PARAM 40.0

/* The parameters of the --layers stack (its matrices and norm gains), whose
 * optimizer step measure_optimizer_bandwidth times: a stage's state, as the
 * efficiency's stack is a stage's layers. */
static long stack_params(const struct options *o) {
  struct layer_bench b;
  layer_bench_shape(&b, o, 1);
  return o->layers * hxk_layer_floats(&b.d, &b.s);
}

/* Writes the --stream-mib buffer (larger than a CPU's last-level cache at
 * its default) once, as the all-gather between ZeRO-1's pack and unpack and
 * a step's forward and backward before them stream other data through the
 * caches: the copies then read and write memory, as in the programs. Timed
 * back to back on a stage's parameters that fit the caches, the copies ran
 * at 84 GB/s, where the programs' pack and unpack ran at 15 (rtlib's
 * rt_sync_gather_weights, timed inside the programs). */
static void evict_caches(const struct options *o, float *junk) {
  size_t n = (size_t)o->stream_mib * 1024 * 1024 / sizeof *junk;
  for (size_t i = 0; i < n; i++)
    junk[i] += 1.0f;
}

static float *eviction_buffer(const struct options *o) {
  return floats((long)((size_t)o->stream_mib * 1024 * 1024 / sizeof(float)));
}

/* AdamW as rtlib/cpu/device_cpu.c runs it: chunks of DECAY_CHUNK elements,
 * each with its weight-decay mask. */
enum { DECAY_CHUNK = 4096 };

static void adamw_as_runtime(float *w, const float *g, float *m, float *v, long n,
                             const struct hxk_adamw *hp, long step) {
  static uint8_t ones[DECAY_CHUNK];
  memset(ones, 1, sizeof ones);
  for (long at = 0; at < n; at += DECAY_CHUNK) {
    long k = n - at < DECAY_CHUNK ? n - at : DECAY_CHUNK;
    hxk_adamw_step(w + at, g + at, m + at, v + at, ones, k, hp, step, 1e-4);
  }
}

/* The runtime's optimizer step as bytes/s of what hexic prices it by
 * (OPTIMIZER_BYTES_PER_PARAM x parameters over its seconds): the gradient's
 * sum of squares, clipping (a scale) and AdamW through kernels/cpu, as
 * rtlib/cpu/device_cpu.c runs them (AdamW in its chunks, each with its decay
 * mask), on the --layers stack's parameters, the fewest CPU seconds of
 * repeated steps. The kernels' square root, division and the norm's
 * double-precision sum keep it far below the triad's rate on a CPU; at a
 * stage's size the state stays in the caches the triad's --stream-mib arrays
 * are made to miss (timed inside the programs, AdamW ran at the 3.0 ns a
 * parameter it takes here back to back, not slower). */
static double measure_optimizer_bandwidth(const struct options *o) {
  long n = stack_params(o);
  float *w = calloc((size_t)n, sizeof *w), *g = calloc((size_t)n, sizeof *g);
  float *m = calloc((size_t)n, sizeof *m), *v = calloc((size_t)n, sizeof *v);
  if (!w || !g || !m || !v) {
    fprintf(stderr, "hexic-profile: out of memory for the optimizer state\n");
    exit(1);
  }
  for (long i = 0; i < n; i++) {
    w[i] = 0.01f * (float)(i % 100);
    g[i] = 0.001f * (float)(i % 7);
  }
  const struct hxk_adamw hp = {0.9, 0.95, 1e-8, 0.1};
  double fewest = INFINITY, start = cpu_s();
  volatile double norm = 0; /* kept, as the runtime all-reduces it */
  for (long step = 0; step < 3 || cpu_s() - start < o->seconds; step++) {
    double t0 = cpu_s();
    norm = hxk_sum_squares(g, n);
    hxk_scale(g, n, 1.0f); /* the clip: the same bytes whatever the factor */
    adamw_as_runtime(w, g, m, v, n, &hp, step);
    double t = cpu_s() - t0;
    if (step > 0 && t < fewest) /* the first touches the state */
      fewest = t;
  }
  (void)norm;
  float *buffers[] = {w, g, m, v};
  for (size_t i = 0; i < sizeof buffers / sizeof *buffers; i++)
    free(buffers[i]);
  return OPTIMIZER_BYTES_PER_PARAM * (double)n / fewest;
}

/* A copy within memory in bytes/s, as ZeRO-1 packs a rank's weights for
 * the all-gather and unpacks the gathered ones (rtlib's host_pack and
 * host_unpack: a memcpy each way, 16 bytes a parameter read and written in
 * fp32, as hx_rank_weight_repack_s prices them), on the --layers stack's
 * parameters, the fewest CPU seconds of repeated rounds, each after
 * evict_caches (not timed). */
static double measure_copy_bandwidth(const struct options *o) {
  long n = stack_params(o);
  float *w = calloc((size_t)n, sizeof *w), *pack = calloc((size_t)n, sizeof *pack);
  if (!w || !pack) {
    fprintf(stderr, "hexic-profile: out of memory for the copy's buffers\n");
    exit(1);
  }
  float *junk = eviction_buffer(o);
  for (long i = 0; i < n; i++)
    w[i] = 0.01f * (float)(i % 100);
  double fewest = INFINITY, start = cpu_s();
  for (int round = 0; round < 3 || cpu_s() - start < o->seconds / 2; round++) {
    evict_caches(o, junk);
    double t0 = cpu_s();
    memcpy(pack, w, (size_t)n * sizeof *w);
    memcpy(w, pack, (size_t)n * sizeof *w);
    double t = cpu_s() - t0;
    if (round > 0 && t < fewest) /* the first touches the pack */
      fewest = t;
  }
  free(w);
  free(pack);
  free(junk);
  return 16.0 * (double)n / fewest;
}

/* Ranks 0 and 1 bounce msg bytes reps times; the others wait. Returns the
 * seconds of one half round trip on rank 0 (0 on the others). */
static double pingpong(int rank, char *buf, int bytes, int reps) {
  MPI_Barrier(MPI_COMM_WORLD);
  double t0 = MPI_Wtime();
  for (int r = 0; r < reps; r++) {
    if (rank == 0) {
      MPI_Send(buf, bytes, MPI_BYTE, 1, 0, MPI_COMM_WORLD);
      MPI_Recv(buf, bytes, MPI_BYTE, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    } else if (rank == 1) {
      MPI_Recv(buf, bytes, MPI_BYTE, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      MPI_Send(buf, bytes, MPI_BYTE, 0, 0, MPI_COMM_WORLD);
    }
  }
  double t = (MPI_Wtime() - t0) / (2.0 * reps);
  return rank == 0 ? t : 0;
}

/* A barrier that waits in short sleeps (MPI's own wait spins on a core). */
static void sleep_through_barrier(void) {
  MPI_Request req;
  MPI_Ibarrier(MPI_COMM_WORLD, &req);
  for (int done = 0;;) {
    MPI_Test(&req, &done, MPI_STATUS_IGNORE);
    if (done)
      return;
    nanosleep(&(struct timespec){0, 1000000}, NULL);
  }
}

struct link_figures {
  double latency_s, bandwidth; /* bytes/s */
};

/* Rank 0 decides how many repetitions fill the time and tells rank 1. */
static int agreed_reps(int rank, double one_s, double seconds) {
  int reps = one_s > 0 ? (int)(seconds / one_s) : 1;
  if (reps < 3)
    reps = 3;
  if (reps > 1000000)
    reps = 1000000;
  MPI_Bcast(&reps, 1, MPI_INT, 0, MPI_COMM_WORLD);
  (void)rank;
  return reps;
}

static struct link_figures measure_link(int rank, const struct options *o) {
  enum { BIG = 8 << 20 };
  char *buf = calloc(BIG, 1);
  if (!buf) {
    fprintf(stderr, "hexic-profile: out of memory for the ping-pong buffer\n");
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  struct link_figures f;
  double probe = pingpong(rank, buf, 8, 10);
  f.latency_s = pingpong(rank, buf, 8, agreed_reps(rank, 2 * probe, o->seconds / 2));
  probe = pingpong(rank, buf, BIG, 2);
  double t = pingpong(rank, buf, BIG, agreed_reps(rank, 2 * probe, o->seconds / 2));
  /* latency off: the bandwidth term alone */
  f.bandwidth = t > f.latency_s ? BIG / (t - f.latency_s) : BIG / t;
  free(buf);
  return f;
}

/* A rate's share of the sgemm rate, within hexic's (0, 1]. */
static double share_of(double rate, double sgemm) {
  double e = sgemm > 0 ? rate / sgemm : 1;
  return e > 1 ? 1 : e < 0.001 ? 0.001 : e;
}

static long long device_memory_bytes(int gpus) {
  long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  long long total = pages > 0 && page > 0 ? (long long)pages * page : 1LL << 33;
  return total / gpus;
}

struct measured {
  double tflops, efficiency, mem_bw;
  double backward_efficiency;
  double head_efficiency;
  double opt_bw;  /* what the optimizer streams (mem_bandwidth) */
  double copy_bw; /* ZeRO-1's pack and unpack (copy_bandwidth) */
  double tp_eff[4]; /* degrees 1, 2, 4, 8 */
  int ntp;
  struct profile_point points[4][MAX_MICRO_BATCHES]; /* --profile: [TP degree][size] */
};

static void write_cluster(FILE *f, const struct options *o, int gpus, const struct measured *m,
                          const struct link_figures *link) {
  fprintf(f,
          "# Measured by hexic-profile (--hidden %ld --ffn %ld --heads %ld --tokens %ld --layers "
          "%ld, OpenBLAS on 1 thread).\n",
          o->hidden, o->ffn, o->heads, o->tokens, o->layers);
  fprintf(f,
          "# efficiency: the forward's share of the sgemm rate; backward_efficiency: the "
          "backward's\n# (2x the forward's FLOPs); head_efficiency: the LM head's forward + "
          "backward (--vocab %ld).\n# mem_bandwidth: the optimizer step (norm, clip, "
          "AdamW\n# through the CPU kernels on %ld parameters) as %.0f bytes a parameter, what "
          "hexic prices\n# it by; copy_bandwidth: ZeRO-1's weight pack and unpack on them; a "
          "streaming triad\n# reaches %.1f MB/s.\n",
          o->vocab, stack_params(o), OPTIMIZER_BYTES_PER_PARAM, m->mem_bw / 1e6);
  /* fixed-point figures: the .hx lexer reads them whatever their size */
  fprintf(f,
          "gpu \"%s\" { tflops = %.6f; memory = %lld MiB; efficiency = %.3f; backward_efficiency "
          "= %.3f; head_efficiency = %.3f; mem_bandwidth = %.1f MB/s; copy_bandwidth = %.1f MB/s; "
          "tp_efficiency = [",
          o->name, m->tflops > 1e-6 ? m->tflops : 1e-6, device_memory_bytes(gpus) >> 20,
          m->efficiency, m->backward_efficiency, m->head_efficiency, m->opt_bw / 1e6,
          m->copy_bw / 1e6);
  for (int k = 0; k < m->ntp; k++)
    fprintf(f, "%s%.3f", k ? ", " : "", k ? m->tp_eff[k] : 1.0);
  fputs("] }\n", f);
  if (o->profile)
    write_profiles(f, o, gpus, m->points);
  if (link)
    fprintf(f, "node \"host\" { gpu = \"%s\"; gpus = %d; bandwidth = %.1f MB/s; latency = %.3f us }\n",
            o->name, gpus, link->bandwidth / 1e6, link->latency_s * 1e6);
  else
    fprintf(f, "node \"host\" { gpu = \"%s\"; gpus = %d; bandwidth = %.1f MB/s }\n", o->name, gpus,
            m->mem_bw / 1e6);
  if (link)
    fprintf(f, "network { bandwidth = %.1f MB/s; latency = %.3f us }\n", link->bandwidth / 1e6,
            link->latency_s * 1e6);
}

/* Every figure of one round. */
struct round_figures {
  double tflops, tp_rate[4], mem_bw, opt_bw, copy_bw;
  struct layer_rates layer;
  int ntp;
  struct profile_point points[4][MAX_MICRO_BATCHES];
};

static struct round_figures *round_figures_new(int rounds) {
  struct round_figures *r = calloc((size_t)rounds, sizeof *r);
  if (!r) {
    fprintf(stderr, "hexic-profile: out of memory for the rounds\n");
    exit(1);
  }
  return r;
}

static void measure_round(const struct options *o, int gpus, struct round_figures *r) {
  r->tflops = measure_gemm_tflops(o, 1, o->seconds);
  r->ntp = measure_tp_rates(o, r->tp_rate);
  r->layer = measure_layer_tflops(o);
  r->mem_bw = measure_mem_bandwidth(o);
  r->opt_bw = measure_optimizer_bandwidth(o);
  r->copy_bw = measure_copy_bandwidth(o);
  if (o->profile)
    measure_profiles(o, gpus, r->points);
}

/* One round's figures; with --profile, its TP 1 profile's per-layer times. */
static void print_round(const struct options *o, int k, const struct round_figures *r) {
  fprintf(stderr,
          "hexic-profile: round %d: sgemm %.2f GFLOP/s, layer fwd %.2f, bwd %.2f, head %.2f "
          "GFLOP/s, optimizer %.2f GB/s, copy %.2f GB/s",
          k + 1, r->tflops * 1e3, r->layer.fwd * 1e3, r->layer.bwd * 1e3, r->layer.head * 1e3,
          r->opt_bw / 1e9, r->copy_bw / 1e9);
  for (int i = 0; o->profile && i < o->nmicro_batches; i++)
    fprintf(stderr, "%s mbs %ld %.3f/%.3f ms",
            i ? "," : "; tp 1 forward/backward:", o->micro_batches[i], r->points[0][i].fwd_s * 1e3,
            r->points[0][i].bwd_s * 1e3);
  fputc('\n', stderr);
}

static int by_value(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* The median of v[0..n), sorted in place. */
static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, by_value);
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* dst = the median over the rounds of the figure EXPR (of round r[k]). */
#define MEDIAN_INTO(dst, expr)                                                                     \
  do {                                                                                             \
    double v_[100]; /* --rounds allows 100 at most */                                              \
    for (int k = 0; k < o->rounds; k++)                                                            \
      v_[k] = r[k].expr;                                                                           \
    (dst) = median(v_, o->rounds);                                                                 \
  } while (0)

/* Every figure the median of the rounds' (the TP degrees and the
 * activation bytes, the same in every round, the first's). */
static struct round_figures median_round(const struct options *o, const struct round_figures *r) {
  struct round_figures m = {.ntp = r[0].ntp};
  MEDIAN_INTO(m.tflops, tflops);
  MEDIAN_INTO(m.layer.fwd, layer.fwd);
  MEDIAN_INTO(m.layer.bwd, layer.bwd);
  MEDIAN_INTO(m.layer.head, layer.head);
  MEDIAN_INTO(m.mem_bw, mem_bw);
  MEDIAN_INTO(m.opt_bw, opt_bw);
  MEDIAN_INTO(m.copy_bw, copy_bw);
  for (int t = 1; t < m.ntp; t++)
    MEDIAN_INTO(m.tp_rate[t], tp_rate[t]);
  for (int t = 0; t < 4; t++)
    for (int i = 0; i < MAX_MICRO_BATCHES; i++) {
      MEDIAN_INTO(m.points[t][i].fwd_s, points[t][i].fwd_s);
      MEDIAN_INTO(m.points[t][i].bwd_s, points[t][i].bwd_s);
      m.points[t][i].act_bytes = r[0].points[t][i].act_bytes;
    }
  return m;
}

int main(int argc, char **argv) {
  struct options o;
  int rc = parse_options(argc, argv, &o);
  if (rc)
    return rc;
  if (!layer_stack_fits(&o))
    return 1;
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  openblas_set_num_threads(1);
  /* the output is opened first: an unwritable one fails before any measuring */
  FILE *f = stdout;
  int ok = 1;
  if (rank == 0 && o.out && !(f = fopen(o.out, "w"))) {
    fprintf(stderr, "hexic-profile: %s: cannot create: %s\n", o.out, strerror(errno));
    ok = 0;
  }
  MPI_Bcast(&ok, 1, MPI_INT, 0, MPI_COMM_WORLD);
  if (!ok) {
    MPI_Finalize();
    return 1;
  }
  struct round_figures med = {0}; /* rank 0: the rounds' medians */
  struct measured m = {0};
  if (rank != 0) /* idle while rank 0 measures: asleep, not polling a core away from it */
    sleep_through_barrier();
  if (rank == 0) {
    /* Rounds, each figure the median of them. On a shared machine (a KVM
     * guest here) the fewest CPU seconds of an 8-layer stack's forward,
     * taken over one second at a time, moved between 2.54 and 3.25 ms from
     * one second to the next: a figure measured in one stretch read up to
     * 30% slow at random, one point of a profile against the next. The
     * median, not the best: --emulate's references are the fewest of a few
     * seconds of a run's ops, which the luckiest of six rounds undercut by
     * 5-12% (bench/measured.sh's plans, all of them, ran that much slower
     * than a profile of the bests priced them). */
    struct round_figures *r = round_figures_new(o.rounds);
    for (int k = 0; k < o.rounds; k++) {
      measure_round(&o, o.gpus > 0 ? o.gpus : size, &r[k]);
      if (o.verbose)
        print_round(&o, k, &r[k]);
    }
    med = median_round(&o, r);
    free(r);
    MPI_Request req; /* matches the others' MPI_Ibarrier (a blocking one would not) */
    MPI_Ibarrier(MPI_COMM_WORLD, &req);
    MPI_Wait(&req, MPI_STATUS_IGNORE);
  }
  struct link_figures link = {0, 0};
  if (size >= 2)
    link = measure_link(rank, &o);
  if (rank == 0) {
    double tflops = med.tflops;
    struct layer_rates layer = med.layer;
    double efficiency = share_of(layer.fwd, tflops);
    m.tflops = tflops, m.efficiency = efficiency, m.mem_bw = med.mem_bw, m.opt_bw = med.opt_bw;
    m.backward_efficiency = share_of(layer.bwd, tflops);
    m.copy_bw = med.copy_bw;
    m.head_efficiency = share_of(layer.head, tflops);
    m.ntp = med.ntp;
    med.tp_rate[0] = tflops;
    tp_curve(med.tp_rate, m.ntp, m.tp_eff);
    memcpy(m.points, med.points, sizeof m.points);
    write_cluster(f, &o, o.gpus > 0 ? o.gpus : size, &m, size >= 2 ? &link : NULL);
    if ((f != stdout && fclose(f) != 0) || (f == stdout && fflush(f) != 0)) {
      fprintf(stderr, "hexic-profile: cannot write the output\n");
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
    fprintf(stderr,
            "hexic-profile: sgemm %.2f GFLOP/s, layer fwd %.2f GFLOP/s (efficiency %.3f), bwd "
            "%.2f GFLOP/s (%.3f), head %.2f GFLOP/s (%.3f), memory %.2f GB/s (triad), optimizer "
            "%.2f GB/s, copy %.2f GB/s%s",
            tflops * 1e3, layer.fwd * 1e3, efficiency, layer.bwd * 1e3, m.backward_efficiency,
            layer.head * 1e3, m.head_efficiency, med.mem_bw / 1e9, med.opt_bw / 1e9,
            med.copy_bw / 1e9, size >= 2 ? "" : "\n");
    if (size >= 2)
      fprintf(stderr, ", MPI %.1f MB/s, %.2f us\n", link.bandwidth / 1e6, link.latency_s * 1e6);
  }
  MPI_Finalize();
  return 0;
}
