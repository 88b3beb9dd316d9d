# The tiny Llama of examples/models/tiny.hx with a global batch of 8: the
# hand-written plans under tests/exec/plans/ split exactly 8 sequences, so
# they must not follow the example when its batch changes.
model "tiny" {
  layers = 4; hidden = 64; ffn = 176; heads = 4; kv_heads = 2
  vocab = 256; seq_len = 64
}
train {
  global_batch = 8
  precision = fp32
  lr = 1e-3; warmup_steps = 10; steps = 300; seed = 1
}
