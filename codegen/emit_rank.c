/* rank_NNNN.c: one rank's role as a header comment, its part of the plan as
 * literal tables, and a main that hands them to the runtime. Written directly
 * in the .clang-format style (see codegen/programs.c). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "emit_programs.h"
#include "escape.h"
#include "ir/text/json.h"
#include "passes/cost/cost.h"

enum { COMMENT_WIDTH = 96 }; /* stay clear of ColumnLimit 100 so clang-format never reflows */

/* Shortest decimal that reads back as the same double, so the generated
 * constants are exact and stable. */
static void format_double(char *buf, size_t size, double v) {
  if (v == (double)(long long)v && v > -1e15 && v < 1e15) { /* 10000.0, not 1e+04 */
    snprintf(buf, size, "%.1f", v);
    return;
  }
  hx_shortest_double(buf, size, v);
}

/* A header-comment list "label: a, b, c" wrapped at COMMENT_WIDTH. */
static void comment_rank_list(FILE *f, const char *indent, const char *label, const int *ranks,
                              int n) {
  int col = fprintf(f, " *%s%s", indent, label);
  for (int i = 0; i < n; i++) {
    char item[24];
    int len = snprintf(item, sizeof item, "%d%s", ranks[i], i + 1 < n ? "," : "");
    if (col + 1 + len > COMMENT_WIDTH) {
      fputs("\n *       ", f);
      col = 9;
    } else {
      fputc(' ', f);
      col++;
    }
    fputs(item, f);
    col += len;
  }
  fputc('\n', f);
}

/* "group 3: layers [0, 2): norms, heads [0, 2), ffn [0, 88), kv [0, 1)". */
static const char *group_label(const struct program_set *set, const struct hx_prog_group *g,
                               int id) {
  struct hx_arena *a = hx_prog_arena(set);
  const char *text = hx_sprintf(a, "group %d:", id);
  const char *sep = " ";
  if (g->parts & PART_TOK_EMB)
    text = hx_sprintf(a, "%s%stok_emb", text, sep), sep = ", ";
  if (g->parts & (PART_NORMS | PART_HEADS | PART_FFN | PART_KV))
    text = hx_sprintf(a, "%s%slayers [%d, %d):", text, sep, g->layer_begin, g->layer_end),
    sep = " ";
  if (g->parts & PART_NORMS)
    text = hx_sprintf(a, "%s%snorms", text, sep), sep = ", ";
  if (g->parts & PART_HEADS)
    text = hx_sprintf(a, "%s%sheads [%d, %d)", text, sep, g->head_begin, g->head_end), sep = ", ";
  if (g->parts & PART_FFN)
    text = hx_sprintf(a, "%s%sffn [%d, %d)", text, sep, g->ffn_begin, g->ffn_end), sep = ", ";
  if (g->parts & PART_KV)
    text = hx_sprintf(a, "%s%skv [%d, %d)", text, sep, g->kv_begin, g->kv_end), sep = ", ";
  if (g->parts & PART_HEAD)
    text = hx_sprintf(a, "%s%sfinal_norm%s", text, sep,
                      set->ctx->model.tie_embeddings ? "" : " + lm_head");
  return text;
}

/* "device a800:0 (A800)", for comments only: the names are escaped for one. */
static const char *device_description(const struct program_set *set, int world_rank) {
  const struct hx_cluster *c = &set->ctx->cluster;
  const struct hx_device *dev = &c->devices[set->ranks[world_rank].device];
  struct hx_arena *a = hx_prog_arena(set);
  return hx_sprintf(a, "device %s (%s)", hx_esc_c_comment(a, dev->name),
                    hx_esc_c_comment(a, c->gpus[dev->gpu_type].name));
}

static const char *precision_text(const struct program_set *set) {
  bool bf16 = set->ctx->train.precision == HX_PREC_BF16;
  if (set->ctx->opt.target != HX_TARGET_CUDA)
    return "fp32 on CPU";
  return bf16 ? "bf16 on the GPU (fp32 master weights, gradients and AdamW moments)"
              : "fp32 on the GPU";
}

static double gib(double bytes) { return bytes / (1024.0 * 1024.0 * 1024.0); }

/* --target=cuda: the GPU the rank binds, the library it links, and what
 * its memory check compares. */
static void emit_gpu_comment(const struct program_set *set, FILE *f, int w) {
  const struct hx_cluster *c = &set->ctx->cluster;
  const struct hx_gpu_type *g = &c->gpus[c->devices[set->ranks[w].device].gpu_type];
  int arch = hx_rank_cuda_arch(set, w);
  fprintf(f, " *   GPU: %s, sm_%d (%s); kernels: libhexic_cuda_sm%d.a\n",
          hx_esc_c_comment(hx_prog_arena(set), g->name), arch,
          g->cuda_arch_given ? "its cuda_arch" : "known from its name", arch);
  fprintf(f, " *   memory: the plan assumes %.2f GiB of the GPU's %.2f GiB, checked at start\n",
          gib(set->memory_need[set->ranks[w].device]), gib((double)g->memory_bytes));
  if (set->ctx->opt.cuda_attention == HX_CUDA_ATTN_CUDNN)
    fputs(" *   attention: cuDNN's fused attention (--cuda-attention=cudnn; the Makefile's\n"
          " *     ATTENTION=hexic builds hexic's kernels instead)\n",
          f);
}

