/* The sema pass: checks the AST field by field against the schema of each
 * block kind and builds ctx->model, ctx->train and ctx->cluster (GPU types,
 * nodes with replicas expanded, devices, links, network, emulation host).
 * Every problem is a located error; the pass goes on after one so a run
 * reports them all. The device-to-device table and the node pairs nothing
 * connects are the cluster-table pass's job. */
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "grammar/parse_state.h"
#include "passes/cost/cost.h"
#include "passes/schedule/sched.h"
#include "ir/units.h"
#include "frontend.h"
#include "passes.h"
#include "ir/text/dump.h"
#include "ir/text/utf8.h"

/* ---------------------------------------------------------------- schema */

enum field_type { T_INT, T_REAL, T_BYTES, T_BANDWIDTH, T_TIME, T_STRING, T_ENUM, T_BOOL };

struct field_spec {
  const char *name;
  enum field_type type;
  bool required;
  double lo, hi;   /* inclusive range; lo_open makes it (lo, hi] */
  bool lo_open;
  const char *const *choices; /* T_ENUM, NULL-terminated */
};

/* Sanity limits: far beyond any real model, small enough that the derived
 * figures (parameters, FLOPs per layer) stay exact in int64/double. */
#define MAX_LAYERS 100000
#define MAX_HIDDEN 1048576.0
#define MAX_FFN 4194304.0
#define MAX_VOCAB 16777216.0
#define MAX_SEQ 16777216.0
#define MAX_BATCH 16777216.0
#define MAX_STEPS 1e12
#define BIG 9.2e18 /* just under INT64_MAX: "any non-negative int64" */
/* The device table is ndevices^2 doubles twice: 4096 devices is 256 MiB. */
#define MAX_DEVICES 4096
#define MAX_GPUS_PER_NODE 1024

enum { M_LAYERS, M_HIDDEN, M_FFN, M_HEADS, M_KV_HEADS, M_VOCAB, M_SEQ_LEN, M_ROPE_THETA, M_NORM_EPS,
       M_TIE, M_ROPE_SCALING, M_ROPE_FACTOR, M_ROPE_LOW, M_ROPE_HIGH, M_ROPE_ORIGINAL, M_COUNT };
static const char *const rope_scaling_names[] = {"none", "llama3", NULL};
static const struct field_spec model_fields[M_COUNT] = {
    {"layers", T_INT, true, 1, MAX_LAYERS, false, NULL},
    {"hidden", T_INT, true, 1, MAX_HIDDEN, false, NULL},
    {"ffn", T_INT, true, 1, MAX_FFN, false, NULL},
    {"heads", T_INT, true, 1, MAX_HIDDEN, false, NULL},
    {"kv_heads", T_INT, false, 1, MAX_HIDDEN, false, NULL},
    {"vocab", T_INT, true, 1, MAX_VOCAB, false, NULL},
    {"seq_len", T_INT, true, 1, MAX_SEQ, false, NULL},
    {"rope_theta", T_REAL, false, 0, 1e12, true, NULL},
    {"norm_eps", T_REAL, false, 0, 1, true, NULL},
    {"tie_embeddings", T_BOOL, false, 0, 0, false, NULL},
    {"rope_scaling", T_ENUM, false, 0, 0, false, rope_scaling_names},
    {"rope_factor", T_REAL, false, 1, 1e6, false, NULL},
    {"rope_low_freq_factor", T_REAL, false, 0, 1e6, true, NULL},
    {"rope_high_freq_factor", T_REAL, false, 0, 1e6, true, NULL},
    {"rope_original_max_len", T_INT, false, 1, MAX_SEQ, false, NULL},
};

enum { TR_GLOBAL_BATCH, TR_MICRO_BATCH, TR_PRECISION, TR_RECOMPUTE, TR_OPTIMIZER, TR_SCHEDULE, TR_SHARDING, TR_LR,
       TR_BETA1, TR_BETA2, TR_EPS, TR_WEIGHT_DECAY, TR_GRAD_CLIP, TR_WARMUP, TR_STEPS, TR_SEED, TR_DATA,
       TR_CKPT_EVERY, TR_CKPT_DIR, TR_SEQ_PARALLEL, TR_COUNT };
static const struct field_spec train_fields[TR_COUNT] = {
    {"global_batch", T_INT, true, 1, MAX_BATCH, false, NULL},
    {"micro_batch", T_INT, false, 0, MAX_BATCH, false, NULL},
    {"precision", T_ENUM, false, 0, 0, false, hx_precision_names},
    {"recompute", T_ENUM, false, 0, 0, false, hx_recompute_names},
    {"optimizer", T_ENUM, false, 0, 0, false, hx_optimizer_names},
    {"schedule", T_ENUM, false, 0, 0, false, hx_schedule_names},
    {"optimizer_sharding", T_ENUM, false, 0, 0, false, hx_sharding_names},
    {"lr", T_REAL, false, 0, 1e3, true, NULL},
    {"beta1", T_REAL, false, 0, 0.999999, false, NULL},
    {"beta2", T_REAL, false, 0, 0.999999999, false, NULL},
    {"eps", T_REAL, false, 0, 1, true, NULL},
    {"weight_decay", T_REAL, false, 0, 1e3, false, NULL},
    {"grad_clip", T_REAL, false, 0, 1e12, false, NULL},
    {"warmup_steps", T_INT, false, 0, MAX_STEPS, false, NULL},
    {"steps", T_INT, false, 1, MAX_STEPS, false, NULL},
    {"seed", T_INT, false, 0, BIG, false, NULL},
    {"data", T_STRING, false, 0, 0, false, NULL},
    {"checkpoint_every", T_INT, false, 0, MAX_STEPS, false, NULL},
    {"checkpoint_dir", T_STRING, false, 0, 0, false, NULL},
    {"sequence_parallel", T_BOOL, false, 0, 0, false, NULL},
};

enum { G_TFLOPS, G_MEMORY, G_MEM_BW, G_COPY_BW, G_EFFICIENCY, G_BACKWARD_EFFICIENCY,
       G_HEAD_EFFICIENCY, G_CUDA_ARCH, G_TP_EFFICIENCY, G_LAYER_OVERHEAD, G_COUNT };
static const struct field_spec gpu_fields[G_COUNT] = {
    {"tflops", T_REAL, true, 0, 1e9, true, NULL},
    {"memory", T_BYTES, true, 0, 1e18, true, NULL},
    {"mem_bandwidth", T_BANDWIDTH, false, 0, 1e18, false, NULL},
    {"copy_bandwidth", T_BANDWIDTH, false, 0, 1e18, true, NULL},
    {"efficiency", T_REAL, false, 0, 1, true, NULL},
    {"backward_efficiency", T_REAL, false, 0, 1, true, NULL},
    {"head_efficiency", T_REAL, false, 0, 1, true, NULL},
    {"cuda_arch", T_INT, false, 0, 10000, false, NULL}, /* then one of cuda_archs[] */
    {"tp_efficiency", T_REAL, false, 0, 1, true, NULL}, /* a list, per item */
    {"layer_overhead", T_TIME, false, 0, 3600, false, NULL},
};

/* profile "gpu" { tp = 2; micro_batch = [1, 2]; forward = [...]; ... }: the
 * lists are per micro-batch size (a single value is a list of one). */
enum { P_TP, P_MICRO_BATCH, P_FORWARD, P_BACKWARD, P_MEMORY, P_COUNT };
static const struct field_spec profile_fields[P_COUNT] = {
    {"tp", T_INT, true, 1, MAX_GPUS_PER_NODE, false, NULL},
    {"micro_batch", T_INT, true, 1, MAX_BATCH, false, NULL},
    {"forward", T_TIME, true, 0, 3600, true, NULL},
    {"backward", T_TIME, true, 0, 3600, true, NULL},
    {"memory", T_BYTES, false, 0, 1e18, true, NULL},
};

enum { N_GPU, N_GPUS, N_BANDWIDTH, N_LATENCY, N_REPLICAS, N_COUNT };
static const struct field_spec node_fields[N_COUNT] = {
    {"gpu", T_STRING, true, 0, 0, false, NULL},
    {"gpus", T_INT, true, 1, MAX_GPUS_PER_NODE, false, NULL},
    {"bandwidth", T_BANDWIDTH, false, 0, 1e18, true, NULL},
    {"latency", T_TIME, false, 0, 3600, false, NULL},
    {"replicas", T_INT, false, 1, MAX_DEVICES, false, NULL},
};

/* link and network blocks share one schema. */
enum { L_BANDWIDTH, L_LATENCY, L_COUNT };
static const struct field_spec link_fields[L_COUNT] = {
    {"bandwidth", T_BANDWIDTH, true, 0, 1e18, true, NULL},
    {"latency", T_TIME, false, 0, 3600, false, NULL},
};

/* emulation { host = "gpu" }: the GPU type of the machine --emulate runs on. */
enum { E_HOST, E_COUNT };
static const struct field_spec emulation_fields[E_COUNT] = {
    {"host", T_STRING, true, 0, 0, false, NULL},
};

#define MAX_BLOCK_FIELDS 32 /* collect_fields' scratch space */
_Static_assert(M_COUNT <= MAX_BLOCK_FIELDS && TR_COUNT <= MAX_BLOCK_FIELDS && G_COUNT <= MAX_BLOCK_FIELDS &&
                   N_COUNT <= MAX_BLOCK_FIELDS && L_COUNT <= MAX_BLOCK_FIELDS &&
                   P_COUNT <= MAX_BLOCK_FIELDS && E_COUNT <= MAX_BLOCK_FIELDS,
               "a block has more fields than collect_fields holds");

/* ---------------------------------------------------------- field access */

/* Names to indices: open addressing in the arena, keyed by one name or an
 * unordered pair of names (a link). With 100k GPU blocks a pairwise strcmp
 * for duplicates took a minute; a lookup here is O(1). */
struct name_slot {
  const char *a, *b; /* a == NULL: empty; b: second name of a pair, else NULL */
  int value;
};

