# Two machines of four CPU "devices", one three times slower: hexic's
# HexiSeq planner (--strategy=hexiseq) lays seqtiny.hx out on it as TP 2
# inside units, a CP ring of two all-to-all groups of two units (issue 14).
gpu "cpu" { tflops = 0.02; memory = 4 GiB; efficiency = 1; mem_bandwidth = 10 GB/s }
gpu "cpu-slow" { tflops = 0.007; memory = 4 GiB; efficiency = 1; mem_bandwidth = 10 GB/s }
node "a" { gpu = "cpu"; gpus = 4; bandwidth = 50 GB/s; latency = 1 us }
node "b" { gpu = "cpu-slow"; gpus = 4; bandwidth = 50 GB/s; latency = 1 us }
network { bandwidth = 1 GB/s; latency = 20 us }
