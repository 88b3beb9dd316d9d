# Llama-2-13B (Touvron et al. 2023, table 1 and the released config.json):
# the model of the HexiScale case study, trained with its global batch of 64.
model "llama2-13b" {
  layers = 40; hidden = 5120; ffn = 13824; heads = 40; kv_heads = 40
  vocab = 32000; seq_len = 4096
}
train {
  global_batch = 64        # sequences per optimizer step
  precision = bf16         # bf16 | fp32
  recompute = full         # none | full | auto
  lr = 3e-4; steps = 100; seed = 1
}
