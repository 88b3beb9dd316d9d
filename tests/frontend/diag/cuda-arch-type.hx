model "m" {
  layers = 2; hidden = 64; ffn = 128; heads = 4
  vocab = 100; seq_len = 32
}
train {
  global_batch = 8
}
gpu "H100" { tflops = 989; memory = 80 GiB; cuda_arch = 9.0 }
gpu "L40S" { tflops = 362; memory = 48 GiB; cuda_arch = "sm_89" }
node "n" { gpu = "H100"; gpus = 1 }
node "m" { gpu = "L40S"; gpus = 1 }
network { bandwidth = 10 GB/s }
