/* Hugging Face Llama naming, RoPE row order and config.json (hf_llama.h). */
#include "hf_llama.h"

#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckpt_json.h"
#include "kernels/cpu/llama.h"
#include "user_file.h"

enum { LAYER_TENSORS = HXK_LAYER_NPARAMS }; /* attn_norm .. w_down, the spec's order */

__attribute__((format(printf, 3, 4))) static bool fail(char *err, size_t err_size, const char *fmt,
                                                       ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err, err_size, fmt, ap);
  va_end(ap);
  return false;
}

int hx_hf_tensor_count(const struct hx_hf_model *m) {
  return 2 + m->layers * LAYER_TENSORS + (m->tied ? 0 : 1);
}

uint64_t hx_hf_tensor_id(const struct hx_hf_model *m, int i) {
  int last = m->layers * LAYER_TENSORS;
  if (i == 0)
    return hxk_param_id(HXK_TOK_EMB, 0);
  if (i <= last)
    return hxk_param_id((enum hxk_param)((i - 1) % LAYER_TENSORS), (i - 1) / LAYER_TENSORS);
  return hxk_param_id(i == last + 1 ? HXK_FINAL_NORM : HXK_LM_HEAD, 0);
}

/* The kernels' tensor of a spec id (the inverse of hxk_param_id, layer aside). */
static enum hxk_param param_of(uint64_t id) {
  return id == 0   ? HXK_TOK_EMB
         : id == 1 ? HXK_FINAL_NORM
         : id == 2 ? HXK_LM_HEAD
                   : (enum hxk_param)((id - 16) % 16);
}

void hx_hf_tensor_shape(const struct hx_hf_model *m, uint64_t id, int64_t *rows, int64_t *cols) {
  struct hxk_dims d = {.dim = m->hidden,
                       .ffn = m->ffn,
                       .heads = m->heads,
                       .kv_heads = m->kv_heads,
                       .head_dim = m->hidden / m->heads,
                       .vocab = m->vocab};
  long r, c;
  hxk_param_shape(&d, param_of(id), &r, &c);
  *rows = r, *cols = c;
}

void hx_hf_name(uint64_t id, char *buf, size_t size) {
  static const char *const names[LAYER_TENSORS] = {
      "input_layernorm",  "self_attn.q_proj", "self_attn.k_proj",
      "self_attn.v_proj", "self_attn.o_proj", "post_attention_layernorm",
      "mlp.gate_proj",    "mlp.up_proj",      "mlp.down_proj"};
  if (id < 3)
    snprintf(buf, size, "%s",
             id == 0   ? "model.embed_tokens.weight"
             : id == 1 ? "model.norm.weight"
                       : "lm_head.weight");
  else
    snprintf(buf, size, "model.layers.%" PRIu64 ".%s.weight", (id - 16) / 16,
             names[(id - 16) % 16 < LAYER_TENSORS ? (id - 16) % 16 : 0]);
}

bool hx_hf_id_of_name(const struct hx_hf_model *m, const char *name, uint64_t *id) {
  unsigned layer = 0;
  int at = 0;
  uint64_t guess = !strcmp(name, "model.embed_tokens.weight") ? 0
                   : !strcmp(name, "model.norm.weight")       ? 1
                   : !strcmp(name, "lm_head.weight")          ? 2
                                                              : UINT64_MAX;
  if (guess == 2 && m->tied)
    return false;
  if (guess == UINT64_MAX && sscanf(name, "model.layers.%u.%n", &layer, &at) == 1 && at > 0 &&
      layer < (unsigned)m->layers) {
    const char *rest = name + at;
    for (int j = 0; j < LAYER_TENSORS && guess == UINT64_MAX; j++) {
      char want[96];
      hx_hf_name(16 + 16 * (uint64_t)layer + (uint64_t)j, want, sizeof want);
      if (!strcmp(want + at, rest))
        guess = 16 + 16 * (uint64_t)layer + (uint64_t)j;
    }
  }
  /* exactly hx_hf_name's text: "model.layers.01." or "+1" is no name of it */
  char back[96];
  if (guess == UINT64_MAX)
    return false;
  hx_hf_name(guess, back, sizeof back);
  *id = guess;
  return !strcmp(back, name);
}

int hx_hf_rope_heads(const struct hx_hf_model *m, uint64_t id) {
  enum hxk_param p = param_of(id);
  return p == HXK_WQ ? m->heads : p == HXK_WK ? m->kv_heads : 0;
}

