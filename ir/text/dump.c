/* Stable text dumps of the AST, the model and the cluster for --print-ir,
 * --print-after and the golden tests: fixed number formats, source order,
 * never a pointer. */
#include <inttypes.h>
#include <string.h>

#include "dump.h"
#include "ir/units.h"

/* Indexed by the enums of ir/model.h (get_choice returns the index). */
const char *const hx_precision_names[] = {[HX_PREC_BF16] = "bf16", [HX_PREC_FP32] = "fp32", NULL};
const char *const hx_recompute_names[] = {[HX_RECOMPUTE_NONE] = "none", [HX_RECOMPUTE_FULL] = "full",
                                          [HX_RECOMPUTE_AUTO] = "auto", NULL};
const char *const hx_optimizer_names[] = {[HX_OPT_ADAMW] = "adamw", [HX_OPT_SGD] = "sgd", NULL};
const char *const hx_schedule_names[] = {[HX_PP_1F1B] = "1f1b", [HX_PP_GPIPE] = "gpipe", NULL};
const char *const hx_sharding_names[] = {[HX_SHARD_NONE] = "none", [HX_SHARD_ZERO1] = "zero1", NULL};

/* ------------------------------------------------------------------ AST */

static void dump_loc(struct location loc, FILE *f) {
  if (loc.src)
    fprintf(f, "  # %s:%d:%d", loc.src->name, loc.line, loc.col);
  fputc('\n', f);
}

static void dump_string(const char *s, FILE *f) {
  fputc('"', f);
  for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
    if (*p == '"' || *p == '\\')
      fprintf(f, "\\%c", *p);
    else if (*p == '\n')
      fputs("\\n", f);
    else if (*p == '\t')
      fputs("\\t", f);
    else if (*p < 32 || *p == 127)
      fprintf(f, "\\x%02x", *p);
    else
      fputc(*p, f);
  }
  fputc('"', f);
}

static const char *base_unit(enum hx_unit_kind k) {
  return k == HX_UNIT_BYTES ? "bytes" : k == HX_UNIT_BANDWIDTH ? "bytes/s" : k == HX_UNIT_TIME ? "s" : "";
}

static void dump_value(const struct hx_value *v, FILE *f) {
  switch (v->kind) {
  case HX_V_NUMBER: {
    if (v->overflow) {
      fputs("<out of range>", f);
    } else if (v->unit != HX_UNIT_NONE) {
      enum hx_unit_kind kind;
      double scale = 1;
      hx_unit_lookup(v->unit_text, &kind, &scale);
      fprintf(f, "%.10g %s = %.10g %s", v->number / scale, v->unit_text, v->number, base_unit(v->unit));
    } else if (v->is_integer) {
      fprintf(f, "%" PRId64, v->integer);
    } else {
      fprintf(f, "%.10g", v->number);
    }
    break;
  }
  case HX_V_STRING:
    dump_string(v->text, f);
    break;
  case HX_V_IDENT:
    fputs(v->text, f);
    break;
  case HX_V_LIST:
    fputc('[', f);
    for (int i = 0; i < v->nitems; i++) {
      if (i)
        fputs(", ", f);
      dump_value(&v->items[i], f);
    }
    fputc(']', f);
    break;
  }
}

void hx_dump_ast(const struct hx_ctx *ctx, FILE *f) {
  for (const struct hx_block *b = ctx->ast.first; b; b = b->next) {
    fputs(hx_block_keywords[b->kind], f);
    if (b->name) {
      fputc(' ', f);
      dump_string(b->name, f);
    }
    if (b->name2) {
      fputc(' ', f);
      dump_string(b->name2, f);
    }
    dump_loc(b->loc, f);
    for (const struct hx_field *fl = b->fields; fl; fl = fl->next) {
      fprintf(f, "  %s = ", fl->name);
      dump_value(&fl->value, f);
      dump_loc(fl->loc, f);
    }
  }
}

/* ---------------------------------------------------------------- model */

