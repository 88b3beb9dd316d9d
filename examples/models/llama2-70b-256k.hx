# Llama-2-70B's shape at 262144-token sequences (a long-context fine-tune):
# the case of issue 25 item 3, where one sequence's activations decide
# whether a TP stage fits a 48 GiB GPU. 16 sequences per step; RoPE base
# raised as long-context fine-tunes of Llama 2 do.
model "llama2-70b-256k" {
  layers = 80; hidden = 8192; ffn = 28672; heads = 64; kv_heads = 8
  vocab = 32000; seq_len = 262144
  rope_theta = 1000000; norm_eps = 1e-5
}
train {
  global_batch = 16
  precision = bf16
  recompute = full
  lr = 1.5e-4; warmup_steps = 10; steps = 100; seed = 1
}