/* The position of cluster device d in plan group g, -1 when absent. */
static int group_position(const struct hx_group *g, int d) {
  for (int k = 0; k < g->nranks; k++)
    if (g->ranks[k] == d)
      return k;
  return -1;
}

/* The plan's CP ring or HP all-to-all group holding cluster device d (NULL
 * when none). */
static const struct hx_group *seq_group_of(const struct program_set *set, enum hx_group_kind kind,
                                           int d) {
  for (int g = 0; g < set->plan->ngroups; g++) {
    const struct hx_group *gr = &set->plan->groups[g];
    if (gr->kind == kind && group_position(gr, d) >= 0)
      return gr;
  }
  return NULL;
}

/* World ranks of a plan group (its ranks are cluster devices), in its order. */
static int *group_world_ranks(const struct program_set *set, const struct hx_group *g) {
  int *w = HX_NEW_ARRAY(hx_prog_arena(set), int, g->nranks);
  for (int k = 0; k < g->nranks; k++)
    w[k] = set->world_of_device[g->ranks[k]];
  return w;
}

/* "[410, 614) + [1433, 1638)": a device's token ranges of one sequence. */
static const char *ranges_text(const struct program_set *set, const struct hx_device_plan *d) {
  struct hx_arena *a = hx_prog_arena(set);
  const char *text = "";
  for (int i = 0; i < d->nseq; i++)
    text = hx_sprintf(a, "%s%s[%lld, %lld)", text, i ? " + " : "", (long long)d->seq[i].begin,
                      (long long)d->seq[i].end);
  return text;
}

static long long range_tokens(const struct hx_device_plan *d) {
  long long n = 0;
  for (int i = 0; i < d->nseq; i++)
    n += d->seq[i].end - d->seq[i].begin;
  return n;
}

/* A HexiSeq rank's share of each sequence: its unit, tokens, heads, ring and
 * all-to-all group. */
static void emit_seq_comment(const struct program_set *set, FILE *f, int w) {
  const struct hx_prog_rank *r = &set->ranks[w];
  const struct hx_device_plan *d = &set->plan->devices[r->device];
  const struct hx_model *m = &set->ctx->model;
  const struct hx_group *ring = seq_group_of(set, HX_GROUP_CP_RING, r->device);
  const struct hx_group *hp = seq_group_of(set, HX_GROUP_HP_A2A, r->device);
  fprintf(f,
          " *   HexiSeq: unit %d of %d of its stage; CP rank %d of %d (its HP group), "
          "HP rank %d of %d\n",
          r->unit, r->nunits, d->cp_rank, r->st->cp, d->hp_rank, hp ? hp->nranks : 1);
  fprintf(f, " *   tokens of every sequence: %s, %lld of %lld (global positions)\n",
          ranges_text(set, d), range_tokens(d), (long long)m->seq_len);
  fprintf(f, " *   attention: query heads [%lld, %lld) of the group's tokens (after the all-to-all)\n",
          (long long)d->heads.begin, (long long)d->heads.end);
  if (ring)
    comment_rank_list(f, "   ", "CP ring (K/V blocks go round in this order): ranks",
                      group_world_ranks(set, ring), ring->nranks);
  if (hp)
    comment_rank_list(f, "   ", "HP all-to-all group: ranks", group_world_ranks(set, hp),
                      hp->nranks);
  if (r->st->leader == r->device)
    comment_rank_list(f, "   ",
                      "stage leader: the hops' whole activations go by tokens to/from ranks",
                      r->unit_contacts, r->nunits);
}

