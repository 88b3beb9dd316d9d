# Four equal CPU "devices" on one node, for hand-written plans of 4 ranks.
gpu "cpu" { tflops = 0.02; memory = 4 GiB; efficiency = 1 }
node "host" { gpu = "cpu"; gpus = 4; bandwidth = 100 GB/s; latency = 1 us }
