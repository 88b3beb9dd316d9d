# examples/clusters/cpu8.hx with devices whose memory holds the weights of
# examples/models/tiny-long.hx but not the activations of one of its
# 2048-token sequences, so hexic's `auto` strategy splits the sequences
# (HexiSeq) instead of keeping them whole. The cost model keeps 1.5 GiB of
# every device in reserve (passes/cost/cost.h), so 1542 MiB leave 6 MiB for
# the model: a few MiB of weights and optimizer state, and the activations of
# a part of each sequence.
gpu "cpu-fast" { tflops = 0.02;  memory = 1542 MiB; efficiency = 1; mem_bandwidth = 10 GB/s }
gpu "cpu-mid"  { tflops = 0.01;  memory = 1542 MiB; efficiency = 1; mem_bandwidth = 10 GB/s }
gpu "cpu-slow" { tflops = 0.005; memory = 1542 MiB; efficiency = 1; mem_bandwidth = 10 GB/s }

node "fast" { gpu = "cpu-fast"; gpus = 3; bandwidth = 5 GB/s; latency = 2 us }
node "mid"  { gpu = "cpu-mid";  gpus = 3; bandwidth = 5 GB/s; latency = 2 us }
node "slow" { gpu = "cpu-slow"; gpus = 2; bandwidth = 5 GB/s; latency = 2 us }

network { bandwidth = 1 GB/s; latency = 20 us }   # loopback TCP between "machines"