struct name_table {
  struct name_slot *slots;
  size_t mask; /* capacity - 1; capacity a power of two, at least twice the entries */
};

static void table_init(struct hx_arena *arena, struct name_table *t, int entries) {
  size_t cap = 16;
  while (cap < 2 * (size_t)entries)
    cap *= 2;
  t->slots = HX_NEW_ARRAY(arena, struct name_slot, cap);
  t->mask = cap - 1;
}

static uint64_t fnv1a(uint64_t h, const char *s) {
  for (const unsigned char *p = (const unsigned char *)s; *p; p++)
    h = (h ^ *p) * 0x100000001b3ULL;
  return h;
}

static bool slot_matches(const struct name_slot *slot, const char *a, const char *b) {
  return !strcmp(slot->a, a) && (slot->b == b || (slot->b && b && !strcmp(slot->b, b)));
}

/* The slot holding (a, b), or the empty slot where it would go. */
static struct name_slot *table_slot(const struct name_table *t, const char *a, const char *b) {
  uint64_t h = fnv1a(0xcbf29ce484222325ULL, a);
  if (b)
    h = fnv1a(h * 0x100000001b3ULL, b); /* the multiply separates "ab"+"c" from "a"+"bc" */
  for (size_t i = (size_t)h & t->mask;; i = (i + 1) & t->mask)
    if (!t->slots[i].a || slot_matches(&t->slots[i], a, b))
      return &t->slots[i];
}

/* The value stored under (a, b), or -1. */
static int table_find(const struct name_table *t, const char *a, const char *b) {
  const struct name_slot *slot = table_slot(t, a, b);
  return slot->a ? slot->value : -1;
}

/* Stores value under (a, b), which must not be there yet. */
static void table_put(struct name_table *t, const char *a, const char *b, int value) {
  *table_slot(t, a, b) = (struct name_slot){a, b, value};
}

/* A link's two ends in a canonical order: "a" "b" and "b" "a" are one pair. */
static void order_pair(const char **a, const char **b) {
  if (strcmp(*a, *b) > 0) {
    const char *t = *a;
    *a = *b;
    *b = t;
  }
}

/* Warnings of one kind stop after MAX_WARNINGS_OF_A_KIND; the rest are
 * counted and summed up in one line, so 100k unused GPU types do not print
 * 100k warnings. */
enum { MAX_WARNINGS_OF_A_KIND = 20 };

struct warning_kind {
  const char *what; /* for the summary line */
  int count;
};

static bool warning_wanted(struct warning_kind *k) { return ++k->count <= MAX_WARNINGS_OF_A_KIND; }

static void report_suppressed(const struct warning_kind *k) {
  if (k->count > MAX_WARNINGS_OF_A_KIND)
    hx_warning((struct location){0}, "%d more warnings like this suppressed (%s)",
               k->count - MAX_WARNINGS_OF_A_KIND, k->what);
}

/* True when the error just reported was printed: only then is a "did you
 * mean" note worth its search over every name. */
static bool last_error_printed(void) { return hx_error_count() <= HX_MAX_ERRORS; }

struct sema {
  struct hx_ctx *ctx;
  struct hx_arena *arena;
  struct name_table gpu_names; /* GPU type name -> index in cluster.gpus */
  /* The first emulation block, even when its host was refused: a second
   * block is an error either way. */
  const struct hx_block *emulation;
};

static const char *shorten(struct sema *s, const char *text) { return hx_short_text(s->arena, text); }

/* Fills found[] (indexed like specs) from the block's fields, reporting
 * unknown and duplicate fields, then missing required ones. */
static void collect_fields(struct sema *s, const struct hx_block *b, const struct field_spec *specs,
                           int nspecs, const struct hx_field **found) {
  const char *names[MAX_BLOCK_FIELDS];
  bool suggested[MAX_BLOCK_FIELDS]; /* a typo already pointed at it: "missing" would repeat that */
  for (int i = 0; i < nspecs; i++) {
    names[i] = specs[i].name;
    found[i] = NULL;
    suggested[i] = false;
  }
  for (const struct hx_field *f = b->fields; f; f = f->next) {
    int idx = -1;
    for (int i = 0; i < nspecs && idx < 0; i++)
      if (!strcmp(f->name, specs[i].name))
        idx = i;
    if (idx < 0) {
      const char *kw = hx_block_keywords[b->kind], *article = strchr("aeiou", kw[0]) ? "an" : "a";
      hx_error(f->loc, "unknown field '%s' in %s %s block", shorten(s, f->name), article, kw);
      const char *near = hx_nearest_name(f->name, names, nspecs);
      if (near) {
        hx_note(f->loc, "did you mean '%s'?", near);
        for (int i = 0; i < nspecs; i++)
          suggested[i] |= names[i] == near;
      }
      continue;
    }
    if (found[idx]) {
      hx_error(f->loc, "duplicate field '%s'", shorten(s, f->name));
      hx_note(found[idx]->loc, "previous definition is here");
      continue;
    }
    found[idx] = f;
  }
  /* All missing fields in one message: one fix, one error. */
  char missing[512] = "";
  int nmissing = 0;
  for (int i = 0; i < nspecs; i++)
    if (specs[i].required && !found[i] && !suggested[i]) {
      size_t used = strlen(missing);
      snprintf(missing + used, sizeof missing - used, "%s'%s'", nmissing ? ", " : "", specs[i].name);
      nmissing++;
    }
  if (nmissing == 0)
    return;
  const char *what = nmissing > 1 ? "fields" : "field";
  if (b->name)
    hx_error(b->loc, "%s \"%s\" is missing the %s %s", hx_block_keywords[b->kind], shorten(s, b->name), what,
             missing);
  else
    hx_error(b->loc, "%s block is missing the %s %s", hx_block_keywords[b->kind], what, missing);
}

static const char *wanted_text(const struct field_spec *spec) {
  switch (spec->type) {
  case T_INT:
    return "an integer";
  case T_REAL:
    return "a number";
  case T_BYTES:
    return "a size such as 80 GiB";
  case T_BANDWIDTH:
    return "a bandwidth such as 25 GB/s";
  case T_TIME:
    return "a time such as 10 us";
  case T_STRING:
    return "a string in double quotes";
  case T_ENUM:
    return "a name";
  case T_BOOL:
    return "true or false";
  }
  return "a value";
}

static const char *value_text(struct sema *s, const struct hx_value *v) {
  switch (v->kind) {
  case HX_V_STRING:
    return hx_sprintf(s->arena, "the string \"%s\"", shorten(s, v->text));
  case HX_V_IDENT:
    return hx_sprintf(s->arena, "the name '%s'", shorten(s, v->text));
  case HX_V_LIST:
    return "a list";
  case HX_V_NUMBER:
    break;
  }
  return "a number";
}

static enum hx_unit_kind unit_of(enum field_type t) {
  return t == T_BYTES ? HX_UNIT_BYTES : t == T_BANDWIDTH ? HX_UNIT_BANDWIDTH : t == T_TIME ? HX_UNIT_TIME : HX_UNIT_NONE;
}

static bool check_units(const struct hx_field *f, const struct field_spec *spec) {
  const struct hx_value *v = &f->value;
  enum hx_unit_kind want = unit_of(spec->type);
  if (v->unit == want)
    return true;
  if (want == HX_UNIT_NONE)
    hx_error(v->loc, "'%s' is a plain number and takes no unit, but has '%s'", spec->name, v->unit_text);
  else if (v->unit == HX_UNIT_NONE)
    hx_error(v->loc, "'%s' needs a unit of %s (%s)", spec->name, hx_unit_kind_name(want), hx_unit_examples(want));
  else
    hx_error(v->loc, "'%s' wants a %s (%s), not a %s ('%s')", spec->name, hx_unit_kind_name(want),
             hx_unit_examples(want), hx_unit_kind_name(v->unit), v->unit_text);
  return false;
}

/* The base unit a scaled value is stored in, for messages (" s"). */
static const char *base_unit(enum field_type t) {
  return t == T_TIME ? " s" : t == T_BYTES ? " bytes" : t == T_BANDWIDTH ? " B/s" : "";
}

static bool check_range(const struct hx_field *f, const struct field_spec *spec, double x) {
  const struct location at = f->value.loc;
  const char *u = base_unit(spec->type);
  bool below = spec->lo_open ? !(x > spec->lo) : !(x >= spec->lo);
  if (below) {
    if (spec->lo == 0 && spec->lo_open)
      hx_error(at, "'%s' must be positive, not %.15g%s", spec->name, x, u);
    else if (spec->lo == 0)
      hx_error(at, "'%s' must not be negative, not %.15g%s", spec->name, x, u);
    else
      hx_error(at, "'%s' must be at least %.15g%s, not %.15g%s", spec->name, spec->lo, u, x, u);
    return false;
  }
  if (x > spec->hi) {
    hx_error(at, "'%s' is too large: %.15g%s is above the limit %.15g%s", spec->name, x, u, spec->hi, u);
    return false;
  }
  return true;
}

/* A numeric field: kind, unit, overflow, integrality, range. */
static bool get_number(struct sema *s, const struct hx_field *f, const struct field_spec *spec, double *out) {
  const struct hx_value *v = &f->value;
  if (v->kind != HX_V_NUMBER) {
    hx_error(v->loc, "'%s' wants %s, not %s", spec->name, wanted_text(spec), value_text(s, v));
    return false;
  }
  if (!check_units(f, spec))
    return false;
  if (v->overflow) {
    hx_error(v->loc, "'%s' is out of range: the number does not fit %s", spec->name,
             spec->type == T_INT ? "a 64-bit integer" : "a double");
    return false;
  }
  if (spec->type == T_INT && !v->is_integer) {
    hx_error(v->loc, "'%s' must be an integer, not %.15g", spec->name, v->number);
    return false;
  }
  double x = spec->type == T_INT ? (double)v->integer : v->number;
  if (!check_range(f, spec, x))
    return false;
  *out = x;
  return true;
}

