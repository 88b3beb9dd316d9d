model "m" {
  layers = 2; hidden = 64; ffn = 128; heads = 4
  vocab = 100; seq_len = 32
}
train {
  global_batch = 8
}
gpu "V100-32GB" { tflops = 125; memory = 32 GiB; cuda_arch = 70 }
node "n" { gpu = "V100-32GB"; gpus = 1 }
