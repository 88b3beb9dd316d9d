/* plan.json: the plan, its simulated figures and both baselines. The layout is
 * documented in docs/plan-json.md; passes/planload/plan_load.c reads it back. Deterministic:
 * fixed key order, numbers through hx_json_number. */
#include <math.h>

#include "ir/text/json.h"
#include "ir/plan_util.h"
#include "codegen.h"
#include "passes/cost/cost.h"

static void write_ints(FILE *f, const int *v, int n) {
  fputc('[', f);
  for (int i = 0; i < n; i++)
    fprintf(f, "%s%d", i ? ", " : "", v[i]);
  fputc(']', f);
}

static void write_ints32(FILE *f, const int32_t *v, int n) {
  fputc('[', f);
  for (int i = 0; i < n; i++)
    fprintf(f, "%s%d", i ? ", " : "", (int)v[i]);
  fputc(']', f);
}

static void write_key(FILE *f, const char *indent, const char *key) {
  fputs(indent, f);
  hx_json_string(f, key);
  fputs(": ", f);
}

static void write_device(const struct hx_ctx *ctx, const struct hx_plan *p, int r, FILE *f) {
  const struct hx_cluster *c = &ctx->cluster;
  const struct hx_device *d = &c->devices[r];
  const struct hx_device_plan *dp = &p->devices[r];
  fprintf(f, "    {\"rank\": %d, \"name\": ", r);
  hx_json_string(f, d->name);
  fputs(", \"gpu\": ", f);
  hx_json_string(f, c->gpus[d->gpu_type].name);
  fputs(", \"node\": ", f);
  hx_json_string(f, c->nodes ? c->nodes[d->node].name : "");
  fprintf(f, ", \"memory_bytes\": %lld, \"pipeline\": %d, \"stage\": %d, \"tp_rank\": %d",
          (long long)c->gpus[d->gpu_type].memory_bytes, dp->pipeline, dp->stage, dp->tp_rank);
  fputs(", \"seq\": [", f);
  for (int k = 0; k < dp->nseq; k++)
    fprintf(f, "%s[%lld, %lld]", k ? ", " : "", (long long)dp->seq[k].begin,
            (long long)dp->seq[k].end);
  fprintf(f, "], \"heads\": [%lld, %lld]}", (long long)dp->heads.begin, (long long)dp->heads.end);
}

static void write_stage(const struct hx_stage *st, FILE *f) {
  fputs("        {\"ranks\": ", f);
  write_ints(f, st->devices, st->ndevices);
  fprintf(f, ", \"tp\": %d, \"cp\": %d, \"hp\": %d, \"layers\": [%d, %d], \"leader\": %d, "
             "\"recompute\": %s}",
          st->tp, st->cp, st->hp, st->layer_begin, st->layer_end, st->leader,
          st->recompute ? "true" : "false");
}

static void write_pipelines(const struct hx_plan *p, FILE *f) {
  fputs("  \"pipelines\": [\n", f);
  for (int i = 0; i < p->npipelines; i++) {
    const struct hx_pipeline *pl = &p->pipelines[i];
    fprintf(f, "    {\"micro_batches\": %lld, \"micro_batch_size\": %lld, \"stages\": [\n",
            (long long)pl->micro_batches, (long long)pl->micro_batch_size);
    for (int s = 0; s < pl->nstages; s++) {
      write_stage(&pl->stages[s], f);
      fputs(s + 1 < pl->nstages ? ",\n" : "\n", f);
    }
    fprintf(f, "    ]}%s\n", i + 1 < p->npipelines ? "," : "");
  }
  fputs("  ],\n", f);
}

static void write_groups(const struct hx_plan *p, FILE *f) {
  fputs("  \"groups\": [", f);
  for (int g = 0; g < p->ngroups; g++) {
    const struct hx_group *gr = &p->groups[g];
    fprintf(f, "%s\n    {\"kind\": \"%s\", \"ranks\": ", g ? "," : "", hx_group_kind_name(gr->kind));
    write_ints(f, gr->ranks, gr->nranks);
    fprintf(f, ", \"layers\": [%d, %d], \"slice\": %d, \"nslices\": %d", gr->layer_begin,
            gr->layer_end, gr->slice, gr->nslices);
    if (gr->split_table) {
      fputs(", \"split_table\": [", f);
      for (long k = 0; k < (long)gr->nranks * gr->nranks; k++)
        fprintf(f, "%s%lld", k ? ", " : "", (long long)gr->split_table[k]);
      fputc(']', f);
    }
    if (gr->shard_ppm) { /* ZeRO-1: each member's share of the optimizer state */
      fputs(", \"optimizer_shards\": ", f);
      write_ints32(f, gr->shard_ppm, gr->nranks);
    }
    fputc('}', f);
  }
  fputs(p->ngroups ? "\n  ],\n" : "],\n", f);
}

/* The figures of a simulated plan, as the members of an object. */
static void write_figures(const struct hx_plan *p, FILE *f, const char *in) {
  const struct hx_sim_result *r = &p->sim;
  const char *names[] = {"iteration_s", "tokens_per_s", "mfu",        "bubble",
                         "pipeline_s",  "compute_s",    "grad_sync_s", "optimizer_s"};
  double values[] = {r->iteration_s, r->tokens_per_s, r->mfu,        r->bubble,
                     r->pipeline_s,  r->compute_s,    r->grad_sync_s, r->optimizer_s};
  for (size_t k = 0; k < sizeof values / sizeof values[0]; k++) {
    write_key(f, in, names[k]);
    hx_json_number(f, values[k]);
    fputs(",\n", f);
  }
  write_key(f, in, "busy_s");
  fputc('[', f);
  for (int d = 0; d < p->ndevices; d++) {
    fputs(d ? ", " : "", f);
    hx_json_number(f, r->busy_s[d]);
  }
  fputs("],\n", f);
  write_key(f, in, "peak_memory_bytes");
  fputc('[', f);
  for (int d = 0; d < p->ndevices; d++) {
    fputs(d ? ", " : "", f);
    hx_json_number(f, floor(r->peak_memory[d]));
  }
  fputs("]\n", f);
}

