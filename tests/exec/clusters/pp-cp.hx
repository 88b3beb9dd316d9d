# Six CPU "devices" (four slow ones on one machine, a slow and a fast one
# alone): hexic's HexiSeq planner lays seqtiny.hx out on it as two pipeline
# stages, each a CP ring of 3 units cut differently (issue 14).
gpu "cpu-slow" { tflops = 0.007; memory = 4 GiB; efficiency = 1; mem_bandwidth = 10 GB/s }
gpu "cpu-slow2" { tflops = 0.007; memory = 4 GiB; efficiency = 1; mem_bandwidth = 10 GB/s }
gpu "cpu-fast" { tflops = 0.02; memory = 4 GiB; efficiency = 1; mem_bandwidth = 10 GB/s }
node "n0" { gpu = "cpu-slow"; gpus = 4; bandwidth = 5 GB/s; latency = 1 us }
node "n1" { gpu = "cpu-slow2"; gpus = 1; bandwidth = 5 GB/s; latency = 1 us }
node "n2" { gpu = "cpu-fast"; gpus = 1; bandwidth = 50 GB/s; latency = 1 us }
network { bandwidth = 1 GB/s; latency = 20 us }
