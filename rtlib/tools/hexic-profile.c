/* hexic-profile: measures the machine it runs on and writes a cluster .hx
 * that hexic reads, so that a plan is priced with measured figures instead
 * of guesses:
 *   - sgemm throughput through OpenBLAS at the shapes one decoder layer of a
 *     model (hidden, ffn) multiplies, on one thread: the generated programs'
 *     launch.sh sets OPENBLAS_NUM_THREADS=1 (one rank = one core);
 *   - one decoder layer's forward + backward through kernels/cpu/ (what the
 *     programs run), counted with model-stats' FLOPs: its rate over the sgemm
 *     rate is the efficiency;
 *   - memory bandwidth, with a streaming triad a[i] = b[i] + s * c[i];
 *   - under mpirun with 2 or more ranks, the MPI ping-pong latency (8-byte
 *     messages, half a round trip) and bandwidth (large messages) between
 *     ranks 0 and 1, which fill the node's and the network's figures.
 * The GPU block's tflops is the sgemm throughput and efficiency the layer's
 * fraction of it, so tflops x efficiency is what training reaches. Only rank
 * 0 writes. */
#include <cblas.h>
#include <errno.h>
#include <mpi.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "kernels/cpu/llama.h"

struct options {
  long hidden, ffn, heads, tokens;
  double seconds; /* time spent on each measurement, at least */
  long stream_mib;
  int gpus; /* 0: the number of MPI ranks */
  const char *name, *out;
};