int64_t hx_hf_rope_row(int64_t j, int64_t head_dim) {
  int64_t half = head_dim / 2;
  return j < half ? 2 * j : 2 * (j - half) + 1;
}

int64_t hx_hf_parameter_count(const struct hx_hf_model *m) {
  int64_t total = 0;
  for (int i = 0; i < hx_hf_tensor_count(m); i++) {
    int64_t rows, cols;
    hx_hf_tensor_shape(m, hx_hf_tensor_id(m, i), &rows, &cols);
    total += rows * cols;
  }
  return total;
}

/* ---- config.json ---- */

static bool get_int(const struct hx_json *root, const char *key, int64_t fallback, int64_t hi,
                    int64_t *out, const char *path, char *err, size_t err_size) {
  const struct hx_json *v = hx_json_get(root, key);
  if (!v || v->kind == HX_JSON_NULL) {
    if (fallback >= 0) {
      *out = fallback;
      return true;
    }
    return fail(err, err_size, "%s: no \"%s\"", path, key);
  }
  return hx_json_int(v, 1, hi, out) ||
         fail(err, err_size, "%s: \"%s\" is not an integer in [1, %" PRId64 "]", path, key, hi);
}

static bool get_number(const struct hx_json *root, const char *key, double fallback, double *out,
                       const char *path, char *err, size_t err_size) {
  const struct hx_json *v = hx_json_get(root, key);
  if (!v || v->kind == HX_JSON_NULL) {
    *out = fallback;
    return true;
  }
  *out = v->kind == HX_JSON_NUMBER ? v->number : -1;
  return *out > 0 || fail(err, err_size, "%s: \"%s\" is not a positive number", path, key);
}

/* The architecture: LlamaForCausalLM or MistralForCausalLM (or, without
 * "architectures", model_type llama or mistral). */
static bool supported_architecture(const struct hx_json *root, const char *path, char *err,
                                   size_t err_size) {
  const struct hx_json *archs = hx_json_get(root, "architectures");
  const struct hx_json *type = hx_json_get(root, "model_type");
  const char *name = archs && archs->kind == HX_JSON_ARRAY && archs->count == 1 &&
                             archs->child->kind == HX_JSON_STRING
                         ? archs->child->text
                     : type && type->kind == HX_JSON_STRING ? type->text
                                                            : NULL;
  if (name && (!strcmp(name, "LlamaForCausalLM") || !strcmp(name, "MistralForCausalLM") ||
               !strcmp(name, "llama") || !strcmp(name, "mistral")))
    return true;
  return fail(err, err_size,
              "%s: architecture '%s' is not supported: hexic trains Llama-style models "
              "(LlamaForCausalLM, MistralForCausalLM)",
              path, name ? name : "(none given)");
}

/* What a Llama config may say that hexic's model (docs/model-spec.md) does not compute. */
static bool supported_features(const struct hx_json *root, const char *path, char *err,
                               size_t err_size) {
  const struct hx_json *act = hx_json_get(root, "hidden_act");
  if (act && (act->kind != HX_JSON_STRING || strcmp(act->text, "silu")))
    return fail(err, err_size, "%s: hidden_act '%s' is not supported (hexic's MLP is SwiGLU: silu)",
                path, act->kind == HX_JSON_STRING ? act->text : "?");
  /* true, false or null (absent): "yes" or 1 read as no bias would train
   * another model than the config's without a word */
  static const char *const biases[] = {"attention_bias", "mlp_bias"};
  for (int i = 0; i < 2; i++) {
    const struct hx_json *b = hx_json_get(root, biases[i]);
    if (b && b->kind != HX_JSON_BOOL && b->kind != HX_JSON_NULL)
      return fail(err, err_size, "%s: %s is not true, false or null", path, biases[i]);
    if (b && b->kind == HX_JSON_BOOL && b->boolean)
      return fail(err, err_size,
                  "%s: %s = true is not supported (hexic's linear layers have no bias)", path,
                  biases[i]);
  }
  return true;
}

/* A member of obj (named where.key in messages) that is a number in
 * [lo, hi] (lo excluded when lo_open); absent or null: required is an
 * error, else *out keeps its value. */
