/* Hugging Face Llama (and Mistral) naming and layout against hexic's
 * canonical one (docs/model-spec.md), and config.json.
 *
 * Names: tok_emb = model.embed_tokens.weight; per layer l
 * model.layers.l.{input_layernorm, self_attn.q_proj, self_attn.k_proj,
 * self_attn.v_proj, self_attn.o_proj, post_attention_layernorm,
 * mlp.gate_proj, mlp.up_proj, mlp.down_proj}.weight; final_norm =
 * model.norm.weight; lm_head = lm_head.weight (absent when tied). Shapes are
 * the same ([out, in]); norms are 1-D [D] there, [1, D] in hexic.
 *
 * RoPE: hexic rotates interleaved pairs (2i, 2i+1) of each head (the spec);
 * Hugging Face's rotate_half pairs (i, i + hd/2). The same model therefore
 * stores the rows of q_proj and k_proj permuted within each head: Hugging
 * Face row j of a head is hexic row 2j for j < hd/2 and 2(j - hd/2) + 1
 * after (the permutation of HF's convert_llama_weights_to_hf.py). */
#ifndef HX_CKPT_HF_LLAMA_H
#define HX_CKPT_HF_LLAMA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

struct hx_hf_model {
  int layers, hidden, ffn, heads, kv_heads, vocab, max_positions;
  double rope_theta, norm_eps;
  bool tied;
  /* Llama 3's RoPE frequency scaling (rope_type "llama3"; kernels/cpu/llama.h
   * hxk_dims): rope_factor 0 is none. */
  double rope_factor, rope_low_freq_factor, rope_high_freq_factor;
  int rope_original_max_len;
};

/* The spec's tensors of a model in the spec's order: count, and entry i's
 * spec id (tok_emb 0, final_norm 1, lm_head 2, layer tensor j of layer l
 * 16 + 16 l + j) and full shape [rows, cols]. */
int hx_hf_tensor_count(const struct hx_hf_model *m);
uint64_t hx_hf_tensor_id(const struct hx_hf_model *m, int i);
void hx_hf_tensor_shape(const struct hx_hf_model *m, uint64_t id, int64_t *rows, int64_t *cols);

/* Hugging Face's name of spec tensor id; hexic's canonical name (tok_emb,
 * layers.3.wq, ...) is hx_rt_ckpt_tensor_name's. */
void hx_hf_name(uint64_t id, char *buf, size_t size);
/* The spec id of Hugging Face's name of a parameter of m (the inverse of
 * hx_hf_name, in constant time); false when name is none of m's. */
bool hx_hf_id_of_name(const struct hx_hf_model *m, const char *name, uint64_t *id);
/* The kv or query heads whose rows RoPE permutes (wq: heads, wk: kv_heads), 0 otherwise. */
int hx_hf_rope_heads(const struct hx_hf_model *m, uint64_t id);
/* Row permutation of one head of hd rows: hexic's row of Hugging Face row j. */
int64_t hx_hf_rope_row(int64_t j, int64_t head_dim);

/* Parameters of the model, by the spec's list. */
int64_t hx_hf_parameter_count(const struct hx_hf_model *m);

/* Reads a Llama/Mistral config.json, in transformers 4's layout (top-level
 * rope_theta, rope_scaling) or 5's (rope_parameters {rope_theta, rope_type,
 * ...}); an architecture, activation, RoPE type (other than default and
 * llama3) or bias hexic does not train is refused naming the field. */
bool hx_hf_config_read(const char *path, struct hx_hf_model *m, char *err, size_t err_size);

/* config.json for m (transformers 4's layout, which 5 reads too): every
 * field LlamaConfig needs with hexic's values, tie_word_embeddings and
 * torch_dtype (dtype: "float32" or "bfloat16"). */
void hx_hf_config_write(FILE *f, const struct hx_hf_model *m, const char *dtype);

/* The first field in which a and b differ as config.json names it
 * ("num_attention_heads 3, where ... 6"), written to buf; false when they
 * are the same model (max_positions aside). */
bool hx_hf_model_differs(const struct hx_hf_model *a, const struct hx_hf_model *b, char *buf,
                         size_t size);

/* The model line a hexic checkpoint's MANIFEST records for m (the executor's
 * format; Llama 3's scaling appended only when m has it), and its reading
 * back. */
void hx_hf_model_line(const struct hx_hf_model *m, char *buf, size_t size);
bool hx_hf_parse_model_line(const char *line, struct hx_hf_model *m);

/* The .hx model block of m, named name. */
void hx_hf_write_hx(FILE *f, const struct hx_hf_model *m, const char *name, const char *source);

#endif
