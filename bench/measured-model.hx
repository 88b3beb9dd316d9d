# The model bench/measured.sh trains on an emulated mixed cluster of CPU
# ranks: big enough that compute, not MPI's fixed costs, fills a step
# (about 64 GFLOP per step), small enough for twelve steps of each plan in
# about a minute. A batch of 48 sequences lets hexic balance a device 2x
# slower than the machine against three 6x slower (24 + 8 + 8 + 8); with 16
# the split cannot balance (9/3/2/2: 18 time units against 16 ideal).
model "bench-small" {
  layers = 8; hidden = 128; ffn = 344; heads = 4; kv_heads = 4
  vocab = 256; seq_len = 128
}
train {
  global_batch = 48
  precision = fp32
  lr = 1e-3; steps = 10; seed = 1
}