static bool get_in_range(const struct hx_json *obj, const char *where, const char *key,
                         bool required, double lo, bool lo_open, double hi, double *out,
                         const char *path, char *err, size_t err_size) {
  const struct hx_json *v = hx_json_get(obj, key);
  if (!v || v->kind == HX_JSON_NULL)
    return !required || fail(err, err_size, "%s: %s%s\"%s\" is missing", path, where,
                             where[0] ? "." : "", key);
  bool in = v->kind == HX_JSON_NUMBER && (lo_open ? v->number > lo : v->number >= lo) &&
            v->number <= hi;
  if (in)
    *out = v->number;
  return in || fail(err, err_size, "%s: %s%s\"%s\" is not a number in %c%g, %g]", path, where,
                    where[0] ? "." : "", key, lo_open ? '(' : '[', lo, hi);
}

/* Llama 3's four figures (transformers' _compute_llama3_parameters), each
 * required, in the ranges the .hx fields take (passes/sema.c). */
static bool read_llama3(const struct hx_json *obj, const char *where, struct hx_hf_model *m,
                        const char *path, char *err, size_t err_size) {
  double original = 0;
  if (!get_in_range(obj, where, "factor", true, 1, false, 1e6, &m->rope_factor, path, err,
                    err_size) ||
      !get_in_range(obj, where, "low_freq_factor", true, 0, true, 1e6, &m->rope_low_freq_factor,
                    path, err, err_size) ||
      !get_in_range(obj, where, "high_freq_factor", true, 0, true, 1e6,
                    &m->rope_high_freq_factor, path, err, err_size) ||
      !get_in_range(obj, where, "original_max_position_embeddings", true, 1, false, 16777216,
                    &original, path, err, err_size))
    return false;
  if (original != (double)(int)original)
    return fail(err, err_size, "%s: %s.\"original_max_position_embeddings\" is not an integer",
                path, where);
  m->rope_original_max_len = (int)original;
  if (!(m->rope_high_freq_factor > m->rope_low_freq_factor))
    return fail(err, err_size, "%s: %s.\"high_freq_factor\" (%g) does not exceed "
                "\"low_freq_factor\" (%g)", path, where, m->rope_high_freq_factor,
                m->rope_low_freq_factor);
  return true;
}

/* An object member or nothing: null reads as absent. */
static const struct hx_json *get_object(const struct hx_json *root, const char *key,
                                        bool *bad) {
  const struct hx_json *v = hx_json_get(root, key);
  if (v && v->kind == HX_JSON_NULL)
    return NULL;
  *bad = *bad || (v && v->kind != HX_JSON_OBJECT);
  return v;
}

/* RoPE's base and scaling: transformers 5 writes rope_parameters
 * {rope_theta, rope_type, ...}; 4 a top-level rope_theta and rope_scaling
 * {rope_type (older: type), ...}. A config read for the wrong one trained
 * with rope_theta 10000 or without Llama 3's scaling, unsaid. */
static bool read_rope(const struct hx_json *root, struct hx_hf_model *m, const char *path,
                      char *err, size_t err_size) {
  bool bad = false;
  const struct hx_json *params = get_object(root, "rope_parameters", &bad);
  const struct hx_json *scaling = get_object(root, "rope_scaling", &bad);
  if (bad)
    return fail(err, err_size, "%s: rope_parameters or rope_scaling is not an object", path);
  m->rope_theta = 10000;
  if (!get_in_range(root, "", "rope_theta", false, 0, true, 1e12, &m->rope_theta, path, err,
                    err_size))
    return false;
  double top = hx_json_get(root, "rope_theta") ? m->rope_theta : 0;
  if (params && !get_in_range(params, "rope_parameters", "rope_theta", false, 0, true, 1e12,
                              &m->rope_theta, path, err, err_size))
    return false;
  if (top && top != m->rope_theta)
    return fail(err, err_size, "%s: rope_theta (%g) and rope_parameters.rope_theta (%g) differ",
                path, top, m->rope_theta);
  /* the type: rope_parameters' when it names one, else rope_scaling's */
  const char *where = "rope_parameters", *key = "rope_type";
  const struct hx_json *from = params, *kind = params ? hx_json_get(params, key) : NULL;
  if (!kind && scaling) {
    where = "rope_scaling", from = scaling, kind = hx_json_get(scaling, key);
    if (!kind)
      key = "type", kind = hx_json_get(scaling, key);
  }
  if (!from || (!kind && from == params))
    return true;
  if (!kind || kind->kind != HX_JSON_STRING)
    return fail(err, err_size, "%s: %s has no \"rope_type\" string", path, where);
  if (!strcmp(kind->text, "default"))
    return true;
  if (strcmp(kind->text, "llama3"))
    return fail(err, err_size,
                "%s: %s.%s '%s' is not supported (hexic computes RoPE unscaled, 'default', or "
                "with Llama 3's frequency scaling, 'llama3')",
                path, where, key, kind->text);
  return read_llama3(from, where, m, path, err, err_size);
}

