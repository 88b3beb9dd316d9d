# A profile names a GPU type no gpu block declares.
model "m" {
  layers = 2; hidden = 64; ffn = 128; heads = 4
  vocab = 100; seq_len = 32
}
train {
  global_batch = 8
}
gpu "A100" { tflops = 312; memory = 80 GiB }
node "n" { gpu = "A100"; gpus = 2; bandwidth = 300 GB/s }
profile "A10O" { tp = 1; micro_batch = [1, 2]; forward = [1 ms, 2 ms]; backward = [2 ms, 4 ms] }