static void dump_model_fields(const struct hx_model *m, FILE *f) {
  fputs("model ", f);
  dump_string(m->name, f);
  dump_loc(m->loc, f);
  fprintf(f, "  layers %" PRId64 "\n  hidden %" PRId64 "\n  ffn %" PRId64 "\n", m->layers, m->hidden, m->ffn);
  fprintf(f, "  heads %" PRId64 "\n  kv_heads %" PRId64 "\n  vocab %" PRId64 "\n  seq_len %" PRId64 "\n", m->heads,
          m->kv_heads, m->vocab, m->seq_len);
  fprintf(f, "  rope_theta %.10g\n  norm_eps %.10g\n  tie_embeddings %s\n", m->rope_theta, m->norm_eps,
          m->tie_embeddings ? "true" : "false");
  if (m->rope_factor > 0) /* only then: unscaled models' dumps are as before */
    fprintf(f, "  rope_scaling llama3 factor %.10g low_freq_factor %.10g high_freq_factor %.10g "
               "original_max_len %lld\n",
            m->rope_factor, m->rope_low_freq_factor, m->rope_high_freq_factor,
            (long long)m->rope_original_max_len);
  fprintf(f, "  head_dim %" PRId64 "\n", m->head_dim);
  fprintf(f, "  params_layer %" PRId64 "\n  params_embedding %" PRId64 "\n  params_head %" PRId64 "\n",
          m->params_layer, m->params_embedding, m->params_head);
  fprintf(f, "  params_final_norm %" PRId64 "\n  params_total %" PRId64 "\n", m->params_final_norm, m->params_total);
  fprintf(f, "  flops_layer_fwd %.10g\n  flops_embedding_fwd %.10g\n  flops_head_fwd %.10g\n", m->flops_layer_fwd,
          m->flops_embedding_fwd, m->flops_head_fwd);
  fprintf(f, "  act_bytes_layer %.10g\n  act_bytes_layer_recompute %.10g\n  act_bytes_head %.10g\n",
          m->act_bytes_layer, m->act_bytes_layer_recompute, m->act_bytes_head);
}

static void dump_train(const struct hx_train *t, FILE *f) {
  fputs("train", f);
  dump_loc(t->loc, f);
  fprintf(f, "  global_batch %" PRId64 "\n  micro_batch %" PRId64 "%s\n", t->global_batch, t->micro_batch,
          t->micro_batch ? "" : " (the planner chooses)");
  fprintf(f, "  precision %s\n  recompute %s\n  optimizer %s\n  schedule %s\n", hx_precision_names[t->precision],
          hx_recompute_names[t->recompute], hx_optimizer_names[t->optimizer], hx_schedule_names[t->schedule]);
  fprintf(f, "  optimizer_sharding %s\n", hx_sharding_names[t->optimizer_sharding]);
  fprintf(f, "  lr %.10g\n  beta1 %.10g\n  beta2 %.10g\n  eps %.10g\n  weight_decay %.10g\n  grad_clip %.10g\n", t->lr,
          t->beta1, t->beta2, t->eps, t->weight_decay, t->grad_clip);
  fprintf(f, "  warmup_steps %" PRId64 "\n  steps %" PRId64 "\n  seed %" PRId64 "\n", t->warmup_steps, t->steps,
          t->seed);
  fputs("  data ", f);
  if (t->data)
    dump_string(t->data, f);
  else
    fputs("(synthetic tokens)", f);
  fprintf(f, "\n  checkpoint_every %" PRId64 "\n  checkpoint_dir ", t->checkpoint_every);
  dump_string(t->checkpoint_dir ? t->checkpoint_dir : "", f);
  fputc('\n', f);
}

void hx_dump_model(const struct hx_ctx *ctx, FILE *f) {
  if (ctx->has_model)
    dump_model_fields(&ctx->model, f);
  else
    fputs("model (none)\n", f);
  if (ctx->has_train)
    dump_train(&ctx->train, f);
  else
    fputs("train (none)\n", f);
}

/* -------------------------------------------------------------- cluster */

/* The TP model of a GPU type (issue 18): its efficiency curve over degrees
 * 1, 2, 4, ... and the per-layer overhead TP does not shrink. */
static void dump_tp_model(const struct hx_gpu_type *g, FILE *f) {
  fputs("  tp_efficiency [", f);
  for (int k = 0; k < g->ntp_efficiency; k++)
    fprintf(f, "%s%.10g", k ? ", " : "", g->tp_efficiency[k]);
  fprintf(f, "] layer_overhead %.10g us\n", g->layer_overhead * 1e6);
}

static void dump_list(const char *name, const double *v, int n, double scale, FILE *f) {
  fprintf(f, " %s [", name);
  for (int i = 0; i < n; i++)
    fprintf(f, "%s%.10g", i ? ", " : "", v[i] * scale);
  fputc(']', f);
}

static void dump_profile(const struct hx_cluster *c, const struct hx_profile *p, FILE *f) {
  fputs("profile ", f);
  dump_string(c->gpus[p->gpu_type].name, f);
  fprintf(f, " tp %d micro_batch [", p->tp);
  for (int i = 0; i < p->npoints; i++)
    fprintf(f, "%s%" PRId64, i ? ", " : "", p->micro_batch[i]);
  fputc(']', f);
  dump_list("forward_ms", p->fwd_s, p->npoints, 1e3, f);
  dump_list("backward_ms", p->bwd_s, p->npoints, 1e3, f);
  dump_list("memory_bytes", p->act_bytes, p->npoints, 1, f);
  dump_loc(p->loc, f);
}

