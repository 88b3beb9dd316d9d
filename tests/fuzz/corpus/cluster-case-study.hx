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
# The HexiScale case study (FlashFlex, arXiv 2409.01143): Llama-2-13B on
# three machines joined by slow Ethernet — 3 x A800 (NVLink), 3 x RTX 4090 and
# 2 x RTX 3090 (PCIe). GPU figures are the vendors' dense bf16 peaks; the
# paper measured Megatron's best symmetric plan at 41.52 s/iteration and
# HexiScale's at 25.55 s on this cluster.
gpu "A800"    { tflops = 312;   memory = 80 GiB; mem_bandwidth = 2039 GB/s }
gpu "RTX4090" { tflops = 165.2; memory = 24 GiB; mem_bandwidth = 1008 GB/s }
gpu "RTX3090" { tflops = 71;    memory = 24 GiB; mem_bandwidth = 936 GB/s }

node "a800"  { gpu = "A800";    gpus = 3; bandwidth = 200 GB/s; latency = 2 us }  # NVLink (A800: 400 GB/s bidirectional)
node "g4090" { gpu = "RTX4090"; gpus = 3; bandwidth = 25 GB/s;  latency = 10 us } # PCIe 4.0 x16, no P2P
node "g3090" { gpu = "RTX3090"; gpus = 2; bandwidth = 16 GB/s;  latency = 10 us } # PCIe, shared x8 lanes

network { bandwidth = 1 Gbps; latency = 200 us }   # the machines' Ethernet