static void emit_role_comment(const struct program_set *set, FILE *f, int w) {
  const struct hx_prog_rank *r = &set->ranks[w];
  const struct hx_model *m = &set->ctx->model;
  int mbs = (int)r->pl->micro_batch_size, nmb = (int)r->pl->micro_batches;
  fprintf(f, "/* rank_%04d.c: generated by hexic %s; do not edit.\n *\n", w, HEXIC_VERSION);
  fprintf(f, " * MPI rank %d of %d: %s.\n", w, set->nranks, device_description(set, w));
  fprintf(f, " *   pipeline %d of %d, stage %d of %d, TP rank %d of %d\n", r->pipeline,
          set->plan->npipelines, r->stage, r->pl->nstages, r->tp_rank, r->st->tp);
  fprintf(f, " *   decoder layers [%d, %d) of %lld\n", r->st->layer_begin, r->st->layer_end,
          (long long)m->layers);
  if (r->stage == 0)
    fputs(" *   holds the token embedding\n", f);
  if (r->stage == r->pl->nstages - 1)
    fputs(" *   holds the final norm and the LM head\n", f);
  fprintf(f, " *   %d micro-batches x %d sequences: global sequences [%d, %d) of each step\n", nmb,
          mbs, r->first_sequence, r->first_sequence + nmb * mbs);
  fprintf(f, " *   peers: previous stage leader %d, next stage leader %d (-1: none)\n",
          r->prev_leader, r->next_leader);
  if (r->st->tp == 1)
    fprintf(f, " *   TP group: rank %d alone\n", w);
  else
    comment_rank_list(
        f, "   ",
        hx_sprintf(hx_prog_arena(set), "TP group (leader TP rank %d): ranks", r->leader_tp_rank),
        r->tp_group, r->st->tp);
  fprintf(f, " *   shard: query heads [%d, %d) of %lld, ffn columns [%d, %d) of %lld\n",
          r->head_bounds[r->tp_rank], r->head_bounds[r->tp_rank + 1], (long long)m->heads,
          r->ffn_bounds[r->tp_rank], r->ffn_bounds[r->tp_rank + 1], (long long)m->ffn);
  if (r->st->seq_layout)
    emit_seq_comment(set, f, w);
  int mine = 0;
  for (int g = 0; g < set->ngroups; g++)
    mine += hx_group_has_rank(&set->groups[g], w);
  fputs(mine ? " *   gradient-sync groups:\n"
             : " *   gradient-sync groups: none (every tensor it holds has no other copy)\n",
        f);
  for (int g = 0; g < set->ngroups; g++)
    if (hx_group_has_rank(&set->groups[g], w)) {
      const char *label = group_label(set, &set->groups[g], g);
      comment_rank_list(f, "     ", hx_sprintf(hx_prog_arena(set), "%s; ranks", label),
                        set->groups[g].ranks, set->groups[g].nranks);
    }
  fprintf(f, " *   schedule: %s, %d activation slot%s; %s%s\n",
          set->plan->schedule == HX_PP_1F1B ? "1F1B" : "GPipe", r->activation_slots,
          r->activation_slots == 1 ? "" : "s", precision_text(set),
          r->st->recompute ? ", full activation recompute" : "");
  if (hx_stage_sequence_parallel(set->ctx, r->st))
    fputs(" *   sequence parallel: norms and residuals on this TP rank's rows\n", f);
  if (set->ctx->opt.target == HX_TARGET_CUDA)
    emit_gpu_comment(set, f, w);
  fputs(" */\n#include <stddef.h>\n\n#include \"hexic_rt.h\"\n", f);
  fputs(r->st->seq_layout ? "#include \"seq/rt_seq.h\"\n\n" : "\n", f);
}

static void emit_model(const struct program_set *set, FILE *f) {
  const struct hx_model *m = &set->ctx->model;
  char theta[40], eps[40];
  format_double(theta, sizeof theta, m->rope_theta);
  format_double(eps, sizeof eps, m->norm_eps);
  fprintf(f,
          "static const struct hx_rt_model model = {\n"
          "    .layers = %lld,\n    .hidden = %lld,\n    .ffn = %lld,\n    .heads = %lld,\n"
          "    .kv_heads = %lld,\n    .vocab = %lld,\n    .seq_len = %lld,\n"
          "    .rope_theta = %s,\n    .norm_eps = %s,\n    .tie_embeddings = %d,\n",
          (long long)m->layers, (long long)m->hidden, (long long)m->ffn, (long long)m->heads,
          (long long)m->kv_heads, (long long)m->vocab, (long long)m->seq_len, theta, eps,
          m->tie_embeddings ? 1 : 0);
  if (m->rope_factor > 0) { /* only then: an unscaled model's program is as before */
    char factor[40], low[40], high[40];
    format_double(factor, sizeof factor, m->rope_factor);
    format_double(low, sizeof low, m->rope_low_freq_factor);
    format_double(high, sizeof high, m->rope_high_freq_factor);
    fprintf(f,
            "    /* Llama 3's RoPE frequency scaling (rope_scaling = llama3) */\n"
            "    .rope_factor = %s,\n    .rope_low_freq_factor = %s,\n"
            "    .rope_high_freq_factor = %s,\n    .rope_original_max_len = %lld,\n",
            factor, low, high, (long long)m->rope_original_max_len);
  }
  fputs("};\n\n", f);
}

static void emit_double_field(FILE *f, const char *name, double v) {
  char buf[40];
  format_double(buf, sizeof buf, v);
  fprintf(f, "    .%s = %s,\n", name, buf);
}

