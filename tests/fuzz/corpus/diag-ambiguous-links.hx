model "m" {
  layers = 2; hidden = 64; ffn = 128; heads = 4
  vocab = 100; seq_len = 32
}
train {
  global_batch = 8
}
gpu "G" { tflops = 10; memory = 8 GiB }
node "n" { gpu = "G"; gpus = 2; bandwidth = 10 GB/s; replicas = 2 }
node "b" { gpu = "G"; gpus = 1; replicas = 2 }
link "n-0" "b" { bandwidth = 1 GB/s }
link "n" "b-0" { bandwidth = 2 GB/s }
network { bandwidth = 1 GB/s }
