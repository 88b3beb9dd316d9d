# comments: '#' or '//' to the end of the line
model "llama2-13b" {
  layers = 40; hidden = 5120; ffn = 13824; heads = 40; kv_heads = 40
  vocab = 32000; seq_len = 4096
}
train {
  global_batch = 64        # sequences per optimizer step
  precision = bf16         # bf16 | fp32
  recompute = full         # none | full | auto
  lr = 3e-4; steps = 100; seed = 1
  data = "data/train.bin"  // optional; synthetic tokens when absent
}
gpu "A800"    { tflops = 312;   memory = 80 GiB }
gpu "RTX4090" { tflops = 165.2; memory = 24 GiB }
node "a800"   { gpu = "A800"; gpus = 3; bandwidth = 200 GB/s; latency = 2 us }
node "g4090"  { gpu = "RTX4090"; gpus = 4; bandwidth = 16 GB/s; latency = 10 us; replicas = 2 }
link "a800" "g4090" { bandwidth = 10 Gbps; latency = 100 us }
link "g4090" "g4090" { bandwidth = 25 Gbps; latency = 20 us }   # between the replicas of g4090
network { bandwidth = 1 Gbps; latency = 200 us }                 # any node pair with no link
