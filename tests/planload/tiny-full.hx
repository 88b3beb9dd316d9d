# The tiny Llama of examples/models/tiny.hx trained with recompute = full:
# a plan.json edited to skip recompute on a stage must then be refused.
model "tiny" {
  layers = 4; hidden = 64; ffn = 176; heads = 4; kv_heads = 2
  vocab = 256; seq_len = 64
}
train {
  global_batch = 32
  precision = fp32
  recompute = full
  lr = 1e-3; warmup_steps = 10; steps = 300; seed = 1
}
