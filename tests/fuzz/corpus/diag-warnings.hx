model "m" {
  layers = 2; hidden = 64; ffn = 128; heads = 4
  vocab = 100; seq_len = 32
}
train { global_batch = 8 }
gpu "G" { tflops = 10; memory = 8 GiB }
gpu "Unused" { tflops = 1; memory = 1 GiB }
node "n" { gpu = "G"; gpus = 2; bandwidth = 1 GB/s; replicas = 2 }
node "b" { gpu = "G"; gpus = 1 }
link "n" "b" { bandwidth = 4 GB/s }          # faster than inside n: warning
link "n" "n" { bandwidth = 100 Mbps }        # slower than the network: warning
network { bandwidth = 1 Gbps }
