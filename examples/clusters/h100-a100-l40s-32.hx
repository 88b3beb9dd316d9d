# 32 GPUs in four 8-GPU servers: one H100-80 (NVLink 4), two A100-80
# (NVLink 3) and one L40S-48 (PCIe 4, no NVLink), on a 200 Gbps network.
# Peaks: vendors' dense bf16. The long-context case of docs/memory-model.md.
gpu "H100-80" { tflops = 989; memory = 80 GiB; mem_bandwidth = 3350 GB/s }
gpu "A100-80" { tflops = 312; memory = 80 GiB; mem_bandwidth = 2039 GB/s }
gpu "L40S-48" { tflops = 362; memory = 48 GiB; mem_bandwidth = 864 GB/s }

node "h100"  { gpu = "H100-80"; gpus = 8; bandwidth = 400 GB/s; latency = 2 us }
node "a100a" { gpu = "A100-80"; gpus = 8; bandwidth = 300 GB/s; latency = 2 us }
node "a100b" { gpu = "A100-80"; gpus = 8; bandwidth = 300 GB/s; latency = 2 us }
node "l40s"  { gpu = "L40S-48"; gpus = 8; bandwidth = 64 GB/s;  latency = 5 us }

network { bandwidth = 25 GB/s; latency = 10 us }
