# --target=cuda (cuda-gpu-unknown.args): a GPU type whose name hexic does not
# know needs cuda_arch; the unused one is not asked for, the known ones are fine.
model "m" {
  layers = 2; hidden = 64; ffn = 128; heads = 4
  vocab = 100; seq_len = 32
}
train {
  global_batch = 8
}
gpu "MI300X" { tflops = 1307; memory = 192 GiB }
gpu "Unused" { tflops = 1; memory = 1 GiB }
gpu "NVIDIA GeForce RTX 4090" { tflops = 165; memory = 24 GiB }
gpu "A10G" { tflops = 125; memory = 24 GiB }
node "n" { gpu = "MI300X"; gpus = 1 }
node "m" { gpu = "NVIDIA GeForce RTX 4090"; gpus = 1 }
node "k" { gpu = "A10G"; gpus = 1 }
network { bandwidth = 10 GB/s }