static bool read_shape(const struct hx_json *root, struct hx_hf_model *m, const char *path,
                       char *err, size_t err_size) {
  int64_t v[7];
  static const char *const keys[] = {"num_hidden_layers", "hidden_size",
                                     "intermediate_size", "num_attention_heads",
                                     "vocab_size",        "max_position_embeddings"};
  static const int64_t hi[] = {100000, 1048576, 4194304, 1048576, 16777216, 16777216};
  for (int i = 0; i < 6; i++)
    if (!get_int(root, keys[i], i == 5 ? 4096 : -1, hi[i], &v[i], path, err, err_size))
      return false;
  if (!get_int(root, "num_key_value_heads", v[3], v[3], &v[6], path, err, err_size))
    return false;
  *m = (struct hx_hf_model){.layers = (int)v[0],
                            .hidden = (int)v[1],
                            .ffn = (int)v[2],
                            .heads = (int)v[3],
                            .kv_heads = (int)v[6],
                            .vocab = (int)v[4],
                            .max_positions = (int)v[5],
                            .rope_theta = 10000,
                            .norm_eps = 1e-6};
  if (m->hidden % m->heads || (m->hidden / m->heads) % 2 || m->heads % m->kv_heads)
    return fail(err, err_size,
                "%s: hidden_size %d, %d heads, %d kv heads: not a shape hexic trains (heads "
                "divide hidden_size into an even head size; kv heads divide heads)",
                path, m->hidden, m->heads, m->kv_heads);
  int64_t head_dim;
  if (hx_json_get(root, "head_dim") && hx_json_get(root, "head_dim")->kind != HX_JSON_NULL &&
      (!hx_json_int(hx_json_get(root, "head_dim"), 1, 1 << 20, &head_dim) ||
       head_dim != m->hidden / m->heads))
    return fail(err, err_size, "%s: head_dim is not hidden_size / num_attention_heads (%d)", path,
                m->hidden / m->heads);
  return true;
}

bool hx_hf_config_read(const char *path, struct hx_hf_model *m, char *err, size_t err_size) {
  struct hx_json *root = hx_json_parse_file(path, HX_JSON_CONFIG_LIMIT, err, err_size);
  if (!root)
    return false;
  bool ok = (root->kind == HX_JSON_OBJECT || fail(err, err_size, "%s: not a JSON object", path)) &&
            supported_architecture(root, path, err, err_size) &&
            supported_features(root, path, err, err_size) &&
            read_shape(root, m, path, err, err_size) &&
            read_rope(root, m, path, err, err_size) &&
            get_number(root, "rms_norm_eps", 1e-6, &m->norm_eps, path, err, err_size);
  const struct hx_json *tie = hx_json_get(root, "tie_word_embeddings");
  if (ok && tie && tie->kind != HX_JSON_NULL)
    ok = tie->kind == HX_JSON_BOOL ||
         fail(err, err_size, "%s: tie_word_embeddings is not true or false", path);
  if (ok)
    m->tied = tie && tie->kind == HX_JSON_BOOL && tie->boolean;
  const struct hx_json *window = hx_json_get(root, "sliding_window");
  int64_t w;
  if (ok && window && window->kind != HX_JSON_NULL && hx_json_int(window, 1, INT32_MAX, &w) &&
      w < m->max_positions)
    m->max_positions = (int)w; /* full attention equals the window up to its length */
  /* the .hx ranges (passes/sema.c); a subnormal eps would not read back */
  if (ok && (m->rope_theta > 1e12 || m->norm_eps > 1 || m->norm_eps < DBL_MIN))
    ok = fail(err, err_size, "%s: rope_theta or rms_norm_eps outside hexic's ranges", path);
  hx_json_free(root);
  return ok;
}

/* v as the shortest text strtod reads back as v (%.10g lost
 * 123456789012.5's last digits), an integer without an exponent (10000,
 * 500000, 1e-05; %g alone writes 1e+04): equal values print equal, so the
 * model line compares by its text, and the .hx lexer reads each as a number. */
static void format_shortest(char *buf, size_t size, double v) {
  if (v == (double)(long long)v && v > -1e15 && v < 1e15) {
    snprintf(buf, size, "%lld", (long long)v);
    return;
  }
  for (int digits = 1; digits <= 17; digits++) {
    snprintf(buf, size, "%.*g", digits, v);
    if (strtod(buf, NULL) == v)
      return;
  }
}