static void dump_gpus_nodes_links(const struct hx_cluster *c, FILE *f) {
  for (int i = 0; i < c->ngpus; i++) {
    const struct hx_gpu_type *g = &c->gpus[i];
    fputs("gpu ", f);
    dump_string(g->name, f);
    fprintf(f, " tflops %.10g memory %" PRId64 " (%.2f GiB) mem_bandwidth %.10g GB/s efficiency %.10g", g->tflops,
            g->memory_bytes, (double)g->memory_bytes / (1024.0 * 1024 * 1024), g->mem_bandwidth / 1e9, g->efficiency);
    dump_loc(g->loc, f);
    dump_tp_model(g, f);
  }
  for (int i = 0; i < c->nprofiles; i++)
    dump_profile(c, &c->profiles[i], f);
  for (int i = 0; i < c->nnodes; i++) {
    const struct hx_node *n = &c->nodes[i];
    fputs("node ", f);
    dump_string(n->name, f);
    fprintf(f, " replica %d of ", n->replica);
    dump_string(n->base_name, f);
    fprintf(f, " gpu ");
    dump_string(n->gpu_type >= 0 ? c->gpus[n->gpu_type].name : "?", f);
    fprintf(f, " gpus %d bandwidth %.10g GB/s latency %.10g us devices %d..%d", n->gpus, n->bandwidth / 1e9,
            n->latency * 1e6, n->first_device, n->first_device + n->gpus - 1);
    dump_loc(n->loc, f);
  }
  for (int i = 0; i < c->nlinks; i++) {
    const struct hx_link *l = &c->links[i];
    fputs("link ", f);
    dump_string(l->a, f);
    fputc(' ', f);
    dump_string(l->b, f);
    fprintf(f, " bandwidth %.10g GB/s latency %.10g us", l->bandwidth / 1e9, l->latency * 1e6);
    dump_loc(l->loc, f);
  }
  if (c->has_network) {
    fprintf(f, "network bandwidth %.10g GB/s latency %.10g us", c->network_bandwidth / 1e9, c->network_latency * 1e6);
    dump_loc(c->network_loc, f);
  }
  if (c->has_emulation_host) {
    fputs("emulation host ", f);
    dump_string(c->gpus[c->emulation_host].name, f);
    dump_loc(c->emulation_host_loc, f);
  }
}

static void dump_devices(const struct hx_cluster *c, FILE *f) {
  fprintf(f, "devices\n  %5s  %-16s %-12s %-12s %8s %10s\n", "rank", "name", "gpu", "node", "tflops", "memory");
  for (int r = 0; r < c->ndevices; r++) {
    const struct hx_device *d = &c->devices[r];
    const struct hx_gpu_type *g = &c->gpus[d->gpu_type];
    fprintf(f, "  %5d  %-16s %-12s %-12s %8.1f %6.2f GiB\n", d->rank, d->name, g->name, c->nodes[d->node].name,
            g->tflops, (double)g->memory_bytes / (1024.0 * 1024 * 1024));
  }
}

/* One matrix: scale turns bytes/s into GB/s or seconds into us. */
static void dump_matrix(const struct hx_cluster *c, const double *m, double scale, bool by_node, FILE *f) {
  int n = by_node ? c->nnodes : c->ndevices;
  fputs("      ", f);
  for (int j = 0; j < n; j++)
    fprintf(f, " %9d", j);
  fputc('\n', f);
  for (int i = 0; i < n; i++) {
    fprintf(f, "%6d", i);
    for (int j = 0; j < n; j++) {
      /* By node: cell (i, j) is between the nodes' first GPUs; the diagonal
       * is the node's own figure (or '-' for a single-GPU node). */
      int a = by_node ? c->nodes[i].first_device : i;
      int b = by_node ? c->nodes[j].first_device + (i == j && c->nodes[j].gpus > 1) : j;
      if (a == b)
        fprintf(f, " %9s", "-");
      else
        fprintf(f, " %9.4g", m[(long)a * c->ndevices + b] * scale);
    }
    fputc('\n', f);
  }
}

enum { FULL_TABLE_MAX = 64 };

void hx_dump_cluster(const struct hx_ctx *ctx, FILE *f) {
  const struct hx_cluster *c = &ctx->cluster;
  fprintf(f, "cluster %d gpu types, %d nodes, %d devices\n", c->ngpus, c->nnodes, c->ndevices);
  dump_gpus_nodes_links(c, f);
  dump_devices(c, f);
  if (!c->bandwidth) {
    fputs("table (not built yet: see --print-after=cluster-table)\n", f);
    return;
  }
  bool by_node = c->ndevices > FULL_TABLE_MAX;
  const char *what = by_node ? "node x node, between the nodes' first devices" : "device x device";
  fprintf(f, "bandwidth GB/s (%s)\n", what);
  dump_matrix(c, c->bandwidth, 1e-9, by_node, f);
  fprintf(f, "latency us (%s)\n", what);
  dump_matrix(c, c->latency, 1e6, by_node, f);
}
