# LLaMA-30B (Touvron et al. 2023, "LLaMA", table 2: 32.5B parameters):
# 60 layers of 6656, 52 heads, FFN 17920, 2K context; the 30B-class model of
# the HexiScale MFU tables, with global batch 32.
model "llama-30b" {
  layers = 60; hidden = 6656; ffn = 17920; heads = 52
  vocab = 32000; seq_len = 2048
}
train {
  global_batch = 32
  precision = bf16
  recompute = full
  lr = 1.5e-4; warmup_steps = 10; steps = 100; seed = 1
}
