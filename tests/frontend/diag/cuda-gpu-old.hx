# --target=cuda (cuda-gpu-old.args): V100 and T4 known by name, both refused:
# CUDA 13 dropped Volta, and the kernels need sm_80.
model "m" {
  layers = 2; hidden = 64; ffn = 128; heads = 4
  vocab = 100; seq_len = 32
}
train {
  global_batch = 8
}
gpu "Tesla V100" { tflops = 125; memory = 32 GiB }
gpu "T4" { tflops = 65; memory = 16 GiB }
node "n" { gpu = "Tesla V100"; gpus = 1 }
node "m" { gpu = "T4"; gpus = 1 }
network { bandwidth = 10 GB/s }
