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
# One workstation with 4 x RTX 4090 (24 GiB each, PCIe 4.0): 96 GiB in all,
# too little for Llama-2-70B's weights and optimizer state — the planner must
# say no feasible plan (exit 3) rather than emit one that cannot run.
gpu "RTX4090" { tflops = 165.2; memory = 24 GiB }
node "ws" { gpu = "RTX4090"; gpus = 4; bandwidth = 25 GB/s; latency = 10 us }