static void emit_train(const struct program_set *set, FILE *f) {
  const struct hx_train *t = &set->ctx->train;
  fprintf(f, "static const struct hx_rt_train train = {\n    .global_batch = %lld,\n",
          (long long)t->global_batch);
  emit_double_field(f, "lr", t->lr);
  emit_double_field(f, "beta1", t->beta1);
  emit_double_field(f, "beta2", t->beta2);
  emit_double_field(f, "eps", t->eps);
  emit_double_field(f, "weight_decay", t->weight_decay);
  emit_double_field(f, "grad_clip", t->grad_clip);
  fprintf(f, "    .warmup_steps = %lld,\n    .steps = %lld,\n    .seed = %lld,\n    .data = ",
          (long long)t->warmup_steps, (long long)t->steps, (long long)t->seed);
  fputs(hx_esc_c_string(hx_prog_arena(set), t->data), f);
  fprintf(f, ",\n    .checkpoint_every = %lld,\n    .checkpoint_dir = ",
          (long long)t->checkpoint_every);
  fputs(hx_esc_c_string(hx_prog_arena(set), t->checkpoint_dir), f);
  fprintf(f, ",\n    .precision = %s,\n};\n\n",
          t->precision == HX_PREC_BF16 ? "HX_RT_BF16" : "HX_RT_FP32");
}

/* Lines "code // comment" with the comments aligned the way clang-format
 * aligns consecutive trailing comments: one column past the longest code. */
struct aligned {
  int n;
  const char **code, **comment;
};

static void put_aligned(FILE *f, const struct aligned *a) {
  size_t width = 0;
  for (int i = 0; i < a->n; i++)
    if (strlen(a->code[i]) > width)
      width = strlen(a->code[i]);
  for (int i = 0; i < a->n; i++)
    fprintf(f, "    %-*s // %s\n", (int)width, a->code[i], a->comment[i]);
}

static struct aligned new_aligned(const struct program_set *set, int capacity) {
  struct hx_arena *a = hx_prog_arena(set);
  return (struct aligned){0, HX_NEW_ARRAY(a, const char *, capacity),
                          HX_NEW_ARRAY(a, const char *, capacity)};
}

/* Does plan group pg (cluster devices) name exactly g's world ranks and
 * layer range? */
static bool plan_group_is(const struct program_set *set, const struct hx_group *pg,
                          const struct hx_prog_group *g) {
  if (pg->nranks != g->nranks || (pg->layer_begin < 0) != (g->layer_begin < 0) ||
      (pg->layer_begin >= 0 &&
       (pg->layer_begin != g->layer_begin || pg->layer_end != g->layer_end)))
    return false;
  for (int k = 0; k < pg->nranks; k++)
    if (!hx_group_has_rank(g, set->world_of_device[pg->ranks[k]]))
      return false;
  return true;
}

/* ZeRO-1: g's shares of the optimizer state (parts per million, in g's
 * increasing world-rank order) into out; false when the plan does not shard.
 * The shares are those of the plan's grad (else unsplit) group over the
 * same ranks and layers, reordered; a group of the programs that merges or
 * splits the plan's (the norms over every TP rank of the stages, the kv
 * heads, tok_emb and the head over every TP rank) splits evenly. */
static bool group_shards(const struct program_set *set, const struct hx_prog_group *g,
                         int32_t *out) {
  const struct hx_plan *plan = set->plan;
  if (plan->optimizer_sharding != HX_SHARD_ZERO1)
    return false;
  const struct hx_group *found = NULL;
  for (int i = 0; i < plan->ngroups; i++) {
    const struct hx_group *pg = &plan->groups[i];
    if (!pg->shard_ppm || (pg->kind != HX_GROUP_GRAD && pg->kind != HX_GROUP_UNSPLIT) ||
        !plan_group_is(set, pg, g))
      continue;
    if (!found || (found->kind != HX_GROUP_GRAD && pg->kind == HX_GROUP_GRAD))
      found = pg;
  }
  for (int i = 0; i < g->nranks; i++) {
    out[i] = 1000000 / g->nranks + (i < 1000000 % g->nranks);
    for (int k = 0; found && k < found->nranks; k++)
      if (set->world_of_device[found->ranks[k]] == g->ranks[i])
        out[i] = found->shard_ppm[k];
  }
  return true;
}

/* One table row per group, its label on the line above (a trailing comment
 * would push the row past the column limit). */
