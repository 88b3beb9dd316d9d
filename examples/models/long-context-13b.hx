# A long-context model for HexiSeq (asymmetric context/head parallelism): the
# Llama-2-13B shapes at 128K tokens per sequence, a few sequences per step as
# in the HexiSeq evaluation (global batch 8). RoPE base raised as long-context
# fine-tunes of Llama 2 do (Code Llama uses 1e6).
model "long-context-13b" {
  layers = 40; hidden = 5120; ffn = 13824; heads = 40
  vocab = 32000; seq_len = 131072
  rope_theta = 1000000
}
train {
  global_batch = 8
  precision = bf16
  recompute = full
  lr = 1e-4; steps = 100; seed = 1
}
