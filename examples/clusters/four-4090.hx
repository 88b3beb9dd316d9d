# One workstation with 4 x RTX 4090 (24 GiB each, PCIe 4.0): 96 GiB in all,
# too little for Llama-2-70B's weights and optimizer state — the planner must
# say no feasible plan (exit 3) rather than emit one that cannot run.
gpu "RTX4090" { tflops = 165.2; memory = 24 GiB }
node "ws" { gpu = "RTX4090"; gpus = 4; bandwidth = 25 GB/s; latency = 10 us }