static void emit_groups(const struct program_set *set, FILE *f, int w, int *count) {
  struct hx_arena *arena = hx_prog_arena(set);
  int n = 0;
  for (int id = 0; id < set->ngroups; id++) {
    const struct hx_prog_group *g = &set->groups[id];
    if (!hx_group_has_rank(g, w))
      continue;
    n++;
    fprintf(f, "static const int group_%d_ranks[] = {\n", id);
    struct aligned members = new_aligned(set, g->nranks);
    for (int i = 0; i < g->nranks; i++) {
      members.code[members.n] = hx_sprintf(arena, "%d,", g->ranks[i]);
      members.comment[members.n++] = device_description(set, g->ranks[i]);
    }
    put_aligned(f, &members);
    fputs("};\n\n", f);
    int32_t *shards = HX_NEW_ARRAY(arena, int32_t, g->nranks);
    if (!group_shards(set, g, shards))
      continue;
    /* a row per member, as the ranks above: one line of them passes the
     * column limit from 8 members on, and clang-format would re-pack it */
    fprintf(f, "// ZeRO-1: each member's share of the optimizer state, parts per million\n"
               "static const int32_t group_%d_shards[] = {\n", id);
    struct aligned share = new_aligned(set, g->nranks);
    for (int i = 0; i < g->nranks; i++) {
      share.code[share.n] = hx_sprintf(arena, "%d,", shards[i]);
      share.comment[share.n++] = hx_sprintf(arena, "rank %d", g->ranks[i]);
    }
    put_aligned(f, &share);
    fputs("};\n\n", f);
  }
  *count = n;
  if (n == 0)
    return;
  bool sharded = set->plan->optimizer_sharding == HX_SHARD_ZERO1;
  fputs("// {id, parts, layers [b, e), heads [b, e), ffn [b, e), kv [b, e), nranks, ranks,\n"
        "//  shard_ppm (NULL: unsharded)}\n"
        "static const struct hx_rt_group groups[] = {\n",
        f);
  for (int id = 0; id < set->ngroups; id++) {
    const struct hx_prog_group *g = &set->groups[id];
    if (!hx_group_has_rank(g, w))
      continue;
    fprintf(f, "    // %s\n", group_label(set, g, id));
    char shards[32] = "NULL";
    if (sharded)
      snprintf(shards, sizeof shards, "group_%d_shards", id);
    fprintf(f, "    {%d, %u, %d, %d, %d, %d, %d, %d, %d, %d, %d, group_%d_ranks, %s},\n", id,
            g->parts, g->layer_begin, g->layer_end, g->head_begin, g->head_end, g->ffn_begin,
            g->ffn_end, g->kv_begin, g->kv_end, g->nranks, id, shards);
  }
  fputs("};\n\n", f);
}

/* The stage's TP tables: its ranks and its query-head / ffn boundaries. */
static void emit_tp_tables(const struct program_set *set, FILE *f, int w) {
  struct hx_arena *arena = hx_prog_arena(set);
  const struct hx_prog_rank *r = &set->ranks[w];
  int tp = r->st->tp;
  struct aligned ranks = new_aligned(set, tp);
  for (int k = 0; k < tp; k++) {
    ranks.code[ranks.n] = hx_sprintf(arena, "%d,", r->tp_group[k]);
    ranks.comment[ranks.n++] = hx_sprintf(arena, "TP rank %d: %s", k,
                                          device_description(set, r->tp_group[k]));
  }
  fputs("static const int tp_group[] = {\n", f);
  put_aligned(f, &ranks);
  fputs("};\n\n", f);
  fputs("static const int head_bounds[] = {\n", f);
  for (int k = 0; k <= tp; k++)
    fprintf(f, "    %d,\n", r->head_bounds[k]);
  fputs("};\n\nstatic const int ffn_bounds[] = {\n", f);
  for (int k = 0; k <= tp; k++)
    fprintf(f, "    %d,\n", r->ffn_bounds[k]);
  fputs("};\n\n", f);
}

/* The decimal digits of v into buf (no NUL); their count. */
static int put_int(char *buf, int v) {
  char tmp[16];
  unsigned u = v < 0 ? 0u - (unsigned)v : (unsigned)v;
  int n = 0, len = 0;
  do
    tmp[n++] = (char)('0' + u % 10);
  while ((u /= 10) != 0);
  if (v < 0)
    buf[len++] = '-';
  while (n > 0)
    buf[len++] = tmp[--n];
  return len;
}

/* "{OP, MB}," into buf (no NUL); its length. */
static int step_code(char *buf, const char *op, int micro_batch) {
  size_t op_len = strlen(op);
  int len = 0;
  buf[len++] = '{';
  memcpy(buf + len, op, op_len);
  len += (int)op_len;
  buf[len++] = ',';
  buf[len++] = ' ';
  len += put_int(buf + len, micro_batch);
  buf[len++] = '}';
  buf[len++] = ',';
  return len;
}

/* One schedule row as put_aligned writes it: "    CODE // COMMENT" with the
 * comment at column width. Built by hand: a rank lists one row per step,
 * millions over a large plan's ranks, where a formatted print and an arena
 * string a row cost more than the planning. */
static void put_step_row(FILE *f, const char *op, int micro_batch, const char *comment,
                         int width) {
  char row[128];
  memcpy(row, "    ", 4);
  int len = 4 + step_code(row + 4, op, micro_batch);
  while (len < 4 + width)
    row[len++] = ' ';
  size_t comment_len = strlen(comment);
  memcpy(row + len, " // ", 4);
  memcpy(row + len + 4, comment, comment_len);
  len += 4 + (int)comment_len;
  row[len++] = '\n';
  fwrite(row, 1, (size_t)len, f);
}

