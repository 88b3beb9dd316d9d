# Two architectures in one cluster for --target=cuda: a machine with two H100
# (Hopper, sm_90, NVLink) and one with two RTX 4090 (Ada, sm_89, PCIe), on
# 25 Gb Ethernet. The generated Makefile compiles the CUDA kernels once for
# sm_90 and once for sm_89, and links each rank against its own GPU's
# library; hexic knows both architectures from the names.
gpu "H100"    { tflops = 989;   memory = 80 GiB; mem_bandwidth = 3.35 TB/s }
gpu "RTX4090" { tflops = 165.2; memory = 24 GiB; mem_bandwidth = 1008 GB/s }

node "h100"  { gpu = "H100";    gpus = 2; bandwidth = 450 GB/s; latency = 2 us }  # NVLink 4
node "g4090" { gpu = "RTX4090"; gpus = 2; bandwidth = 25 GB/s;  latency = 10 us } # PCIe 4.0, no P2P

network { bandwidth = 25 Gbps; latency = 20 us }
