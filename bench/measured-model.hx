# The model bench/measured.sh trains on an emulated mixed cluster of CPU
# ranks: big enough that compute, not MPI's fixed costs, fills a step
# (about 20 GFLOP per step), small enough for ten steps in under a minute.
model "bench-small" {
  layers = 8; hidden = 128; ffn = 344; heads = 4; kv_heads = 4
  vocab = 256; seq_len = 128
}
train {
  global_batch = 16
  precision = fp32
  lr = 1e-3; steps = 10; seed = 1
}
