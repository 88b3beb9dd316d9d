# Llama-2-70B (Touvron et al. 2023; released config.json): 80 layers of 8192,
# FFN 28672, 64 query heads sharing 8 key/value heads (grouped-query attention).
model "llama2-70b" {
  layers = 80; hidden = 8192; ffn = 28672; heads = 64; kv_heads = 8
  vocab = 32000; seq_len = 4096
  rope_theta = 10000; norm_eps = 1e-5
}
train {
  global_batch = 64
  precision = bf16
  recompute = full
  lr = 1.5e-4; warmup_steps = 10; steps = 100; seed = 1
}
