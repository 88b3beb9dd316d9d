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
# 128 GPUs of the four types of the HexiSeq simulations (arXiv 2605.07569):
# four 8-GPU servers each of H100, A100, A800 and L40S, NVLink inside the
# servers (L40S: PCIe 4.0), 25 GB/s RDMA between them. Peaks: dense bf16.
gpu "H100" { tflops = 989; memory = 80 GiB; mem_bandwidth = 3350 GB/s }
gpu "A100" { tflops = 312; memory = 80 GiB; mem_bandwidth = 2039 GB/s }
gpu "A800" { tflops = 312; memory = 80 GiB; mem_bandwidth = 2039 GB/s }
gpu "L40S" { tflops = 362; memory = 48 GiB; mem_bandwidth = 864 GB/s }

node "h100" { gpu = "H100"; gpus = 8; bandwidth = 450 GB/s; latency = 2 us; replicas = 4 }
node "a100" { gpu = "A100"; gpus = 8; bandwidth = 300 GB/s; latency = 2 us; replicas = 4 }
node "a800" { gpu = "A800"; gpus = 8; bandwidth = 200 GB/s; latency = 2 us; replicas = 4 }
node "l40s" { gpu = "L40S"; gpus = 8; bandwidth = 32 GB/s;  latency = 5 us; replicas = 4 }

network { bandwidth = 25 GB/s; latency = 5 us }
