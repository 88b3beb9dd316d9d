# A tiny Llama with grouped-query attention (4 heads over 2 kv heads) and
# tied embeddings, for the checkpoint tests' second model: tok_emb on the
# first and the last stage, kv rows that TP splits.
model "gqa-tied" {
  layers = 4; hidden = 64; ffn = 176; heads = 4; kv_heads = 2
  vocab = 256; seq_len = 64; tie_embeddings = true
}
train {
  global_batch = 8
  precision = fp32
  lr = 1e-3; warmup_steps = 10; steps = 300; seed = 1
}
