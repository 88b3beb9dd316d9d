# Llama-2-7B (Touvron et al. 2023; released config.json): 32 layers of 4096,
# SwiGLU FFN 11008, 32 heads, 4K context. Global batch 64 as in the case study.
model "llama2-7b" {
  layers = 32; hidden = 4096; ffn = 11008; heads = 32
  vocab = 32000; seq_len = 4096
}
train {
  global_batch = 64
  precision = bf16
  recompute = auto
  lr = 3e-4; warmup_steps = 10; steps = 100; seed = 1
}