void hx_hf_model_line(const struct hx_hf_model *m, char *buf, size_t size) {
  char theta[32], eps[32];
  format_shortest(theta, sizeof theta, m->rope_theta);
  format_shortest(eps, sizeof eps, m->norm_eps);
  int n = snprintf(buf, size,
                   "layers %d hidden %d ffn %d heads %d kv_heads %d vocab %d tie_embeddings %d "
                   "rope_theta %s norm_eps %s",
                   m->layers, m->hidden, m->ffn, m->heads, m->kv_heads, m->vocab, m->tied, theta,
                   eps);
  if (m->rope_factor > 0 && n > 0 && (size_t)n < size) { /* only then: older lines are as before */
    char factor[32], low[32], high[32];
    format_shortest(factor, sizeof factor, m->rope_factor);
    format_shortest(low, sizeof low, m->rope_low_freq_factor);
    format_shortest(high, sizeof high, m->rope_high_freq_factor);
    snprintf(buf + n, size - (size_t)n,
             " rope_scaling llama3 factor %s low_freq_factor %s high_freq_factor %s "
             "original_max_len %d",
             factor, low, high, m->rope_original_max_len);
  }
}

/* The scaling tail of a model line from `line` on (nothing: none); false
 * when it is not hx_hf_model_line's. */
static bool parse_scaling(const char *line, struct hx_hf_model *m) {
  int used = 0;
  if (!*line)
    return true;
  return sscanf(line,
                " rope_scaling llama3 factor %lf low_freq_factor %lf high_freq_factor %lf "
                "original_max_len %d%n",
                &m->rope_factor, &m->rope_low_freq_factor, &m->rope_high_freq_factor,
                &m->rope_original_max_len, &used) == 4 &&
         !line[used] && m->rope_factor >= 1 && isfinite(m->rope_factor) &&
         m->rope_low_freq_factor > 0 && m->rope_high_freq_factor > m->rope_low_freq_factor &&
         isfinite(m->rope_high_freq_factor) && m->rope_original_max_len > 0;
}

bool hx_hf_parse_model_line(const char *line, struct hx_hf_model *m) {
  int tied = 0, used = 0, more = 0;
  *m = (struct hx_hf_model){0};
  bool ok =
      sscanf(line, "layers %d hidden %d ffn %d heads %d kv_heads %d vocab %d tie_embeddings %d%n",
             &m->layers, &m->hidden, &m->ffn, &m->heads, &m->kv_heads, &m->vocab, &tied,
             &used) == 7;
  /* an older hexic's line ends there: rope_theta and norm_eps stay 0 (not recorded) */
  if (ok && line[used])
    ok = sscanf(line + used, " rope_theta %lf norm_eps %lf%n", &m->rope_theta, &m->norm_eps,
                &more) == 2 &&
         m->rope_theta > 0 && m->norm_eps > 0 && isfinite(m->rope_theta) &&
         isfinite(m->norm_eps) && parse_scaling(line + used + more, m);
  if (ok)
    more += (int)strlen(line + used + more);
  ok = ok && !line[used + more];
  m->tied = tied != 0;
  return ok && m->layers > 0 && m->hidden > 0 && m->ffn > 0 && m->heads > 0 && m->kv_heads > 0 &&
         m->vocab > 0 && m->hidden % m->heads == 0 && m->heads % m->kv_heads == 0;
}

void hx_hf_write_hx(FILE *f, const struct hx_hf_model *m, const char *name, const char *source) {
  /* the path in a comment: a newline in it would start a line of the .hx */
  size_t shown_size = 4 * strlen(source) + 1;
  char *shown = malloc(shown_size), theta[32], eps[32];
  format_shortest(theta, sizeof theta, m->rope_theta);
  format_shortest(eps, sizeof eps, m->norm_eps);
  fprintf(f,
          "# Written by hexic-ckpt import-hf from %s.\n"
          "model \"%s\" {\n"
          "  layers = %d; hidden = %d; ffn = %d; heads = %d; kv_heads = %d\n"
          "  vocab = %d; seq_len = %d\n"
          "  rope_theta = %s; norm_eps = %s; tie_embeddings = %s\n",
          shown ? hx_rt_printable(source, shown, shown_size) : "(a path)", name, m->layers,
          m->hidden, m->ffn, m->heads, m->kv_heads, m->vocab, m->max_positions, theta, eps,
          m->tied ? "true" : "false");
  if (m->rope_factor > 0) {
    char factor[32], low[32], high[32];
    format_shortest(factor, sizeof factor, m->rope_factor);
    format_shortest(low, sizeof low, m->rope_low_freq_factor);
    format_shortest(high, sizeof high, m->rope_high_freq_factor);
    fprintf(f,
            "  rope_scaling = llama3; rope_factor = %s; rope_low_freq_factor = %s\n"
            "  rope_high_freq_factor = %s; rope_original_max_len = %d\n",
            factor, low, high, m->rope_original_max_len);
  }
  fputs("}\n", f);
  free(shown);
}

