model "m" {
  layers = 2; hidden = 64; ffn = 128; heads = 4
  vocab = 100; seq_len = 32
}
train { global_batch = 8 }
// replica names, links by base and by replica name, units glued to numbers
gpu "G" { tflops = 10; memory = 0.5GiB; mem_bandwidth = 100GB/s }
node "r" { gpu = "G"; gpus = 2; bandwidth = 10 GB/s; latency = 1us; replicas = 3 }
node "s" { gpu = "G"; gpus = 1 }
link "r" "s" { bandwidth = 2 GB/s; latency = 5 us }
link "r-1" "s" { bandwidth = 3 GB/s; latency = 4 us }   # more specific than "r"
link "r" "r" { bandwidth = 4 GB/s; latency = 3 us }
link "r-0" "r-2" { bandwidth = 5 GB/s; latency = 2 us }