static void get_int(struct sema *s, const struct hx_field *f, const struct field_spec *spec, int64_t dflt,
                    int64_t *out) {
  *out = dflt;
  double x;
  if (f && get_number(s, f, spec, &x))
    *out = f->value.integer;
}

static void get_real(struct sema *s, const struct hx_field *f, const struct field_spec *spec, double dflt,
                     double *out) {
  *out = dflt;
  double x;
  if (f && get_number(s, f, spec, &x))
    *out = x;
}

static const char *get_string(struct sema *s, const struct hx_field *f, const struct field_spec *spec,
                              const char *dflt) {
  if (!f)
    return dflt;
  const struct hx_value *v = &f->value;
  if (v->kind != HX_V_STRING) {
    hx_error(v->loc, "'%s' wants %s, not %s", spec->name, wanted_text(spec), value_text(s, v));
    return dflt;
  }
  if (!v->text[0]) {
    hx_error(v->loc, "'%s' must not be empty", spec->name);
    return dflt;
  }
  return v->text;
}

/* An enumeration: an identifier (a string is accepted too) among choices. */
static int get_choice(struct sema *s, const struct hx_field *f, const struct field_spec *spec, int dflt) {
  if (!f)
    return dflt;
  const struct hx_value *v = &f->value;
  const char *const *choices = spec->type == T_BOOL ? (const char *const[]){"false", "true", NULL} : spec->choices;
  int n = 0;
  while (choices[n])
    n++;
  bool is_name = v->kind == HX_V_IDENT || v->kind == HX_V_STRING;
  for (int i = 0; i < n && is_name; i++)
    if (!strcmp(v->text, choices[i]))
      return i;
  /* "a, b or c" for the message. */
  const char *list = "";
  for (int i = 0; i < n; i++)
    list = hx_sprintf(s->arena, "%s%s%s", list, i == 0 ? "" : i == n - 1 ? " or " : ", ", choices[i]);
  if (!is_name) {
    hx_error(v->loc, "'%s' wants %s, not %s", spec->name, list, value_text(s, v));
    return dflt;
  }
  hx_error(v->loc, "'%s' must be %s, not '%s'", spec->name, list, shorten(s, v->text));
  const char *near = hx_nearest_name(v->text, choices, n);
  if (near)
    hx_note(v->loc, "did you mean '%s'?", near);
  return dflt;
}

/* ------------------------------------------------------- model and train */

static void check_model_shape(struct hx_model *m, const struct hx_field **f) {
  /* Report each relation once, at the field that breaks it. */
  if (m->hidden % m->heads) {
    hx_error(f[M_HEADS]->value.loc, "'heads' (%lld) must divide 'hidden' (%lld)", (long long)m->heads,
             (long long)m->hidden);
  } else if ((m->hidden / m->heads) % 2) {
    hx_error(f[M_HEADS]->value.loc,
             "the head dimension hidden/heads = %lld must be even: RoPE rotates pairs of dimensions",
             (long long)(m->hidden / m->heads));
  }
  if (m->heads % m->kv_heads) {
    const struct hx_field *at = f[M_KV_HEADS] ? f[M_KV_HEADS] : f[M_HEADS];
    hx_error(at->value.loc, "'kv_heads' (%lld) must divide 'heads' (%lld)", (long long)m->kv_heads,
             (long long)m->heads);
  }
}

/* rope_scaling = llama3 takes its four figures, each given (Llama 3.1's are
 * 8, 1, 4, 8192: no default would be every model's); without it they are
 * refused rather than ignored. */
static void build_rope_scaling(struct sema *s, struct hx_model *m, const struct hx_field **f) {
  bool llama3 = get_choice(s, f[M_ROPE_SCALING], &model_fields[M_ROPE_SCALING], 0) == 1;
  for (int i = M_ROPE_FACTOR; i <= M_ROPE_ORIGINAL; i++) {
    if (f[i] && !llama3)
      hx_error(f[i]->loc, "'%s' needs 'rope_scaling = llama3'", model_fields[i].name);
    if (!f[i] && llama3)
      hx_error(f[M_ROPE_SCALING]->value.loc, "'rope_scaling = llama3' needs '%s'",
               model_fields[i].name);
  }
  if (!llama3)
    return;
  get_real(s, f[M_ROPE_FACTOR], &model_fields[M_ROPE_FACTOR], 0, &m->rope_factor);
  get_real(s, f[M_ROPE_LOW], &model_fields[M_ROPE_LOW], 0, &m->rope_low_freq_factor);
  get_real(s, f[M_ROPE_HIGH], &model_fields[M_ROPE_HIGH], 0, &m->rope_high_freq_factor);
  get_int(s, f[M_ROPE_ORIGINAL], &model_fields[M_ROPE_ORIGINAL], 0, &m->rope_original_max_len);
  if (f[M_ROPE_LOW] && f[M_ROPE_HIGH] && !(m->rope_high_freq_factor > m->rope_low_freq_factor))
    hx_error(f[M_ROPE_HIGH]->value.loc,
             "'rope_high_freq_factor' (%g) must exceed 'rope_low_freq_factor' (%g): the band "
             "between them is interpolated over their difference",
             m->rope_high_freq_factor, m->rope_low_freq_factor);
}

static void build_model(struct sema *s, const struct hx_block *b) {
  const struct hx_field *f[M_COUNT];
  int before = hx_error_count();
  collect_fields(s, b, model_fields, M_COUNT, f);
  struct hx_model *m = &s->ctx->model;
  m->loc = b->loc;
  m->name = b->name;
  get_int(s, f[M_LAYERS], &model_fields[M_LAYERS], 0, &m->layers);
  get_int(s, f[M_HIDDEN], &model_fields[M_HIDDEN], 0, &m->hidden);
  get_int(s, f[M_FFN], &model_fields[M_FFN], 0, &m->ffn);
  get_int(s, f[M_HEADS], &model_fields[M_HEADS], 0, &m->heads);
  get_int(s, f[M_KV_HEADS], &model_fields[M_KV_HEADS], m->heads, &m->kv_heads);
  get_int(s, f[M_VOCAB], &model_fields[M_VOCAB], 0, &m->vocab);
  get_int(s, f[M_SEQ_LEN], &model_fields[M_SEQ_LEN], 0, &m->seq_len);
  get_real(s, f[M_ROPE_THETA], &model_fields[M_ROPE_THETA], 10000.0, &m->rope_theta);
  get_real(s, f[M_NORM_EPS], &model_fields[M_NORM_EPS], 1e-5, &m->norm_eps);
  m->tie_embeddings = get_choice(s, f[M_TIE], &model_fields[M_TIE], 0) == 1;
  build_rope_scaling(s, m, f);
  if (hx_error_count() == before)
    check_model_shape(m, f);
  s->ctx->has_model = true;
}

static void build_train(struct sema *s, const struct hx_block *b) {
  const struct hx_field *f[TR_COUNT];
  const struct field_spec *sp = train_fields;
  collect_fields(s, b, sp, TR_COUNT, f);
  struct hx_train *t = &s->ctx->train;
  t->loc = b->loc;
  get_int(s, f[TR_GLOBAL_BATCH], &sp[TR_GLOBAL_BATCH], 0, &t->global_batch);
  get_int(s, f[TR_MICRO_BATCH], &sp[TR_MICRO_BATCH], 0, &t->micro_batch);
  if (f[TR_MICRO_BATCH])
    t->micro_batch_loc = f[TR_MICRO_BATCH]->value.loc;
  t->precision = (enum hx_precision)get_choice(s, f[TR_PRECISION], &sp[TR_PRECISION], HX_PREC_BF16);
  t->recompute = (enum hx_recompute)get_choice(s, f[TR_RECOMPUTE], &sp[TR_RECOMPUTE], HX_RECOMPUTE_NONE);
  t->optimizer = (enum hx_optimizer)get_choice(s, f[TR_OPTIMIZER], &sp[TR_OPTIMIZER], HX_OPT_ADAMW);
  t->schedule = (enum hx_pp_schedule)get_choice(s, f[TR_SCHEDULE], &sp[TR_SCHEDULE], HX_PP_1F1B);
  /* ZeRO-1 by default: sharding the optimizer state only frees memory */
  t->optimizer_sharding =
      (enum hx_opt_sharding)get_choice(s, f[TR_SHARDING], &sp[TR_SHARDING], HX_SHARD_ZERO1);
  get_real(s, f[TR_LR], &sp[TR_LR], 3e-4, &t->lr);
  get_real(s, f[TR_BETA1], &sp[TR_BETA1], 0.9, &t->beta1);
  get_real(s, f[TR_BETA2], &sp[TR_BETA2], 0.95, &t->beta2);
  get_real(s, f[TR_EPS], &sp[TR_EPS], 1e-8, &t->eps);
  get_real(s, f[TR_WEIGHT_DECAY], &sp[TR_WEIGHT_DECAY], 0.1, &t->weight_decay);
  get_real(s, f[TR_GRAD_CLIP], &sp[TR_GRAD_CLIP], 1.0, &t->grad_clip);
  get_int(s, f[TR_WARMUP], &sp[TR_WARMUP], 0, &t->warmup_steps);
  get_int(s, f[TR_STEPS], &sp[TR_STEPS], 100, &t->steps);
  get_int(s, f[TR_SEED], &sp[TR_SEED], 1, &t->seed);
  t->data = get_string(s, f[TR_DATA], &sp[TR_DATA], NULL);
  get_int(s, f[TR_CKPT_EVERY], &sp[TR_CKPT_EVERY], 0, &t->checkpoint_every);
  t->checkpoint_dir = get_string(s, f[TR_CKPT_DIR], &sp[TR_CKPT_DIR], "checkpoints");
  t->sequence_parallel = get_choice(s, f[TR_SEQ_PARALLEL], &sp[TR_SEQ_PARALLEL], 1) == 1;
  if (t->global_batch > 0 && t->micro_batch > t->global_batch)
    hx_error(f[TR_MICRO_BATCH]->value.loc, "'micro_batch' (%lld) is larger than 'global_batch' (%lld)",
             (long long)t->micro_batch, (long long)t->global_batch);
  if (f[TR_WARMUP] && t->warmup_steps > t->steps)
    hx_warning(f[TR_WARMUP]->value.loc, "'warmup_steps' (%lld) exceeds 'steps' (%lld): the run never leaves warmup",
               (long long)t->warmup_steps, (long long)t->steps);
  s->ctx->has_train = true;
}

