# copy_bandwidth: a bandwidth (a unit), positive when given.
model "m" {
  layers = 2; hidden = 64; ffn = 128; heads = 4
  vocab = 100; seq_len = 32
}
train {
  global_batch = 8
}
gpu "A" { tflops = 312; memory = 80 GiB; copy_bandwidth = 0 GB/s }
gpu "B" { tflops = 312; memory = 80 GiB; copy_bandwidth = 500 }
gpu "C" { tflops = 312; memory = 80 GiB; copy_bandwidth = 2 TB/s }
node "a" { gpu = "A"; gpus = 1 }
node "b" { gpu = "B"; gpus = 1 }
node "c" { gpu = "C"; gpus = 1 }
