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
