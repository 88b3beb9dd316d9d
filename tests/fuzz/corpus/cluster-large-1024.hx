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
# 1024 GPUs of four types (the scale of the HexiSeq scheduler-time figure):
# 32 servers of 8 each of H100, A100, A800 and L40S. Same-type servers share
# an InfiniBand island (400 Gbps) except the PCIe-bound L40S servers; islands
# meet on a 25 GB/s network.
gpu "H100" { tflops = 989; memory = 80 GiB }
gpu "A100" { tflops = 312; memory = 80 GiB }
gpu "A800" { tflops = 312; memory = 80 GiB }
gpu "L40S" { tflops = 362; memory = 48 GiB }

node "h100" { gpu = "H100"; gpus = 8; bandwidth = 450 GB/s; latency = 2 us; replicas = 32 }
node "a100" { gpu = "A100"; gpus = 8; bandwidth = 300 GB/s; latency = 2 us; replicas = 32 }
node "a800" { gpu = "A800"; gpus = 8; bandwidth = 200 GB/s; latency = 2 us; replicas = 32 }
node "l40s" { gpu = "L40S"; gpus = 8; bandwidth = 32 GB/s;  latency = 5 us; replicas = 32 }

link "h100" "h100" { bandwidth = 400 Gbps; latency = 3 us }
link "a100" "a100" { bandwidth = 400 Gbps; latency = 3 us }
link "a800" "a800" { bandwidth = 400 Gbps; latency = 3 us }
network { bandwidth = 25 GB/s; latency = 5 us }