static void emit_schedule(const struct program_set *set, FILE *f, int w) {
  static const char *const ops[] = {"HX_RT_RECV_ACT",  "HX_RT_FORWARD",  "HX_RT_SEND_ACT",
                                    "HX_RT_RECV_GRAD", "HX_RT_BACKWARD", "HX_RT_SEND_GRAD"};
  static const char *const phases[] = {"warm-up", "steady 1F1B", "cool-down"};
  const struct hx_prog_rank *r = &set->ranks[w];
  char code[64];
  int width = step_code(code, "HX_RT_GRAD_SYNC", -1); /* the two rows after the steps */
  int optimizer = step_code(code, "HX_RT_OPTIMIZER", -1);
  width = optimizer > width ? optimizer : width;
  for (int i = 0; i < r->nsteps; i++) {
    int len = step_code(code, ops[r->steps[i].op], r->steps[i].micro_batch);
    width = len > width ? len : width;
  }
  fputs("static const struct hx_rt_op schedule[] = {\n", f);
  for (int i = 0; i < r->nsteps; i++)
    put_step_row(f, ops[r->steps[i].op], r->steps[i].micro_batch, phases[r->steps[i].phase],
                 width);
  put_step_row(f, "HX_RT_GRAD_SYNC", -1, "after the last backward", width);
  put_step_row(f, "HX_RT_OPTIMIZER", -1, "clip by the global norm, AdamW", width);
  fputs("};\n\n", f);
}

/* --emulate's figures (rtlib/hexic_rt.h, struct hx_rt_emulation). */

/* tflops x efficiency of a cluster device. */
static double device_speed(const struct hx_cluster *c, int device) {
  const struct hx_gpu_type *g = &c->gpus[c->devices[device].gpu_type];
  return g->tflops * g->efficiency;
}

/* The fastest device of the cluster: the machine the emulation runs on
 * when no emulation block names it. */
static double fastest_speed(const struct hx_cluster *c) {
  double best = 0;
  for (int d = 0; d < c->ndevices; d++)
    if (device_speed(c, d) > best)
      best = device_speed(c, d);
  return best;
}

/* The speed of the machine --emulate runs on: the emulation block's host
 * type (sema made sure no device is faster), else the fastest device. */
static double host_speed(const struct hx_cluster *c) {
  if (!c->has_emulation_host)
    return fastest_speed(c);
  const struct hx_gpu_type *g = &c->gpus[c->emulation_host];
  return g->tflops * g->efficiency;
}

struct emu_link {
  double latency, bandwidth;
};

static struct emu_link link_between(const struct program_set *set, int wa, int wb) {
  const struct hx_cluster *c = &set->ctx->cluster;
  if (wa < 0 || wb < 0 || wa == wb)
    return (struct emu_link){0, 0};
  int a = set->ranks[wa].device, b = set->ranks[wb].device;
  if (!c->bandwidth || !c->latency) /* no tables (a test's hand-built cluster) */
    return (struct emu_link){0, 0};
  return (struct emu_link){hx_lat(c, a, b), hx_bw(c, a, b)};
}

/* The slowest link of a ring over ranks (what a ring all-reduce crosses):
 * the lowest bandwidth and the highest latency of neighbouring members. */
static struct emu_link slowest_ring_link(const struct program_set *set, const int *ranks, int n) {
  struct emu_link worst = {0, 0};
  for (int i = 0; i < n && n > 1; i++) {
    struct emu_link l = link_between(set, ranks[i], ranks[(i + 1) % n]);
    if (l.latency > worst.latency)
      worst.latency = l.latency;
    if (l.bandwidth > 0 && (worst.bandwidth == 0 || l.bandwidth < worst.bandwidth))
      worst.bandwidth = l.bandwidth;
  }
  return worst;
}

/* "FIELD{latency, bandwidth}," of one link of the emulation tables; its
 * length (snprintf's). */
static int link_text(char *buf, size_t size, const char *field, struct emu_link l) {
  char lat[40], bw[40];
  format_double(lat, sizeof lat, l.latency);
  format_double(bw, sizeof bw, l.bandwidth);
  return snprintf(buf, size, "%s{%s, %s},", field, lat, bw);
}

/* "    FIELD{latency, bandwidth},": one link of the emulation struct. */
static void emit_link_row(FILE *f, const char *field, struct emu_link l) {
  char row[128];
  link_text(row, sizeof row, field, l);
  fprintf(f, "    %s\n", row);
}

/* group_links[]: one row per group rank w is in, its id in a trailing
 * comment (which also keeps clang-format from packing the rows), the
 * comments aligned one space past the longest row as clang-format aligns
 * consecutive trailing comments. */
static void emit_group_links(const struct program_set *set, FILE *f, int w) {
  int width = 0;
  for (int pass = 0; pass < 2; pass++)
    for (int id = 0; id < set->ngroups; id++) {
      const struct hx_prog_group *g = &set->groups[id];
      if (!hx_group_has_rank(g, w))
        continue;
      char row[128];
      int n = link_text(row, sizeof row, "", slowest_ring_link(set, g->ranks, g->nranks));
      if (pass == 0)
        width = n > width ? n : width;
      else
        fprintf(f, "    %-*s // group %d\n", width, row, id);
    }
}