/* ------------------------------------------------- CUDA architectures */

/* The architectures CUDA 13's nvcc compiles for (compute capability x 10).
 * Volta (70) is gone from CUDA 13; Turing (75) is there, but hexic's kernels
 * need bf16 tensor cores, so --target=cuda refuses it (check_cuda_archs). */
static const int cuda_archs[] = {75, 80, 86, 87, 89, 90, 100, 103, 110, 120, 121};
enum { ARCH_VOLTA = 70, ARCH_TURING = 75 };

static const char *cuda_arch_list(struct sema *s) {
  const char *list = "";
  for (size_t i = 0; i < sizeof cuda_archs / sizeof cuda_archs[0]; i++)
    list = hx_sprintf(s->arena, "%s%s%d", list, i ? ", " : "", cuda_archs[i]);
  return list;
}

static bool known_cuda_arch(int64_t arch) {
  for (size_t i = 0; i < sizeof cuda_archs / sizeof cuda_archs[0]; i++)
    if (cuda_archs[i] == arch)
      return true;
  return false;
}

/* GPU names and their architectures, as data-centre and workstation GPUs
 * are commonly written ("A100", "RTX 4090", "NVIDIA H100 SXM5"). A name the
 * table does not know gets no guess: the block must say cuda_arch. */
static const struct {
  const char *model;
  int arch;
} arch_of_model[] = {
    {"V100", 70},  {"T4", 75},    {"A100", 80},  {"A800", 80},   {"A30", 80},   {"A10", 86},
    {"A40", 86},   {"A6000", 86}, {"3080", 86},  {"3090", 86},   {"L4", 89},    {"L40", 89},
    {"L40S", 89},  {"4080", 89},  {"4090", 89},  {"H100", 90},   {"H800", 90},  {"H200", 90},
    {"H20", 90},   {"GH200", 90}, {"B100", 100}, {"B200", 100},  {"GB200", 100},
};

/* The word of name that names the model: words are runs of letters and
 * digits, upper-cased; vendor and family words before it are skipped, and
 * "RTX" is dropped ("RTX4090", "GeForce RTX 4090" -> "4090"). */
static void model_word(const char *name, char *word, size_t size) {
  static const char *const skip[] = {"NVIDIA", "GEFORCE", "TESLA", "QUADRO", "RTX"};
  const char *p = name;
  for (;;) {
    while (*p && !isalnum((unsigned char)*p))
      p++;
    size_t n = 0;
    while (isalnum((unsigned char)p[n]))
      n++;
    bool skipped = false;
    for (size_t i = 0; i < sizeof skip / sizeof skip[0] && n; i++)
      if (n == strlen(skip[i]) && !strncasecmp(p, skip[i], n))
        skipped = true;
    if (!skipped) {
      if (n > 3 && !strncasecmp(p, "RTX", 3))
        p += 3, n -= 3;
      size_t k = 0;
      for (; k < n && k + 1 < size; k++)
        word[k] = (char)toupper((unsigned char)p[k]);
      word[k] = 0;
      return;
    }
    p += n;
  }
}

/* The architecture the GPU's name says, or 0: the model word is a table
 * entry, or one followed by letters only ("A10G", "H100SXM", "4090D"), the
 * longest entry winning; digits after an entry make another GPU ("A1000"
 * is not an "A100"). */
static int arch_from_name(const char *name) {
  char word[64];
  model_word(name, word, sizeof word);
  int arch = 0;
  size_t best = 0;
  for (size_t i = 0; i < sizeof arch_of_model / sizeof arch_of_model[0]; i++) {
    size_t n = strlen(arch_of_model[i].model);
    if (n <= best || strncmp(word, arch_of_model[i].model, n))
      continue;
    const char *rest = word + n;
    while (isalpha((unsigned char)*rest))
      rest++;
    if (!*rest)
      arch = arch_of_model[i].arch, best = n;
  }
  return arch;
}

/* cuda_arch = NN overrides the name table; a value CUDA 13 does not compile
 * for is an error whatever the target (the block describes a GPU wrongly). */
static void get_cuda_arch(struct sema *s, const struct hx_field *f, struct hx_gpu_type *g) {
  g->cuda_arch = arch_from_name(g->name);
  if (!f)
    return;
  g->cuda_arch_given = true;
  g->cuda_arch_loc = f->value.loc;
  g->cuda_arch = 0; /* until the value is good: a refused one is reported once, here */
  double x;
  if (!get_number(s, f, &gpu_fields[G_CUDA_ARCH], &x))
    return;
  int64_t arch = f->value.integer;
  if (arch == ARCH_VOLTA) {
    hx_error(f->value.loc, "'cuda_arch' 70 is Volta (V100), which CUDA 13 no longer compiles for; "
                           "hexic's CUDA target needs sm_80 or newer");
  } else if (!known_cuda_arch(arch)) {
    hx_error(f->value.loc,
             "'cuda_arch' must be one of %s (the architectures CUDA 13 compiles for), not %lld",
             cuda_arch_list(s), (long long)arch);
  } else {
    g->cuda_arch = (int)arch;
  }
}

/* ------------------------------------------------------------- cluster */

/* ------------------------------------------------- lists of numbers */

/* The numbers of a list field, each checked as `spec` says of one value (a
 * single value stands for a list of one), into an arena array. Returns how
 * many, or -1 after reporting a bad one. */
static int get_number_list(struct sema *s, const struct hx_field *f, const struct field_spec *spec,
                           double **out) {
  bool is_list = f->value.kind == HX_V_LIST;
  int n = is_list ? f->value.nitems : 1;
  if (n == 0) {
    hx_error(f->value.loc, "'%s' needs at least one value", spec->name);
    return -1;
  }
  *out = HX_NEW_ARRAY(s->arena, double, n);
  bool ok = true;
  for (int i = 0; i < n; i++) {
    struct hx_field item = *f; /* the item as a field of its own, for the checks and messages */
    if (is_list)
      item.value = f->value.items[i];
    ok &= get_number(s, &item, spec, &(*out)[i]);
  }
  return ok ? n : -1;
}

/* ------------------------------------------- tensor-parallel efficiency */

/* tp_efficiency = [1, e2, e4, ...]: the fraction of the TP 1 rate kept at
 * degrees 1, 2, 4, ...; 1 at degree 1 by definition (the block's
 * efficiency covers TP 1) and non-increasing (more TP never looks free). */
static void get_tp_efficiency(struct sema *s, const struct hx_field *f, struct hx_gpu_type *g) {
  static const double dflt[HX_TP_CURVE_POINTS] = HX_TP_DEFAULT_EFFICIENCY;
  memcpy(g->tp_efficiency, dflt, sizeof dflt);
  g->ntp_efficiency = HX_TP_CURVE_POINTS;
  double *e;
  int n = f ? get_number_list(s, f, &gpu_fields[G_TP_EFFICIENCY], &e) : 0;
  if (n <= 0)
    return;
  const struct hx_value *items = f->value.kind == HX_V_LIST ? f->value.items : &f->value;
  if (n > HX_TP_CURVE_POINTS) {
    hx_error(items[HX_TP_CURVE_POINTS].loc,
             "'tp_efficiency' gives TP degrees 1, 2, 4, 8 and 16: at most %d values, not %d",
             HX_TP_CURVE_POINTS, n);
    return;
  }
  if (e[0] != 1) {
    hx_error(items[0].loc,
             "'tp_efficiency' starts at TP degree 1, where it is 1 (the block's 'efficiency' covers "
             "TP 1), not %.15g",
             e[0]);
    return;
  }
  for (int k = 1; k < n; k++)
    if (e[k] > e[k - 1]) {
      hx_error(items[k].loc,
               "'tp_efficiency' must not grow with the TP degree: %.15g at degree %d after %.15g "
               "at degree %d would make more TP look free",
               e[k], 1 << k, e[k - 1], 1 << (k - 1));
      return;
    }
  memcpy(g->tp_efficiency, e, sizeof(double) * (size_t)n);
  g->ntp_efficiency = n;
}

static void build_gpu(struct sema *s, const struct hx_block *b, struct hx_gpu_type *g) {
  const struct hx_field *f[G_COUNT];
  collect_fields(s, b, gpu_fields, G_COUNT, f);
  g->loc = b->loc;
  g->name = b->name;
  get_real(s, f[G_TFLOPS], &gpu_fields[G_TFLOPS], 1.0, &g->tflops);
  double mem = 1.0;
  get_real(s, f[G_MEMORY], &gpu_fields[G_MEMORY], 1.0, &mem);
  g->memory_bytes = (int64_t)llround(mem);
  get_real(s, f[G_MEM_BW], &gpu_fields[G_MEM_BW], 0.0, &g->mem_bandwidth);
  /* 0: copies at the optimizer's rate (passes/cost: hx_rank_weight_repack_s) */
  get_real(s, f[G_COPY_BW], &gpu_fields[G_COPY_BW], 0.0, &g->copy_bandwidth);
  /* Default: the fraction of dense bf16 peak that transformer training
   * typically sustains (Megatron-class MFU is 40-60%). */
  get_real(s, f[G_EFFICIENCY], &gpu_fields[G_EFFICIENCY], 0.5, &g->efficiency);
  /* Default: the forward's, so a backward costs 2x a forward (its FLOPs);
   * hexic-profile measures the two apart (CPU kernels: the backward's GEMMs
   * run at a higher rate than the forward's attention and norms). */
  get_real(s, f[G_BACKWARD_EFFICIENCY], &gpu_fields[G_BACKWARD_EFFICIENCY], g->efficiency,
           &g->backward_efficiency);
  /* 0: the head's forward and backward at the layers' two rates */
  get_real(s, f[G_HEAD_EFFICIENCY], &gpu_fields[G_HEAD_EFFICIENCY], 0.0, &g->head_efficiency);
  get_cuda_arch(s, f[G_CUDA_ARCH], g);
  get_tp_efficiency(s, f[G_TP_EFFICIENCY], g);
  get_real(s, f[G_LAYER_OVERHEAD], &gpu_fields[G_LAYER_OVERHEAD], 0.0, &g->layer_overhead);
}