void hx_hf_config_write(FILE *f, const struct hx_hf_model *m, const char *dtype) {
  char theta[32], eps[32];
  format_shortest(theta, sizeof theta, m->rope_theta);
  format_shortest(eps, sizeof eps, m->norm_eps);
  /* LlamaConfig's defaults are not hexic's (rms_norm_eps 1e-6, 2048
   * positions, untied): every field is written, none left to them */
  fprintf(f,
          "{\n  \"architectures\": [\"LlamaForCausalLM\"],\n  \"model_type\": \"llama\",\n"
          "  \"hidden_size\": %d,\n  \"intermediate_size\": %d,\n  \"num_hidden_layers\": %d,\n"
          "  \"num_attention_heads\": %d,\n  \"num_key_value_heads\": %d,\n  \"head_dim\": %d,\n"
          "  \"vocab_size\": %d,\n  \"max_position_embeddings\": %d,\n"
          "  \"rms_norm_eps\": %s,\n  \"rope_theta\": %s,\n",
          m->hidden, m->ffn, m->layers, m->heads, m->kv_heads, m->hidden / m->heads, m->vocab,
          m->max_positions, eps, theta);
  if (m->rope_factor > 0) {
    char factor[32], low[32], high[32];
    format_shortest(factor, sizeof factor, m->rope_factor);
    format_shortest(low, sizeof low, m->rope_low_freq_factor);
    format_shortest(high, sizeof high, m->rope_high_freq_factor);
    fprintf(f,
            "  \"rope_scaling\": {\"rope_type\": \"llama3\", \"factor\": %s, "
            "\"low_freq_factor\": %s, \"high_freq_factor\": %s, "
            "\"original_max_position_embeddings\": %d},\n",
            factor, low, high, m->rope_original_max_len);
  } else {
    fputs("  \"rope_scaling\": null,\n", f);
  }
  fprintf(f,
          "  \"hidden_act\": \"silu\",\n  \"attention_bias\": false,\n  \"mlp_bias\": false,\n"
          "  \"attention_dropout\": 0.0,\n  \"pretraining_tp\": 1,\n"
          "  \"tie_word_embeddings\": %s,\n  \"torch_dtype\": \"%s\",\n  \"use_cache\": true\n}\n",
          m->tied ? "true" : "false", dtype);
}

bool hx_hf_model_differs(const struct hx_hf_model *a, const struct hx_hf_model *b, char *buf,
                         size_t size) {
  const struct {
    const char *name;
    double a, b;
  } fields[] = {
      {"num_hidden_layers", a->layers, b->layers},
      {"hidden_size", a->hidden, b->hidden},
      {"intermediate_size", a->ffn, b->ffn},
      {"num_attention_heads", a->heads, b->heads},
      {"num_key_value_heads", a->kv_heads, b->kv_heads},
      {"vocab_size", a->vocab, b->vocab},
      {"tie_word_embeddings", a->tied, b->tied},
      {"rope_theta", a->rope_theta, b->rope_theta},
      {"rms_norm_eps", a->norm_eps, b->norm_eps},
      {"rope_scaling.factor (0: no llama3 scaling)", a->rope_factor, b->rope_factor},
      {"rope_scaling.low_freq_factor", a->rope_low_freq_factor, b->rope_low_freq_factor},
      {"rope_scaling.high_freq_factor", a->rope_high_freq_factor, b->rope_high_freq_factor},
      {"rope_scaling.original_max_position_embeddings", a->rope_original_max_len,
       b->rope_original_max_len},
  };
  for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++)
    if (fields[i].a != fields[i].b) {
      char va[32], vb[32];
      format_shortest(va, sizeof va, fields[i].a);
      format_shortest(vb, sizeof vb, fields[i].b);
      snprintf(buf, size, "%s is %s where this program's model has %s", fields[i].name, va, vb);
      return true;
    }
  return false;
}