/* ngroups: how many groups rank w is in (emit_groups counted them). */
static void emit_emulation(const struct program_set *set, FILE *f, int w, int ngroups) {
  const struct hx_cluster *c = &set->ctx->cluster;
  const struct hx_prog_rank *r = &set->ranks[w];
  if (ngroups > 0) {
    fputs("// --emulate: the slowest link of each group above, {latency s, bytes/s}\n"
          "static const struct hx_rt_link group_links[] = {\n",
          f);
    emit_group_links(set, f, w);
    fputs("};\n\n", f);
  }
  /* a cluster without speeds (a test's hand-built one): no slowdown */
  double host = host_speed(c), own = device_speed(c, r->device);
  char slow[40];
  format_double(slow, sizeof slow, host > 0 && own > 0 ? host / own : 1.0);
  fprintf(f,
          "// --emulate: this device's speed against %s, and its links\n"
          "static const struct hx_rt_emulation emulation = {\n",
          c->has_emulation_host ? "the emulation host" : "the cluster's fastest");
  fprintf(f, "    .slowdown = %s,\n", slow);
  emit_link_row(f, ".prev = ", link_between(set, w, r->prev_leader));
  emit_link_row(f, ".next = ", link_between(set, w, r->next_leader));
  emit_link_row(f, ".tp = ", slowest_ring_link(set, r->tp_group, r->st->tp));
  fprintf(f, "    .groups = %s,\n};\n\n", ngroups > 0 ? "group_links" : "NULL");
}

/* "{3, 2, {{614, 716}, {1330, 1433}}, 0, 4},": one unit of the ring. */
static const char *seq_unit_row(const struct program_set *set, int device) {
  const struct hx_device_plan *d = &set->plan->devices[device];
  struct hx_range r[2] = {{0, 0}, {0, 0}};
  for (int i = 0; i < d->nseq && i < 2; i++)
    r[i] = d->seq[i];
  return hx_sprintf(hx_prog_arena(set), "{%d, %d, {{%lld, %lld}, {%lld, %lld}}, %lld, %lld},",
                    set->world_of_device[device], d->nseq, (long long)r[0].begin,
                    (long long)r[0].end, (long long)r[1].begin, (long long)r[1].end,
                    (long long)d->heads.begin, (long long)d->heads.end);
}

/* The hp_a2a groups along ring (the cp_ring of this rank's TP rank), in
 * ring order: their plan groups into out; returns how many. */
static int ring_groups(const struct program_set *set, const struct hx_group *ring,
                       const struct hx_group **out) {
  int n = 0;
  for (int k = 0; k < ring->nranks; k++) {
    const struct hx_group *g = seq_group_of(set, HX_GROUP_HP_A2A, ring->ranks[k]);
    if (g && g->ranks[0] == ring->ranks[k])
      out[n++] = g;
  }
  return n;
}

/* A HexiSeq rank's table (rtlib/seq/rt_seq.h, struct hx_rt_seq): the CP ring
 * of its TP rank with every member's tokens and heads, the ring's HP
 * all-to-all groups with their split tables. */
static void emit_seq_table(const struct program_set *set, FILE *f, int w) {
  const struct hx_prog_rank *r = &set->ranks[w];
  struct hx_arena *arena = hx_prog_arena(set);
  const struct hx_group *ring = seq_group_of(set, HX_GROUP_CP_RING, r->device);
  if (!ring)
    hx_internal_error("rank %d of a HexiSeq stage is in no cp ring", w);
  struct aligned units = new_aligned(set, ring->nranks);
  for (int k = 0; k < ring->nranks; k++) {
    units.code[units.n] = seq_unit_row(set, ring->ranks[k]);
    const char *device = device_description(set, set->world_of_device[ring->ranks[k]]);
    units.comment[units.n++] = hx_sprintf(arena, "unit %d: %s", k, device);
  }
  fputs("// HexiSeq: the CP ring of this TP rank in ring order,\n"
        "// {world rank, nranges, {token ranges}, query heads [b, e)}\n"
        "static const struct hx_rt_seq_unit seq_units[] = {\n",
        f);
  put_aligned(f, &units);
  fputs("};\n\n", f);
  const struct hx_group **groups = HX_NEW_ARRAY(arena, const struct hx_group *, ring->nranks);
  int ngroups = ring_groups(set, ring, groups), mine = -1;
  for (int g = 0; g < ngroups; g++) {
    fprintf(f, "// HP group %d: tokens of the sender x heads of the receiver, row = sender\n"
               "static const int64_t seq_split_%d[] = {\n",
            g, g);
    for (long i = 0; i < (long)groups[g]->nranks * groups[g]->nranks; i++)
      fprintf(f, "    %lld,\n", (long long)groups[g]->split_table[i]);
    fputs("};\n\n", f);
    if (group_position(groups[g], r->device) >= 0)
      mine = g;
  }
  fputs("// {first unit, units, split table}\n"
        "static const struct hx_rt_seq_group seq_groups[] = {\n",
        f);
  struct aligned rows = new_aligned(set, ngroups);
  for (int g = 0; g < ngroups; g++) {
    rows.code[rows.n] = hx_sprintf(arena, "{%d, %d, seq_split_%d},",
                                   group_position(ring, groups[g]->ranks[0]), groups[g]->nranks, g);
    rows.comment[rows.n++] = hx_sprintf(arena, "group %d", g);
  }
  put_aligned(f, &rows);
  fputs("};\n\n", f);
  fprintf(f,
          "static const struct hx_rt_seq seq_table = {\n    .tp = %d,\n    .tp_rank = %d,\n"
          "    .nunits = %d,\n    .units = seq_units,\n    .ngroups = %d,\n"
          "    .groups = seq_groups,\n    .unit = %d,\n    .group = %d,\n};\n\n",
          r->st->tp, r->tp_rank, ring->nranks, ngroups, group_position(ring, r->device), mine);
}

