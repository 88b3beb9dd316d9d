# train.sequence_parallel is true or false (default true)
model "m" {
  layers = 2; hidden = 64; ffn = 128; heads = 4
  vocab = 100; seq_len = 32
}
train {
  global_batch = 8; sequence_parallel = yes
}
gpu "G" { tflops = 10; memory = 8 GiB }
node "n" { gpu = "G"; gpus = 2; bandwidth = 10 GB/s }