static void usage(FILE *f) {
  fputs("usage: hexic-profile [options]\n"
        "  Measures this machine and writes a cluster .hx for hexic: a gpu block (sgemm\n"
        "  TFLOP/s through OpenBLAS on one thread at one decoder layer's shapes; efficiency:\n"
        "  the rate of that layer's forward + backward through the CPU kernels over it;\n"
        "  memory, streaming memory bandwidth), a node of --gpus such devices and, under\n"
        "  mpirun with 2 ranks, the MPI ping-pong bandwidth and latency as the node's and\n"
        "  the network's figures.\n"
        "  --hidden N     the model's hidden size (default 768)\n"
        "  --ffn N        the model's ffn size (default 2048)\n"
        "  --heads N      the model's attention heads (default hidden / 64, at least 1)\n"
        "  --tokens N     rows of each GEMM: tokens of a micro-batch (default 1024)\n"
        "  --seconds S    time spent on each measurement, at least (default 1)\n"
        "  --stream-mib N size of each streaming array in MiB (default 64)\n"
        "  --gpus N       devices in the node (default: the number of MPI ranks)\n"
        "  --name NAME    the gpu type's name (default \"cpu\")\n"
        "  -o FILE        write the .hx to FILE (default: stdout)\n",
        f);
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
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

/* Returns 0, or 2 after a usage message. */
static int parse_options(int argc, char **argv, struct options *o) {
  *o = (struct options){768, 2048, 0, 1024, 1.0, 64, 0, "cpu", NULL};
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    long n;
    bool ok = v != NULL;
    if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
      usage(stdout);
      exit(0);
    } else if (!strcmp(a, "--hidden") && ok && (ok = parse_long(v, 1, 65536, &n)))
      o->hidden = n;
    else if (!strcmp(a, "--ffn") && ok && (ok = parse_long(v, 1, 262144, &n)))
      o->ffn = n;
    else if (!strcmp(a, "--heads") && ok && (ok = parse_long(v, 1, 65536, &n)))
      o->heads = n;
    else if (!strcmp(a, "--tokens") && ok && (ok = parse_long(v, 1, 65536, &n)))
      o->tokens = n;
    else if (!strcmp(a, "--seconds") && ok)
      ok = parse_double(v, 0.001, 3600, &o->seconds);
    else if (!strcmp(a, "--stream-mib") && ok && (ok = parse_long(v, 1, 65536, &n)))
      o->stream_mib = n;
    else if (!strcmp(a, "--gpus") && ok && (ok = parse_long(v, 1, 1024, &n)))
      o->gpus = (int)n;
    else if (!strcmp(a, "--name") && ok && (ok = plain_name(v)))
      o->name = v;
    else if (!strcmp(a, "-o") && ok)
      o->out = v;
    else {
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

/* sgemm TFLOP/s over the shapes one decoder layer's forward multiplies
 * (fused q/k/v and o: hidden x hidden; gate/up: hidden x ffn; down: ffn x
 * hidden), each weighed by how often it occurs, repeated for seconds. */
static double measure_gemm_tflops(const struct options *o) {
  const struct gemm_shape shapes[] = {
      {o->tokens, o->hidden, o->hidden}, /* wq, wk, wv, wo */
      {o->tokens, o->ffn, o->hidden},    /* w_gate, w_up */
      {o->tokens, o->hidden, o->ffn},    /* w_down */
  };
  const int counts[] = {4, 2, 1};
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
  double flops = 0, start = now_s(), elapsed = 0;
  do {
    for (int s = 0; s < 3; s++)
      for (int r = 0; r < counts[s]; r++) {
        const struct gemm_shape *g = &shapes[s];
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)g->m, (int)g->n, (int)g->k,
                    1.0f, a, (int)g->k, b, (int)g->n, 0.0f, c, (int)g->n);
        flops += 2.0 * (double)g->m * (double)g->n * (double)g->k;
      }
    elapsed = now_s() - start;
  } while (elapsed < o->seconds);
  free(a);
  free(b);
  free(c);
  return flops / elapsed / 1e12;
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

/* TFLOP/s of one decoder layer's forward + backward (3 x the forward's
 * FLOPs) on one sequence of --tokens tokens through kernels/cpu/. */
static double measure_layer_tflops(const struct options *o) {
  struct hxk_dims d = {.dim = (int)o->hidden, .ffn = (int)o->ffn, .heads = (int)o->heads,
                       .kv_heads = (int)o->heads, .vocab = 256, .seq_len = (int)o->tokens,
                       .layers = 1, .norm_eps = 1e-5f, .rope_theta = 10000.0};
  struct hxk_shard s;
  if (!hxk_dims_check(&d) || !hxk_shard_make(&d, 0, d.heads, 0, d.ffn, &s)) {
    fprintf(stderr, "hexic-profile: not a valid layer shape\n");
    exit(2);
  }
  float *rope = floats(hxk_rope_table_floats(&d));
  int *kv_of = calloc((size_t)d.heads, sizeof *kv_of);
  hxk_rope_table(rope, &d);
  hxk_kv_map(kv_of, &d, &s);
  struct hxk_layer_ctx ctx = {.dims = &d, .shard = &s, .rope = rope, .kv_of = kv_of};
  long lf = hxk_layer_floats(&d, &s), nd = o->tokens * o->hidden;
  float *w = floats(lf), *g = floats(lf), *x = floats(nd), *y = floats(nd), *dx = floats(nd);
  float *acts = floats(hxk_layer_acts_floats(&ctx, 1));
  float *scratch = floats(hxk_layer_scratch_floats(&ctx, 1));
  struct hxk_layer_params lw, lg;
  hxk_layer_bind(&lw, w, &d, &s);
  hxk_layer_bind(&lg, g, &d, &s);
  float *tensors[HXK_LAYER_NPARAMS] = {lw.attn_norm, lw.wq,     lw.wk,   lw.wv,    lw.wo,
                                       lw.mlp_norm,  lw.w_gate, lw.w_up, lw.w_down};
  for (int j = 0; j < HXK_LAYER_NPARAMS; j++)
    hxk_init_param(tensors[j], &d, &s, 1, (enum hxk_param)j, 0);
  for (long i = 0; i < nd; i++)
    x[i] = (float)((i * 7919) % 13) * 0.05f - 0.3f;
  double flops = 0, start = now_s(), elapsed = 0;
  do {
    hxk_layer_forward(&ctx, &lw, x, y, acts, scratch, 1);
    hxk_layer_backward(&ctx, &lw, &lg, y, dx, acts, scratch, 1);
    flops += 3 * layer_fwd_flops_per_token(o) * (double)o->tokens;
    elapsed = now_s() - start;
  } while (elapsed < o->seconds);
  float *buffers[] = {rope, w, g, x, y, dx, acts, scratch};
  for (size_t i = 0; i < sizeof buffers / sizeof *buffers; i++)
    free(buffers[i]);
  free(kv_of);
  return flops / elapsed / 1e12;
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

static long long device_memory_bytes(int gpus) {
  long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  long long total = pages > 0 && page > 0 ? (long long)pages * page : 1LL << 33;
  return total / gpus;
}

static void write_cluster(FILE *f, const struct options *o, int gpus, double tflops,
                          double efficiency, double mem_bw, const struct link_figures *link) {
  fprintf(f,
          "# Measured by hexic-profile (--hidden %ld --ffn %ld --heads %ld --tokens %ld, OpenBLAS "
          "on 1 thread).\n",
          o->hidden, o->ffn, o->heads, o->tokens);
  /* fixed-point figures: the .hx lexer reads them whatever their size */
  fprintf(f,
          "gpu \"%s\" { tflops = %.6f; memory = %lld MiB; efficiency = %.3f; mem_bandwidth = %.1f "
          "MB/s }\n",
          o->name, tflops > 1e-6 ? tflops : 1e-6, device_memory_bytes(gpus) >> 20, efficiency,
          mem_bw / 1e6);
  if (link)
    fprintf(f, "node \"host\" { gpu = \"%s\"; gpus = %d; bandwidth = %.1f MB/s; latency = %.3f us }\n",
            o->name, gpus, link->bandwidth / 1e6, link->latency_s * 1e6);
  else
    fprintf(f, "node \"host\" { gpu = \"%s\"; gpus = %d; bandwidth = %.1f MB/s }\n", o->name, gpus,
            mem_bw / 1e6);
  if (link)
    fprintf(f, "network { bandwidth = %.1f MB/s; latency = %.3f us }\n", link->bandwidth / 1e6,
            link->latency_s * 1e6);
}

int main(int argc, char **argv) {
  struct options o;
  int rc = parse_options(argc, argv, &o);
  if (rc)
    return rc;
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
  double tflops = 0, layer_tflops = 0, mem_bw = 0;
  if (rank != 0) /* idle while rank 0 measures: asleep, not polling a core away from it */
    sleep_through_barrier();
  if (rank == 0) {
    tflops = measure_gemm_tflops(&o);
    layer_tflops = measure_layer_tflops(&o);
    mem_bw = measure_mem_bandwidth(&o);
    MPI_Request req; /* matches the others' MPI_Ibarrier (a blocking one would not) */
    MPI_Ibarrier(MPI_COMM_WORLD, &req);
    MPI_Wait(&req, MPI_STATUS_IGNORE);
  }
  struct link_figures link = {0, 0};
  if (size >= 2)
    link = measure_link(rank, &o);
  if (rank == 0) {
    /* the layer's share of the sgemm rate, within hexic's (0, 1] */
    double efficiency = tflops > 0 ? layer_tflops / tflops : 1;
    efficiency = efficiency > 1 ? 1 : efficiency < 0.001 ? 0.001 : efficiency;
    write_cluster(f, &o, o.gpus > 0 ? o.gpus : size, tflops, efficiency, mem_bw,
                  size >= 2 ? &link : NULL);
    if ((f != stdout && fclose(f) != 0) || (f == stdout && fflush(f) != 0)) {
      fprintf(stderr, "hexic-profile: cannot write the output\n");
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
    fprintf(stderr,
            "hexic-profile: sgemm %.2f GFLOP/s, layer fwd+bwd %.2f GFLOP/s (efficiency %.3f), "
            "memory %.2f GB/s%s",
            tflops * 1e3, layer_tflops * 1e3, efficiency, mem_bw / 1e9, size >= 2 ? "" : "\n");
    if (size >= 2)
      fprintf(stderr, ", MPI %.1f MB/s, %.2f us\n", link.bandwidth / 1e6, link.latency_s * 1e6);
  }
  MPI_Finalize();
  return 0;
}
