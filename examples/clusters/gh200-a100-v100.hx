# Three GPU generations side by side, 16 GPUs: a GH200 node, an A100 node
# and two V100 nodes of 4 GPUs each, joined by 5.8 GB/s between nodes
# (the heterogeneous setting of a published planner comparison). GPU
# figures are the vendors' dense bf16 (V100: fp16) peaks.
gpu "GH200"    { tflops = 989; memory = 96 GiB; mem_bandwidth = 4000 GB/s }
gpu "A100-40"  { tflops = 312; memory = 40 GiB; mem_bandwidth = 1555 GB/s }
gpu "V100-32"  { tflops = 125; memory = 32 GiB; mem_bandwidth = 900 GB/s }

node "gh200" { gpu = "GH200";   gpus = 4; bandwidth = 450 GB/s; latency = 2 us }  # NVLink 4
node "a100"  { gpu = "A100-40"; gpus = 4; bandwidth = 300 GB/s; latency = 2 us }  # NVLink 3
node "v100a" { gpu = "V100-32"; gpus = 4; bandwidth = 68 GB/s;  latency = 5 us }  # NVLink 2, partial mesh
node "v100b" { gpu = "V100-32"; gpus = 4; bandwidth = 68 GB/s;  latency = 5 us }

network { bandwidth = 5.8 GB/s; latency = 20 us }
