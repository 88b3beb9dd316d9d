# --target=cuda (cuda-arch-name.args): a cuda_arch written against the GPU's
# name. sm_90 code does not run on an A100 (sm_80): an error at the value.
# sm_80 code runs on an H100 (sm_90) only through its PTX, and on an RTX 4090
# (sm_89) as sm_86 code: warnings. The L40 says what its name says: silent.
model "m" {
  layers = 2; hidden = 64; ffn = 128; heads = 4
  vocab = 100; seq_len = 32
}
train {
  global_batch = 8
}
gpu "A100" { tflops = 312; memory = 80 GiB; cuda_arch = 90 }
gpu "NVIDIA H100 SXM5" { tflops = 989; memory = 80 GiB; cuda_arch = 80 }
gpu "RTX 4090" { tflops = 165; memory = 24 GiB; cuda_arch = 86 }
gpu "L40" { tflops = 181; memory = 48 GiB; cuda_arch = 89 }
node "a" { gpu = "A100"; gpus = 1 }
node "h" { gpu = "NVIDIA H100 SXM5"; gpus = 1 }
node "r" { gpu = "RTX 4090"; gpus = 1 }
node "l" { gpu = "L40"; gpus = 1 }
network { bandwidth = 10 GB/s }
