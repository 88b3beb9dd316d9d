# A tiny Llama that trains on CPU in seconds: the end-to-end demo and the
# numeric tests use it. No `data` line: the demo passes its data separately
# (without one, training uses the synthetic token stream of docs/model-spec.md).
model "tiny" {
  layers = 4; hidden = 64; ffn = 176; heads = 4; kv_heads = 2
  vocab = 256; seq_len = 64
}
train {
  global_batch = 8
  precision = fp32
  lr = 1e-3; warmup_steps = 10; steps = 300; seed = 1
}
# 256 GPUs of three types: 8 H100, 12 A100 and 12 RTX 4090 servers of 8 GPUs
# each. InfiniBand NDR (400 Gbps) joins the H100 servers to one another;
# everything else shares a 100 Gbps network. Peaks: dense bf16.
gpu "H100"    { tflops = 989;   memory = 80 GiB }
gpu "A100"    { tflops = 312;   memory = 80 GiB }
gpu "RTX4090" { tflops = 165.2; memory = 24 GiB }

node "h100"  { gpu = "H100";    gpus = 8; bandwidth = 450 GB/s; latency = 2 us;  replicas = 8 }
node "a100"  { gpu = "A100";    gpus = 8; bandwidth = 300 GB/s; latency = 2 us;  replicas = 12 }
node "g4090" { gpu = "RTX4090"; gpus = 8; bandwidth = 25 GB/s;  latency = 10 us; replicas = 12 }

link "h100" "h100" { bandwidth = 400 Gbps; latency = 3 us }   # between the H100 replicas
network { bandwidth = 100 Gbps; latency = 10 us }