/* "memory_by_kind": per rank, the bytes its device holds at its peak by
 * the runtime's kinds (hx_rank_memory_by_kind), which a run's
 * --memory-report gives measured in the same shape. */
static void write_memory_by_kind(const struct hx_ctx *ctx, const struct hx_plan *p, FILE *f) {
  fputs("  \"memory_by_kind\": [", f);
  for (int r = 0; r < p->ndevices; r++) {
    double bytes[HX_MEM_NKINDS];
    hx_rank_memory_by_kind(ctx, p, r, bytes);
    fputs(r ? ",\n    {" : "\n    {", f);
    for (int k = 0; k < HX_MEM_NKINDS; k++) {
      fprintf(f, "%s\"%s\": ", k ? ", " : "", hx_mem_kind_names[k]);
      hx_json_number(f, floor(bytes[k]));
    }
    fputc('}', f);
  }
  fputs(p->ndevices ? "\n  ],\n" : "],\n", f);
}

/* A symmetric baseline as `key`: its config, the ranks it uses (the subset
 * one only: the all-device one uses every rank) and its figures; null when
 * none fits. */
static void write_baseline(const struct hx_plan *b, const char *key, bool with_devices, FILE *f) {
  write_key(f, "  ", key);
  if (!b || !b->sim.valid) {
    fputs("null", f);
    return;
  }
  fputs("{\n    \"config\": ", f);
  hx_json_string(f, b->description);
  fputs(",\n", f);
  if (with_devices) {
    write_key(f, "    ", "devices");
    const char *sep = "[";
    for (int r = 0; r < b->ndevices; r++)
      if (b->devices[r].pipeline >= 0) {
        fprintf(f, "%s%d", sep, r);
        sep = ", ";
      }
    fputs(*sep == '[' ? "[],\n" : "],\n", f);
  }
  write_figures(b, f, "    ");
  fputs("  }", f);
}

/* HexiSeq plans: every baseline compared against (Ring, Ulysses, USP,
 * symmetric), kind, configuration and figures. Absent for other plans, so
 * their plan.json is unchanged. */
static void write_baselines(const struct hx_plan *p, FILE *f) {
  if (p->nbaselines <= 0)
    return;
  fputs("  \"baselines\": [\n", f);
  for (int i = 0; i < p->nbaselines; i++) {
    const struct hx_plan *b = p->baselines[i];
    fputs("    {\n      \"kind\": ", f);
    hx_json_string(f, b->strategy);
    fputs(",\n      \"config\": ", f);
    hx_json_string(f, b->description);
    fputs(",\n", f);
    write_figures(b, f, "      ");
    fprintf(f, "    }%s\n", i + 1 < p->nbaselines ? "," : "");
  }
  fputs("  ],\n", f);
}

bool hx_emit_plan_json(const struct hx_ctx *ctx, FILE *f) {
  const struct hx_plan *p = ctx->plan;
  const struct hx_model *m = &ctx->model;
  fprintf(f, "{\n  \"hexic\": \"%s\",\n  \"model\": {\"name\": ", HEXIC_VERSION);
  hx_json_string(f, m->name);
  fprintf(f, ", \"parameters\": %lld, \"layers\": %lld, \"seq_len\": %lld, "
             "\"global_batch\": %lld},\n",
          (long long)m->params_total, (long long)m->layers, (long long)m->seq_len,
          (long long)ctx->train.global_batch);
  fputs("  \"strategy\": ", f);
  hx_json_string(f, p->strategy);
  fputs(",\n  \"description\": ", f);
  hx_json_string(f, p->description);
  fprintf(f,
          ",\n  \"schedule\": \"%s\",\n  \"train\": {\"optimizer_sharding\": \"%s\", "
          "\"sequence_parallel\": %s},\n",
          p->schedule == HX_PP_GPIPE ? "gpipe" : "1f1b",
          p->optimizer_sharding == HX_SHARD_ZERO1 ? "zero1" : "none",
          ctx->train.sequence_parallel ? "true" : "false");
  /* --target=cuda --cuda-attention=cudnn: what the Makefile builds in by
   * default (absent: hexic's kernels; not read back) */
  if (ctx->opt.target == HX_TARGET_CUDA && ctx->opt.cuda_attention == HX_CUDA_ATTN_CUDNN)
    fputs("  \"cuda_attention\": \"cudnn\",\n", f);
  fputs("  \"devices\": [\n", f);
  for (int r = 0; r < p->ndevices; r++) {
    write_device(ctx, p, r, f);
    fputs(r + 1 < p->ndevices ? ",\n" : "\n", f);
  }
  fputs("  ],\n", f);
  write_pipelines(p, f);
  write_groups(p, f);
  fputs("  \"simulated\": {\n", f);
  write_figures(p, f, "    ");
  fputs("  },\n", f);
  write_memory_by_kind(ctx, p, f);
  write_baselines(p, f);
  write_baseline(ctx->baseline, "baseline", false, f);
  fputs(",\n", f);
  write_baseline(ctx->baseline_subset, "baseline_subset", true, f);
  fputs("\n}\n", f);
  return !ferror(f);
}
