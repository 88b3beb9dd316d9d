# Six CPU-sized devices (examples/clusters/cpu8-long.hx without its two slow
# ranks) for examples/models/tiny-long.hx: no symmetric DP/TP/PP shape divides
# the model and its global batch of 4 over 6 devices, and no whole 2048-token
# sequence fits one device, so only split sequences (HexiSeq) can plan it.
gpu "cpu-fast" { tflops = 0.02;  memory = 1548 MiB; efficiency = 1; mem_bandwidth = 10 GB/s }
gpu "cpu-mid"  { tflops = 0.01;  memory = 1548 MiB; efficiency = 1; mem_bandwidth = 10 GB/s }

node "fast" { gpu = "cpu-fast"; gpus = 3; bandwidth = 5 GB/s; latency = 2 us }
node "mid"  { gpu = "cpu-mid";  gpus = 3; bandwidth = 5 GB/s; latency = 2 us }

network { bandwidth = 1 GB/s; latency = 20 us }