static int find_gpu(const struct sema *s, const char *name) { return table_find(&s->gpu_names, name, NULL); }
/* A node block as written, before replica expansion. */
struct node_decl {
  const struct hx_block *block;
  const struct hx_field *bandwidth_field;
  int gpu_type, gpus, replicas;
  double bandwidth, latency;
  bool clash_reported;
};

/* The note after "unknown GPU type": the nearest declared name, or how to
 * declare one when there is none. */
static void suggest_gpu(struct sema *s, const char *gpu, struct location at) {
  const struct hx_cluster *c = &s->ctx->cluster;
  const char **names = HX_NEW_ARRAY(s->arena, const char *, c->ngpus);
  for (int i = 0; i < c->ngpus; i++)
    names[i] = c->gpus[i].name;
  const char *near = hx_nearest_name(gpu, names, c->ngpus);
  if (near)
    hx_note(at, "did you mean \"%s\"?", near);
  else if (c->ngpus == 0)
    hx_note(at, "declare it with gpu \"%s\" { tflops = ...; memory = ... }", shorten(s, gpu));
}

static bool build_node_decl(struct sema *s, const struct hx_block *b, struct node_decl *d) {
  const struct hx_field *f[N_COUNT];
  int before = hx_error_count();
  collect_fields(s, b, node_fields, N_COUNT, f);
  d->block = b;
  d->gpu_type = -1;
  const char *gpu = get_string(s, f[N_GPU], &node_fields[N_GPU], NULL);
  if (gpu) {
    d->gpu_type = find_gpu(s, gpu);
    if (d->gpu_type < 0) {
      hx_error(f[N_GPU]->value.loc, "unknown GPU type \"%s\"", shorten(s, gpu));
      if (last_error_printed())
        suggest_gpu(s, gpu, f[N_GPU]->value.loc);
    }
  }
  int64_t v;
  get_int(s, f[N_GPUS], &node_fields[N_GPUS], 1, &v);
  d->gpus = (int)v;
  get_int(s, f[N_REPLICAS], &node_fields[N_REPLICAS], 1, &v);
  d->replicas = (int)v;
  get_real(s, f[N_BANDWIDTH], &node_fields[N_BANDWIDTH], 0.0, &d->bandwidth);
  get_real(s, f[N_LATENCY], &node_fields[N_LATENCY], 0.0, &d->latency);
  d->bandwidth_field = f[N_BANDWIDTH];
  if (!f[N_BANDWIDTH] && d->gpus > 1)
    hx_error(b->loc, "node \"%s\" has %d GPUs but no 'bandwidth' between them", shorten(s, b->name), d->gpus);
  return hx_error_count() == before;
}

struct named {
  const char *name;
  int node; /* index into cluster.nodes, or -1 for a base name */
  struct node_decl *decl;
};

static int cmp_named(const void *a, const void *b) {
  const struct named *x = a, *y = b;
  int c = strcmp(x->name, y->name);
  return c ? c : x->node - y->node;
}

/* Every node name a link may use: base names (applying to all replicas) and
 * expanded replica names, sorted for lookup. */
struct name_index {
  struct named *entries;
  int n;
};

