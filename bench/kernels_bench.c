/* Forward + backward time of the tiny model (layers 4, hidden 64, ffn 176,
 * heads 4, kv 2, vocab 256, seq 64, 8 sequences) on one CPU process, with the
 * kernels of kernels/cpu/llama.h. Not a test: it prints milliseconds per step.
 *
 *   cmake -S . -B build-bench -DCMAKE_BUILD_TYPE=Release -DHEXIC_TESTS=OFF
 *   cmake --build build-bench --target kernels_bench
 *   OPENBLAS_NUM_THREADS=1 build-bench/kernels_bench [steps] [recompute 0|1]
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernels/cpu/llama.h"

enum { NSEQ = 8 };

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static float *alloc_floats(long n) {
  float *p = calloc((size_t)n, sizeof *p);
  if (!p) {
    perror("calloc");
    exit(1);
  }
  return p;
}

int main(int argc, char **argv) {
  int steps = argc > 1 ? atoi(argv[1]) : 20;
  bool recompute = argc > 2 && atoi(argv[2]) != 0;
  struct hxk_dims d = {.dim = 64, .ffn = 176, .heads = 4, .kv_heads = 2,
                       .vocab = 256, .seq_len = 64, .layers = 4,
                       .norm_eps = 1e-5f, .rope_theta = 10000.0};
  struct hxk_shard s;
  if (!hxk_dims_check(&d) || !hxk_shard_make(&d, 0, 4, 0, 176, &s))
    return 1;
  float *rope = alloc_floats(hxk_rope_table_floats(&d));
  int kv_of[4];
  hxk_rope_table(rope, &d);
  hxk_kv_map(kv_of, &d, &s);
  struct hxk_layer_ctx ctx = {
      .dims = &d, .shard = &s, .rope = rope, .kv_of = kv_of, .recompute = recompute};
  long n = NSEQ * (long)d.seq_len, nd = n * d.dim;
  long lf = hxk_layer_floats(&d, &s), vd = (long)d.vocab * d.dim;

  float *w = alloc_floats(d.layers * lf), *g = alloc_floats(d.layers * lf);
  float *emb = alloc_floats(vd), *demb = alloc_floats(vd);
  float *norm = alloc_floats(d.dim), *dnorm = alloc_floats(d.dim);
  float *lm = alloc_floats(vd), *dlm = alloc_floats(vd);
  struct hxk_layer_params lw[4], lg[4];
  for (int l = 0; l < d.layers; l++) {
    hxk_layer_bind(&lw[l], w + l * lf, &d, &s);
    hxk_layer_bind(&lg[l], g + l * lf, &d, &s);
    float *tensors[HXK_LAYER_NPARAMS] = {
        lw[l].attn_norm, lw[l].wq,     lw[l].wk,   lw[l].wv,    lw[l].wo,
        lw[l].mlp_norm,  lw[l].w_gate, lw[l].w_up, lw[l].w_down};
    for (int j = 0; j < HXK_LAYER_NPARAMS; j++)
      hxk_init_param(tensors[j], &d, &s, 1, (enum hxk_param)j, l);
  }
  hxk_init_param(emb, &d, &s, 1, HXK_TOK_EMB, 0);
  hxk_init_param(norm, &d, &s, 1, HXK_FINAL_NORM, 0);
  hxk_init_param(lm, &d, &s, 1, HXK_LM_HEAD, 0);

  int32_t *tok = malloc((size_t)(n + 1) * sizeof *tok);
  for (long i = 0; i <= n; i++)
    tok[i] = (int32_t)(hxk_splitmix64((uint64_t)i) % (uint64_t)d.vocab);
  long acts_floats = hxk_layer_acts_floats(&ctx, NSEQ);
  float *acts = alloc_floats(d.layers * acts_floats);
  float *scratch = alloc_floats(hxk_layer_scratch_floats(&ctx, NSEQ));
  float *head_scratch = alloc_floats(hxk_head_scratch_floats(&d, n));
  float *xs = alloc_floats((d.layers + 1) * nd);
  float *dx = alloc_floats(nd), *dy = alloc_floats(nd);
  struct hxk_head_params hw = {norm, lm}, hg = {dnorm, dlm};

  double total = 0.0, loss = 0.0;
  for (int step = -2; step < steps; step++) { /* two warm-up steps */
    double t0 = now_ms();
    hxk_embedding_forward(xs, tok, emb, n, d.dim);
    for (int l = 0; l < d.layers; l++)
      hxk_layer_forward(&ctx, &lw[l], xs + l * nd, xs + (l + 1) * nd,
                        acts + l * acts_floats, scratch, NSEQ);
    memset(dy, 0, (size_t)nd * sizeof *dy);
    loss = hxk_head_forward_backward(&d, &hw, &hg, xs + d.layers * nd, tok + 1,
                                     n, 1.0 / n, dy, head_scratch);
    for (int l = d.layers - 1; l >= 0; l--) {
      hxk_layer_backward(&ctx, &lw[l], &lg[l], dy, dx, acts + l * acts_floats,
                         scratch, NSEQ);
      float *swap = dy;
      dy = dx, dx = swap;
    }
    hxk_embedding_backward(demb, tok, dy, n, d.dim);
    if (step >= 0)
      total += now_ms() - t0;
  }
  printf("tiny model fwd+bwd: %.2f ms/step over %d steps (%s), %.0f tokens/s, "
         "loss %.4f\n",
         total / steps, steps, recompute ? "recompute" : "no recompute",
         n * steps / (total / 1e3), loss);
  float *buffers[] = {rope, w,       g,       emb,          demb,
                      norm, dnorm,   lm,      dlm,          acts,
                      scratch, head_scratch, xs, dx,        dy};
  for (size_t i = 0; i < sizeof buffers / sizeof *buffers; i++)
    free(buffers[i]);
  free(tok);
  return 0;
}