/* What the runtime's --metrics measures MFU against, as the plan's own
 * figure does (plan.json's mfu): the model's FLOPs per optimizer step and
 * the plan's peak FLOP/s. */
static void emit_mfu_figures(const struct program_set *set, FILE *f) {
  char flops[40], peak[40];
  format_double(flops, sizeof flops, hx_model_flops_per_iteration(set->ctx));
  format_double(peak, sizeof peak, hx_plan_peak_flops(set->ctx, set->plan));
  fprintf(f, "    .model_flops_per_step = %s,\n    .plan_peak_flops = %s,\n", flops, peak);
}

static void emit_config(const struct program_set *set, FILE *f, int w, int ngroups) {
  const struct hx_prog_rank *r = &set->ranks[w];
  fprintf(f, "static const struct hx_rt_rank_config rank_config = {\n");
  fprintf(f, "    .program = \"rank_%04d\",\n    .rank = %d,\n    .world_size = %d,\n", w, w,
          set->nranks);
  fprintf(f, "    .fingerprint = \"%s\",\n", set->fingerprint);
  fprintf(f, "    .pipeline = %d,\n    .npipelines = %d,\n    .stage = %d,\n    .nstages = %d,\n",
          r->pipeline, set->plan->npipelines, r->stage, r->pl->nstages);
  fprintf(f, "    .tp_rank = %d,\n    .tp = %d,\n    .tp_group = tp_group,\n", r->tp_rank,
          r->st->tp);
  fprintf(f, "    .leader_tp_rank = %d,\n    .head_bounds = head_bounds,\n", r->leader_tp_rank);
  fprintf(f, "    .ffn_bounds = ffn_bounds,\n    .recompute = %d,\n", r->st->recompute ? 1 : 0);
  fprintf(f, "    .sequence_parallel = %s,\n",
          hx_stage_sequence_parallel(set->ctx, r->st) ? "true" : "false");
  fprintf(f, "    .layer_begin = %d,\n    .layer_end = %d,\n", r->st->layer_begin,
          r->st->layer_end);
  fprintf(f, "    .has_embedding = %d,\n    .has_head = %d,\n", r->stage == 0,
          r->stage == r->pl->nstages - 1);
  fprintf(f,
          "    .micro_batch_size = %d,\n    .micro_batches = %d,\n"
          "    .activation_slots = %d,\n    .first_sequence = %d,\n",
          (int)r->pl->micro_batch_size, (int)r->pl->micro_batches, r->activation_slots,
          r->first_sequence);
  fprintf(f, "    .prev_leader = %d,\n    .next_leader = %d,\n", r->prev_leader, r->next_leader);
  fprintf(f, "    .model = &model,\n    .train = &train,\n    .ngroups = %d,\n", ngroups);
  fprintf(f, "    .groups = %s,\n", ngroups ? "groups" : "NULL");
  fprintf(f, "    .nops = %d,\n    .schedule = schedule,\n", r->nsteps + 2);
  if (set->ctx->opt.target == HX_TARGET_CUDA) {
    const struct hx_cluster *c = &set->ctx->cluster;
    const char *type = c->gpus[c->devices[r->device].gpu_type].name;
    fprintf(f, "    .device_type = %s,\n    .device_memory_bytes = %lld,\n",
            hx_esc_c_string(hx_prog_arena(set), type),
            (long long)floor(set->memory_need[r->device]));
  }
  emit_mfu_figures(set, f);
  fputs("    .emulation = &emulation,\n", f);
  if (r->st->seq_layout)
    fprintf(f, "    .seq = &seq_table,\n    .stage_leader = %d,\n",
            set->world_of_device[r->st->leader]);
  fputs("};\n\n", f);
}

void hx_emit_rank_source(const struct program_set *set, FILE *f, int w) {
  emit_role_comment(set, f, w);
  emit_model(set, f);
  emit_train(set, f);
  int ngroups = 0;
  emit_tp_tables(set, f, w);
  emit_groups(set, f, w, &ngroups);
  emit_schedule(set, f, w);
  emit_emulation(set, f, w, ngroups);
  if (set->ranks[w].st->seq_layout)
    emit_seq_table(set, f, w);
  emit_config(set, f, w, ngroups);
  fputs("int main(int argc, char **argv) { return hx_rt_main(&rank_config, argc, argv); }\n", f);
}