static const struct named *lookup_name(const struct name_index *ix, const char *name) {
  int lo = 0, hi = ix->n;
  while (lo < hi) {
    int mid = (lo + hi) / 2;
    if (strcmp(ix->entries[mid].name, name) < 0)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo < ix->n && !strcmp(ix->entries[lo].name, name) ? &ix->entries[lo] : NULL;
}

static void expand_nodes(struct sema *s, struct node_decl *decls, int ndecls, struct name_index *ix) {
  struct hx_cluster *c = &s->ctx->cluster;
  int nnodes = 0;
  for (int i = 0; i < ndecls; i++)
    nnodes += decls[i].replicas;
  c->nodes = HX_NEW_ARRAY(s->arena, struct hx_node, nnodes);
  ix->entries = HX_NEW_ARRAY(s->arena, struct named, nnodes + ndecls);
  ix->n = 0;
  int rank = 0;
  for (int i = 0; i < ndecls; i++) {
    struct node_decl *d = &decls[i];
    if (d->replicas > 1)
      ix->entries[ix->n++] = (struct named){d->block->name, -1, d};
    for (int r = 0; r < d->replicas; r++) {
      struct hx_node *n = &c->nodes[c->nnodes];
      n->loc = d->block->loc;
      n->base_name = d->block->name;
      n->name = d->replicas > 1 ? hx_sprintf(s->arena, "%s-%d", d->block->name, r) : d->block->name;
      n->gpu_type = d->gpu_type;
      n->gpus = d->gpus;
      n->bandwidth = d->bandwidth;
      n->latency = d->latency;
      n->replica = r;
      n->first_device = rank;
      rank += d->gpus;
      ix->entries[ix->n++] = (struct named){n->name, c->nnodes, d};
      c->nnodes++;
    }
  }
  qsort(ix->entries, (size_t)ix->n, sizeof *ix->entries, cmp_named);
  for (int i = 1; i < ix->n; i++) {
    const struct named *a = &ix->entries[i - 1], *b = &ix->entries[i];
    if (strcmp(a->name, b->name))
      continue;
    /* Source order decides which declaration is in error: the later one. */
    const struct named *later = a->decl > b->decl ? a : b;
    const struct named *earlier = later == a ? b : a;
    if (later->decl == earlier->decl || later->decl->clash_reported)
      continue;
    later->decl->clash_reported = true; /* once per declaration, not per replica */
    const struct node_decl *multi = later->decl->replicas > 1 ? later->decl : earlier->decl;
    if (!strcmp(later->decl->block->name, earlier->decl->block->name))
      hx_error(later->decl->block->name_loc, "duplicate node \"%s\"", shorten(s, later->decl->block->name));
    else
      hx_error(later->decl->block->name_loc, "node name \"%s\" clashes with a replica of node \"%s\"",
               shorten(s, later->name), shorten(s, multi->block->name));
    hx_note(earlier->decl->block->name_loc, "previous definition is here");
  }
}

static void build_devices(struct sema *s) {
  struct hx_cluster *c = &s->ctx->cluster;
  int n = 0;
  for (int i = 0; i < c->nnodes; i++)
    n += c->nodes[i].gpus;
  c->devices = HX_NEW_ARRAY(s->arena, struct hx_device, n);
  c->ndevices = n;
  for (int i = 0; i < c->nnodes; i++) {
    const struct hx_node *node = &c->nodes[i];
    for (int g = 0; g < node->gpus; g++) {
      struct hx_device *d = &c->devices[node->first_device + g];
      d->rank = node->first_device + g;
      d->name = hx_sprintf(s->arena, "%s:%d", node->name, g);
      d->node = i;
      d->gpu_type = node->gpu_type;
      d->local_index = g;
    }
  }
}

static const char *nearest_node(struct sema *s, const struct name_index *ix, const char *name) {
  const char **names = HX_NEW_ARRAY(s->arena, const char *, ix->n);
  for (int i = 0; i < ix->n; i++)
    names[i] = ix->entries[i].name;
  return hx_nearest_name(name, names, ix->n);
}

static bool resolve_link_end(struct sema *s, const struct name_index *ix, const char *name, struct location at,
                             const struct named **out) {
  *out = lookup_name(ix, name);
  if (*out)
    return true;
  hx_error(at, "unknown node \"%s\" in link", shorten(s, name));
  if (!last_error_printed())
    return false;
  const char *near = nearest_node(s, ix, name);
  if (near)
    hx_note(at, "did you mean \"%s\"?", near);
  return false;
}

static void build_link(struct sema *s, const struct hx_block *b, const struct name_index *ix,
                       struct name_table *pairs) {
  const struct hx_field *f[L_COUNT];
  int before = hx_error_count();
  collect_fields(s, b, link_fields, L_COUNT, f);
  struct hx_link l = {b->loc, b->name, b->name2, 0, 0};
  get_real(s, f[L_BANDWIDTH], &link_fields[L_BANDWIDTH], 1.0, &l.bandwidth);
  get_real(s, f[L_LATENCY], &link_fields[L_LATENCY], 0.0, &l.latency);
  const struct named *na, *nb;
  bool ok_a = resolve_link_end(s, ix, b->name, b->name_loc, &na);
  bool ok_b = resolve_link_end(s, ix, b->name2, b->name2_loc, &nb);
  if (!ok_a || !ok_b)
    return;
  if (na == nb && na->node >= 0) {
    hx_error(b->name2_loc, "link joins node \"%s\" to itself", shorten(s, b->name));
    if (na->decl->replicas == 1)
      hx_note(b->name2_loc, "a link naming one node twice applies between its replicas; \"%s\" has none",
              shorten(s, b->name));
    return;
  }
  struct hx_cluster *c = &s->ctx->cluster;
  const char *first = l.a, *second = l.b;
  order_pair(&first, &second);
  int prev = table_find(pairs, first, second);
  if (prev >= 0) {
    hx_error(b->loc, "a second link between \"%s\" and \"%s\"", shorten(s, l.a), shorten(s, l.b));
    hx_note(c->links[prev].loc, "previous definition is here");
    return;
  }
  if (hx_error_count() == before) {
    table_put(pairs, first, second, c->nlinks);
    c->links[c->nlinks++] = l;
  }
}

static void build_network(struct sema *s, const struct hx_block *b) {
  struct hx_cluster *c = &s->ctx->cluster;
  if (c->has_network) {
    hx_error(b->loc, "a second network block");
    hx_note(c->network_loc, "previous definition is here");
    return;
  }
  const struct hx_field *f[L_COUNT];
  collect_fields(s, b, link_fields, L_COUNT, f);
  c->has_network = true;
  c->network_loc = b->loc;
  get_real(s, f[L_BANDWIDTH], &link_fields[L_BANDWIDTH], 1.0, &c->network_bandwidth);
  get_real(s, f[L_LATENCY], &link_fields[L_LATENCY], 0.0, &c->network_latency);
}

static void build_emulation(struct sema *s, const struct hx_block *b) {
  if (s->emulation) {
    hx_error(b->loc, "a second emulation block: --emulate runs on one machine");
    hx_note(s->emulation->loc, "previous definition is here");
    return;
  }
  s->emulation = b;
  const struct hx_field *f[E_COUNT];
  collect_fields(s, b, emulation_fields, E_COUNT, f);
  const char *host = get_string(s, f[E_HOST], &emulation_fields[E_HOST], NULL);
  if (!host)
    return;
  int type = find_gpu(s, host);
  if (type < 0) {
    hx_error(f[E_HOST]->value.loc, "unknown GPU type \"%s\" as the emulation host", shorten(s, host));
    if (last_error_printed())
      suggest_gpu(s, host, f[E_HOST]->value.loc);
    return;
  }
  struct hx_cluster *c = &s->ctx->cluster;
  c->has_emulation_host = true;
  c->emulation_host = type;
  c->emulation_host_loc = f[E_HOST]->value.loc;
}

static int count_blocks(const struct hx_ast *ast, enum hx_block_kind k) {
  int n = 0;
  for (const struct hx_block *b = ast->first; b; b = b->next)
    n += b->kind == k;
  return n;
}

static void build_gpus(struct sema *s) {
  struct hx_cluster *c = &s->ctx->cluster;
  int nblocks = count_blocks(&s->ctx->ast, HX_B_GPU);
  c->gpus = HX_NEW_ARRAY(s->arena, struct hx_gpu_type, nblocks);
  table_init(s->arena, &s->gpu_names, nblocks);
  for (const struct hx_block *b = s->ctx->ast.first; b; b = b->next) {
    if (b->kind != HX_B_GPU)
      continue;
    int prev = find_gpu(s, b->name);
    if (prev >= 0) {
      hx_error(b->name_loc, "duplicate GPU type \"%s\"", shorten(s, b->name));
      hx_note(c->gpus[prev].loc, "previous definition is here");
      continue;
    }
    table_put(&s->gpu_names, b->name, NULL, c->ngpus);
    build_gpu(s, b, &c->gpus[c->ngpus++]);
  }
}

/* Returns false (after reporting) when the node declarations are unusable. */
static bool build_nodes(struct sema *s, struct name_index *ix) {
  int ndecl_blocks = count_blocks(&s->ctx->ast, HX_B_NODE);
  struct node_decl *decls = HX_NEW_ARRAY(s->arena, struct node_decl, ndecl_blocks);
  int ndecls = 0;
  bool ok = true;
  long total = 0;
  for (const struct hx_block *b = s->ctx->ast.first; b; b = b->next) {
    if (b->kind != HX_B_NODE)
      continue;
    struct node_decl *d = &decls[ndecls++];
    ok &= build_node_decl(s, b, d);
    if (!ok)
      continue;
    total += (long)d->gpus * d->replicas;
    if (total > MAX_DEVICES) {
      hx_error(b->loc, "the cluster has more than %d devices, the most hexic plans for", MAX_DEVICES);
      return false;
    }
  }
  if (!ok)
    return false;
  expand_nodes(s, decls, ndecls, ix);
  build_devices(s);
  return true;
}

/* ------------------------------------------------------------- profiles */

static bool *gpu_types_used(struct sema *s);

/* One profile block's lists, checked: micro-batch sizes increasing, the
 * other lists as long. False after reporting. */
static bool build_profile_lists(struct sema *s, const struct hx_field **f, struct hx_profile *p) {
  double *lists[P_COUNT] = {0};
  int counts[P_COUNT] = {0};
  bool ok = true;
  for (int k = P_MICRO_BATCH; k < P_COUNT; k++)
    if (f[k]) {
      counts[k] = get_number_list(s, f[k], &profile_fields[k], &lists[k]);
      ok &= counts[k] > 0;
    }
  if (!ok)
    return false;
  int n = counts[P_MICRO_BATCH];
  const struct hx_value *mb = f[P_MICRO_BATCH]->value.kind == HX_V_LIST ? f[P_MICRO_BATCH]->value.items
                                                                         : &f[P_MICRO_BATCH]->value;
  for (int i = 1; i < n; i++)
    if (lists[P_MICRO_BATCH][i] <= lists[P_MICRO_BATCH][i - 1]) {
      hx_error(mb[i].loc, "'micro_batch' sizes must increase: %.15g after %.15g", lists[P_MICRO_BATCH][i],
               lists[P_MICRO_BATCH][i - 1]);
      return false;
    }
  for (int k = P_FORWARD; k < P_COUNT; k++)
    if (f[k] && counts[k] != n) {
      hx_error(f[k]->value.loc, "'%s' has %d value%s but 'micro_batch' has %d: one per micro-batch size",
               profile_fields[k].name, counts[k], counts[k] == 1 ? "" : "s", n);
      ok = false;
    }
  if (!ok)
    return false;
  p->npoints = n;
  p->micro_batch = HX_NEW_ARRAY(s->arena, int64_t, n);
  p->act_bytes = HX_NEW_ARRAY(s->arena, double, n); /* 0: the cost model's own figure */
  for (int i = 0; i < n; i++) {
    p->micro_batch[i] = (int64_t)lists[P_MICRO_BATCH][i];
    if (lists[P_MEMORY])
      p->act_bytes[i] = lists[P_MEMORY][i];
  }
  p->fwd_s = lists[P_FORWARD];
  p->bwd_s = lists[P_BACKWARD];
  return true;
}

static bool build_profile(struct sema *s, const struct hx_block *b, struct hx_profile *p) {
  const struct hx_field *f[P_COUNT];
  int before = hx_error_count();
  collect_fields(s, b, profile_fields, P_COUNT, f);
  p->loc = b->loc;
  p->gpu_type = find_gpu(s, b->name);
  if (p->gpu_type < 0) {
    hx_error(b->name_loc, "profile for unknown GPU type \"%s\"", shorten(s, b->name));
    if (last_error_printed())
      suggest_gpu(s, b->name, b->name_loc);
  }
  int64_t tp;
  get_int(s, f[P_TP], &profile_fields[P_TP], 1, &tp);
  p->tp = (int)tp;
  if (hx_error_count() != before || !f[P_MICRO_BATCH] || !f[P_FORWARD] || !f[P_BACKWARD])
    return false;
  return build_profile_lists(s, f, p);
}

static int cmp_profile(const void *x, const void *y) {
  const struct hx_profile *a = x, *b = y;
  if (a->gpu_type != b->gpu_type)
    return a->gpu_type - b->gpu_type;
  if (a->tp != b->tp)
    return a->tp - b->tp;
  return a->loc.line != b->loc.line ? a->loc.line - b->loc.line : a->loc.col - b->loc.col;
}

/* The TP degrees the planner may give a GPU type: those dividing the query
 * heads up to HX_SCHED_MAX_TP and the cluster's size. A profiled type must
 * have each measured (the symmetric baseline's larger ones, on nodes of
 * more than 8 GPUs, fall back to the TP model). */
static void check_profile_degrees(struct sema *s, int gpu, const struct hx_profile *first, int n) {
  const struct hx_cluster *c = &s->ctx->cluster;
  int most = c->ndevices < HX_SCHED_MAX_TP ? c->ndevices : HX_SCHED_MAX_TP;
  const char *missing = "", *wanted = "";
  for (int t = 1; t <= most; t++) {
    if (!hx_sched_tp_legal(&s->ctx->model, t))
      continue;
    wanted = hx_sprintf(s->arena, "%s%s%d", wanted, wanted[0] ? ", " : "", t);
    bool have = false;
    for (int i = 0; i < n; i++)
      have |= first[i].tp == t;
    if (!have)
      missing = hx_sprintf(s->arena, "%s%s%d", missing, missing[0] ? ", " : "", t);
  }
  if (!missing[0])
    return;
  struct location at = first[0].loc; /* the type's first block in source order */
  for (int i = 1; i < n; i++)
    if (first[i].loc.src == at.src && first[i].loc.line < at.line)
      at = first[i].loc;
  hx_error(at, "the profiles of GPU type \"%s\" have no TP degree %s: the planner may give it "
               "any degree dividing the model's %lld heads up to %d (%s), so each needs a "
               "profile block",
           shorten(s, c->gpus[gpu].name), missing, (long long)s->ctx->model.heads, most, wanted);
}

/* A profile that does not cover the micro-batch sizes the planner may try
 * is priced outside its measurements there: said once per block, with
 * what is used instead (passes/cost/cost.h, hx_profile_at). */
static void warn_profile_range(struct sema *s, const struct hx_profile *p, struct warning_kind *kind) {
  const struct hx_train *t = &s->ctx->train;
  int64_t lo = t->micro_batch > 0 ? t->micro_batch : 1;
  int64_t hi = t->micro_batch > 0 ? t->micro_batch : t->global_batch;
  long long first = p->micro_batch[0], last = p->micro_batch[p->npoints - 1];
  if ((lo >= first && hi <= last) || !warning_wanted(kind))
    return;
  const char *below = lo < first ? hx_sprintf(s->arena, "below %lld the times scale in proportion "
                                                        "from %lld", first, first)
                                 : "";
  const char *above = "";
  if (hi > last && p->npoints > 1)
    above = hx_sprintf(s->arena, "above %lld they are extrapolated on the line through %lld and %lld",
                       last, (long long)p->micro_batch[p->npoints - 2], last);
  else if (hi > last)
    above = hx_sprintf(s->arena, "above %lld they scale in proportion from %lld", last, last);
  hx_warning(p->loc,
             "profile \"%s\" tp %d measures micro-batches %lld..%lld, but the planner may try "
             "%lld..%lld: %s%s%s",
             shorten(s, s->ctx->cluster.gpus[p->gpu_type].name), p->tp, first, last, (long long)lo,
             (long long)hi, below, below[0] && above[0] ? "; " : "", above);
}

static void build_profiles(struct sema *s) {
  struct hx_cluster *c = &s->ctx->cluster;
  int nblocks = count_blocks(&s->ctx->ast, HX_B_PROFILE);
  if (nblocks == 0)
    return;
  struct hx_profile *p = HX_NEW_ARRAY(s->arena, struct hx_profile, nblocks);
  int n = 0, before = hx_error_count();
  for (const struct hx_block *b = s->ctx->ast.first; b; b = b->next)
    if (b->kind == HX_B_PROFILE && build_profile(s, b, &p[n]))
      n++;
  if (hx_error_count() != before)
    return;
  qsort(p, (size_t)n, sizeof *p, cmp_profile);
  for (int i = 1; i < n; i++)
    if (p[i].gpu_type == p[i - 1].gpu_type && p[i].tp == p[i - 1].tp) {
      hx_error(p[i].loc, "a second profile of GPU type \"%s\" at tp %d",
               shorten(s, c->gpus[p[i].gpu_type].name), p[i].tp);
      hx_note(p[i - 1].loc, "previous definition is here");
    }
  if (hx_error_count() != before)
    return;
  c->profiles = p;
  c->nprofiles = n;
  const bool *used = gpu_types_used(s);
  struct warning_kind outside = {"profiles not covering the micro-batch sizes", 0};
  for (int i = 0; i < n;) {
    int j = i;
    while (j < n && p[j].gpu_type == p[i].gpu_type)
      j++;
    c->gpus[p[i].gpu_type].profile_first = i;
    c->gpus[p[i].gpu_type].nprofiles = j - i;
    if (used[p[i].gpu_type] && s->ctx->model.heads > 0)
      check_profile_degrees(s, p[i].gpu_type, &p[i], j - i);
    for (int k = i; k < j && s->ctx->has_train; k++)
      warn_profile_range(s, &p[k], &outside);
    i = j;
  }
  report_suppressed(&outside);
}

/* ------------------------------------------------------------- warnings */

/* used[g]: some node runs GPU type g. */
static bool *gpu_types_used(struct sema *s) {
  const struct hx_cluster *c = &s->ctx->cluster;
  bool *used = HX_NEW_ARRAY(s->arena, bool, c->ngpus);
  for (int n = 0; n < c->nnodes; n++)
    if (c->nodes[n].gpu_type >= 0)
      used[c->nodes[n].gpu_type] = true;
  return used;
}

/* The emulation host is a type no node needs to use: hexic-profile's block
 * for the machine itself. */
static void warn_unused_gpus(struct sema *s) {
  const struct hx_cluster *c = &s->ctx->cluster;
  const bool *used = gpu_types_used(s);
  struct warning_kind unused = {"GPU types no node uses", 0};
  for (int g = 0; g < c->ngpus; g++)
    if (!used[g] && !(c->has_emulation_host && c->emulation_host == g) && warning_wanted(&unused))
      hx_warning(c->gpus[g].loc, "GPU type \"%s\" is not used by any node", shorten(s, c->gpus[g].name));
  report_suppressed(&unused);
}

/* TFLOP/s a device of this type reaches: what --emulate's slowdowns divide. */
static double reachable_tflops(const struct hx_gpu_type *g) { return g->tflops * g->efficiency; }

/* --emulate stretches each op by host speed / device speed and cannot make
 * one faster, so every type a node uses must be at most as fast as the
 * emulation host (when the input names one). */
static void check_emulation_host(struct sema *s) {
  const struct hx_cluster *c = &s->ctx->cluster;
  if (!c->has_emulation_host)
    return;
  const struct hx_gpu_type *host = &c->gpus[c->emulation_host];
  const bool *used = gpu_types_used(s);
  for (int i = 0; i < c->ngpus; i++) {
    const struct hx_gpu_type *g = &c->gpus[i];
    if (!used[i] || reachable_tflops(g) <= reachable_tflops(host))
      continue;
    hx_error(g->loc,
             "device type \"%s\" (%g TFLOP/s reachable) is faster than the emulation host \"%s\" (%g TFLOP/s): "
             "--emulate can only slow devices down",
             shorten(s, g->name), reachable_tflops(g), shorten(s, host->name), reachable_tflops(host));
    hx_note(c->emulation_host_loc, "the emulation host is named here");
  }
}

/* The widest speed ratio --emulate honours. Each op of a device ends
 * slowdown x its time on the emulation machine (rtlib/rt_emulate.c), the
 * rank asleep meanwhile and answering no one: at 1000, an op of 60 ms there
 * already sleeps the default HEXIC_TIMEOUT_S (60 s), after which the ranks
 * waiting on it take it for a stalled peer (at 5e7 every run stalled right
 * after calibration). Real clusters stay far below: B200 / T4 is under 40,
 * twice that with the emulation host twice as fast as every device. */
#define MAX_EMULATION_SLOWDOWN 1000.0

/* The type a node uses that reaches the most (fastest) or the least
 * TFLOP/s; -1 when no node uses one. */
static int extreme_used_gpu(struct sema *s, bool fastest) {
  const struct hx_cluster *c = &s->ctx->cluster;
  const bool *used = gpu_types_used(s);
  int best = -1;
  for (int i = 0; i < c->ngpus; i++) {
    if (!used[i])
      continue;
    double speed = reachable_tflops(&c->gpus[i]);
    if (best < 0 || (fastest ? speed > reachable_tflops(&c->gpus[best])
                             : speed < reachable_tflops(&c->gpus[best])))
      best = i;
  }
  return best;
}

/* --emulate slows each device down by host speed / its speed (the host:
 * the emulation block's type, else the fastest device). With an emulation
 * block the input asks for emulation: a ratio beyond the limit is an error.
 * Without one, --emulate is a choice made at launch: a warning, on the CPU
 * target only (the CUDA backend ignores --emulate). */
static void check_emulation_slowdown(struct sema *s) {
  const struct hx_cluster *c = &s->ctx->cluster;
  bool named = c->has_emulation_host;
  if (!named && s->ctx->opt.target != HX_TARGET_CPU)
    return;
  int host = named ? c->emulation_host : extreme_used_gpu(s, true);
  int slowest = extreme_used_gpu(s, false);
  if (host < 0 || slowest < 0)
    return;
  const struct hx_gpu_type *h = &c->gpus[host], *g = &c->gpus[slowest];
  double ratio = reachable_tflops(h) / reachable_tflops(g);
  if (!(ratio > MAX_EMULATION_SLOWDOWN))
    return;
  const char *what = named ? "the emulation host" : "the cluster's fastest type";
  const char *text = hx_sprintf(
      s->arena,
      "device type \"%s\" (%g TFLOP/s reachable) is %.4g times slower than %s \"%s\" (%g TFLOP/s): "
      "--emulate runs each of its ops that many times longer than the host does, and honours at "
      "most %g (an op would outlast HEXIC_TIMEOUT_S and its peers would take it for a stalled "
      "rank)",
      shorten(s, g->name), reachable_tflops(g), ratio, what, shorten(s, h->name),
      reachable_tflops(h), MAX_EMULATION_SLOWDOWN);
  if (named) {
    hx_error(g->loc, "%s", text);
    hx_note(c->emulation_host_loc, "the emulation host is named here");
  } else {
    hx_warning(g->loc, "%s; launch.sh --emulate cannot run this cluster", text);
  }
}

/* A cuda_arch written in the block against the one the GPU's name says
 * (arch_from_name). The build embeds sm_NN code and compute_NN PTX
 * (codegen/emit_cuda.c): neither runs on an older GPU, so an arch newer than
 * the named GPU's is an error; on a newer GPU the code still runs (sm_NN code
 * across one major version, else the PTX compiled by the driver when the
 * program starts), without what the GPU's own architecture adds: a warning. */
static void check_arch_against_name(struct sema *s, const struct hx_gpu_type *g) {
  int named = arch_from_name(g->name);
  if (!g->cuda_arch_given || named == 0 || g->cuda_arch == named)
    return;
  const char *name = shorten(s, g->name);
  if (g->cuda_arch > named) {
    hx_error(g->cuda_arch_loc,
             "'cuda_arch' %d is newer than GPU type \"%s\", an sm_%d GPU by its name: code built "
             "for sm_%d does not run on it; write cuda_arch = %d, or leave it out",
             g->cuda_arch, name, named, g->cuda_arch, named);
    return;
  }
  const char *how =
      g->cuda_arch / 10 == named / 10
          ? hx_sprintf(s->arena,
                       "its sm_%d code runs there (binary compatible within the %d.x family)",
                       g->cuda_arch, named / 10)
          : hx_sprintf(s->arena,
                       "the build runs there only through its compute_%d PTX, compiled by "
                       "the driver when the program starts,",
                       g->cuda_arch);
  hx_warning(g->cuda_arch_loc,
             "'cuda_arch' %d is older than GPU type \"%s\", an sm_%d GPU by its name: %s but "
             "without what sm_%d adds; write cuda_arch = %d, or leave it out",
             g->cuda_arch, name, named, how, named, named);
}

/* --target=cuda compiles the kernels for each GPU type a node uses: each
 * needs an architecture CUDA 13 and hexic's kernels build for, and the one
 * its GPU has. */
static void check_cuda_archs(struct sema *s) {
  const struct hx_cluster *c = &s->ctx->cluster;
  const bool *used = gpu_types_used(s);
  for (int i = 0; i < c->ngpus; i++) {
    const struct hx_gpu_type *g = &c->gpus[i];
    if (!used[i] || (g->cuda_arch_given && g->cuda_arch == 0))
      continue; /* no node runs it, or its cuda_arch was refused already */
    const char *name = shorten(s, g->name);
    if (g->cuda_arch == 0)
      hx_error(g->loc,
               "--target=cuda needs the CUDA architecture of GPU type \"%s\", and its name is not one "
               "hexic knows: add 'cuda_arch = NN' to the block (compute capability x 10, e.g. 90 "
               "for sm_90)",
               name);
    else if (g->cuda_arch == ARCH_VOLTA)
      hx_error(g->loc,
               "GPU type \"%s\" is a Volta GPU (sm_70), which CUDA 13 no longer compiles for: "
               "--target=cuda cannot build for it",
               name);
    else if (g->cuda_arch == ARCH_TURING)
      hx_error(g->loc,
               "GPU type \"%s\" is sm_75 (Turing): hexic's CUDA kernels need bf16 tensor cores, "
               "sm_80 or newer",
               name);
    else
      check_arch_against_name(s, g);
  }
}

static void warn_slow_links(struct sema *s, const struct name_index *ix) {
  const struct hx_cluster *c = &s->ctx->cluster;
  struct warning_kind slower = {"links slower than the network", 0};
  struct warning_kind faster = {"links faster than the GPUs inside a node", 0};
  for (int i = 0; i < c->nlinks; i++) {
    const struct hx_link *l = &c->links[i];
    if (c->has_network && l->bandwidth < c->network_bandwidth && warning_wanted(&slower))
      hx_warning(l->loc, "link \"%s\" \"%s\" (%g GB/s) is slower than the network (%g GB/s)", shorten(s, l->a),
                 shorten(s, l->b), l->bandwidth / 1e9, c->network_bandwidth / 1e9);
    const char *ends[2] = {l->a, l->b};
    for (int e = 0; e < 2 && (e == 0 || strcmp(l->a, l->b)); e++) {
      const struct named *n = lookup_name(ix, ends[e]);
      const struct node_decl *d = n->decl;
      if (d->gpus > 1 && d->bandwidth < l->bandwidth && warning_wanted(&faster))
        hx_warning(l->loc, "link \"%s\" \"%s\" (%g GB/s) is faster than the GPUs inside node \"%s\" (%g GB/s)",
                   shorten(s, l->a), shorten(s, l->b), l->bandwidth / 1e9, shorten(s, d->block->name),
                   d->bandwidth / 1e9);
    }
  }
  report_suppressed(&slower);
  report_suppressed(&faster);
}

/* ------------------------------------------------------------- strings */

/* Every name and path goes into generated C, Makefiles, shell scripts and
 * JSON (codegen escapes each per language too); a control character or a
 * byte that is not UTF-8 is never part of a sane name, so it is refused
 * here, pointed at. */

/* Where the byte at index in the unescaped string starts in the source:
 * at is the string's opening quote; escapes ("\n") are two bytes there. */
static struct location string_byte_loc(struct location at, size_t index) {
  const char *line = hx_source_line(at.src, at.line);
  if (!line)
    return at;
  const char *quote = line + at.col - 1, *p = quote + 1;
  if (*quote != '"')
    return at;
  for (size_t i = 0; i < index && *p && *p != '\n'; i++)
    p += p[0] == '\\' && p[1] && p[1] != '\n' ? 2 : 1;
  at.col += (int)(p - quote);
  return at;
}

static const char *control_name(unsigned char c) {
  switch (c) {
  case '\t':
    return "a tab";
  case '\n':
    return "a newline";
  case '\r':
    return "a carriage return";
  case 0x1b:
    return "an escape character";
  case 0x7f:
    return "a delete character";
  }
  return "a control character";
}

/* The index of the first control character or non-UTF-8 byte, or -1. */
static long bad_byte(const char *text) {
  size_t len = strlen(text);
  for (size_t i = 0; i < len;) {
    int n = hx_utf8_printable(text + i, len - i);
    if (n == 0)
      return (long)i;
    i += (size_t)n;
  }
  return -1;
}

/* what: "the name of a gpu block", "'data'" (%s and one string argument). */
static void check_string(struct sema *s, const char *text, struct location at, const char *what,
                         const char *arg) {
  long i = bad_byte(text);
  if (i < 0)
    return;
  static const char why[] = "names and paths must be printable text, as hexic writes them into "
                            "generated code, scripts and JSON";
  const char *where = hx_sprintf(s->arena, what, arg);
  unsigned char c = (unsigned char)text[i];
  if (c < 0x20 || c == 0x7f)
    hx_error(string_byte_loc(at, (size_t)i), "%s (byte 0x%02x) in %s: %s", control_name(c), c, where, why);
  else
    hx_error(string_byte_loc(at, (size_t)i), "byte 0x%02x in %s is not valid UTF-8: %s", c, where, why);
}

static void check_value_strings(struct sema *s, const struct hx_field *f, const struct hx_value *v) {
  if (v->kind == HX_V_STRING)
    check_string(s, v->text, v->loc, "'%s'", f->name);
  for (int i = 0; v->kind == HX_V_LIST && i < v->nitems; i++)
    check_value_strings(s, f, &v->items[i]);
}

static void check_strings(struct sema *s) {
  for (const struct hx_block *b = s->ctx->ast.first; b; b = b->next) {
    const char *kw = hx_block_keywords[b->kind];
    if (b->name)
      check_string(s, b->name, b->name_loc, "the name of a %s block", kw);
    if (b->name2)
      check_string(s, b->name2, b->name2_loc, "the second name of a %s block", kw);
    for (const struct hx_field *f = b->fields; f; f = f->next)
      check_value_strings(s, f, &f->value);
  }
}

/* ------------------------------------------------------- the whole input */

/* Where to point an error about something missing from every file: the end
 * of the last input, so the message still has a file:line:col. */
static struct location end_of_input(const struct hx_ctx *ctx) {
  struct location loc = {0};
  if (ctx->nsources == 0)
    return loc;
  const struct hx_source *src = &ctx->sources[ctx->nsources - 1];
  loc.src = src;
  loc.line = 1;
  loc.col = 1;
  for (long i = 0; i < src->len; i++) {
    if (src->text[i] == '\n') {
      loc.line++;
      loc.col = 1;
    } else {
      loc.col++;
    }
  }
  return loc;
}

static const struct hx_block *first_block(const struct hx_ast *ast, enum hx_block_kind k) {
  for (const struct hx_block *b = ast->first; b; b = b->next)
    if (b->kind == k)
      return b;
  return NULL;
}

/* model and train come once; the second is the error (a second network or
 * emulation block is reported by build_network or build_emulation). */
static void check_singletons(struct sema *s) {
  static const enum hx_block_kind once[] = {HX_B_MODEL, HX_B_TRAIN};
  for (size_t i = 0; i < sizeof once / sizeof once[0]; i++) {
    const struct hx_block *first = first_block(&s->ctx->ast, once[i]);
    for (const struct hx_block *b = first ? first->next : NULL; b; b = b->next)
      if (b->kind == once[i]) {
        hx_error(b->loc, "a second %s block: one compilation trains one model", hx_block_keywords[b->kind]);
        hx_note(first->loc, "previous definition is here");
      }
  }
}

static void check_missing(struct sema *s) {
  const struct hx_ast *ast = &s->ctx->ast;
  const struct hx_block *model = first_block(ast, HX_B_MODEL);
  if (!model) {
    hx_error(end_of_input(s->ctx), "no model block: the input needs a model, a train block and a cluster");
    return;
  }
  if (!first_block(ast, HX_B_TRAIN))
    hx_error(model->loc, "model \"%s\" has no train block (train { global_batch = ... })", shorten(s, model->name));
  if (!first_block(ast, HX_B_NODE))
    hx_error(model->loc, "model \"%s\" has no cluster to train on: the input has no node block",
             shorten(s, model->name));
}

bool hx_pass_sema(struct hx_ctx *ctx) {
  struct sema s = {ctx, &ctx->arena, {NULL, 0}, NULL};
  int before = hx_error_count();
  check_strings(&s);
  check_singletons(&s);
  check_missing(&s);
  const struct hx_block *model = first_block(&ctx->ast, HX_B_MODEL), *train = first_block(&ctx->ast, HX_B_TRAIN);
  for (const struct hx_block *b = ctx->ast.first; b; b = b->next) {
    if (b == model)
      build_model(&s, b);
    else if (b == train)
      build_train(&s, b);
    else if (b->kind == HX_B_PLANNER)
      hx_error(b->loc, "planner blocks are not supported; choose the search with --strategy, --search-evals, --search-budget and --tau");
  }
  build_gpus(&s);
  struct name_index ix = {NULL, 0};
  if (!build_nodes(&s, &ix))
    return false;
  struct hx_cluster *c = &ctx->cluster;
  int nlink_blocks = count_blocks(&ctx->ast, HX_B_LINK);
  c->links = HX_NEW_ARRAY(s.arena, struct hx_link, nlink_blocks);
  struct name_table link_pairs;
  table_init(s.arena, &link_pairs, nlink_blocks);
  for (const struct hx_block *b = ctx->ast.first; b; b = b->next) {
    if (b->kind == HX_B_LINK)
      build_link(&s, b, &ix, &link_pairs);
    else if (b->kind == HX_B_NETWORK)
      build_network(&s, b);
    else if (b->kind == HX_B_EMULATION)
      build_emulation(&s, b);
  }
  check_emulation_host(&s);
  check_emulation_slowdown(&s);
  build_profiles(&s);
  if (ctx->opt.target == HX_TARGET_CUDA)
    check_cuda_archs(&s);
  if (hx_error_count() == before) {
    warn_unused_gpus(&s);
    warn_slow_links(&s, &ix);
  }
  return hx_error_count() == before;
}
