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
# 32 GPUs of three types, like the mixed clusters of the HexiScale MFU tables:
# one 8 x A100 NVLink server, four 4 x RTX 4090 and two 4 x RTX 3090
# workstations (PCIe), on a 100 Gbps RoCE network. Peaks: vendor dense bf16.
gpu "A100"    { tflops = 312;   memory = 80 GiB }
gpu "RTX4090" { tflops = 165.2; memory = 24 GiB }
gpu "RTX3090" { tflops = 71;    memory = 24 GiB }

node "a100"  { gpu = "A100";    gpus = 8; bandwidth = 300 GB/s; latency = 2 us }
node "g4090" { gpu = "RTX4090"; gpus = 4; bandwidth = 25 GB/s;  latency = 10 us; replicas = 4 }
node "g3090" { gpu = "RTX3090"; gpus = 4; bandwidth = 16 GB/s;  latency = 10 us; replicas = 2 }

network { bandwidth = 100 Gbps; latency = 10 us }
