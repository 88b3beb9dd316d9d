# examples/clusters/cpu8.hx with devices whose memory holds the weights of
# examples/models/tiny-long.hx but not the activations of one of its
# 2048-token sequences, so hexic's `auto` strategy splits the sequences
# (HexiSeq) instead of keeping them whole. The cost model keeps 1.5 GiB of
# every device in reserve (passes/cost/cost.h), so 1546 MiB leave 10 MiB for
# what the rank programs allocate (memory_by_kind): a few MiB of weights and
# optimizer state, and the activations, hop buffers and scratch of a part of
# each sequence (a whole one needs 45 MiB: its attention scratch alone is
# 2 x 2048^2 floats).
gpu "cpu-fast" { tflops = 0.02;  memory = 1546 MiB; efficiency = 1; mem_bandwidth = 10 GB/s }
gpu "cpu-mid"  { tflops = 0.01;  memory = 1546 MiB; efficiency = 1; mem_bandwidth = 10 GB/s }
gpu "cpu-slow" { tflops = 0.005; memory = 1546 MiB; efficiency = 1; mem_bandwidth = 10 GB/s }

node "fast" { gpu = "cpu-fast"; gpus = 3; bandwidth = 5 GB/s; latency = 2 us }
node "mid"  { gpu = "cpu-mid";  gpus = 3; bandwidth = 5 GB/s; latency = 2 us }
node "slow" { gpu = "cpu-slow"; gpus = 2; bandwidth = 5 GB/s; latency = 2 us }

network { bandwidth = 1 GB/s; latency = 20 us }   # loopback TCP between "machines"
