# One CPU "device": the single-rank reference run (no parallelism at all).
gpu "cpu" { tflops = 0.02; memory = 8 GiB; efficiency = 1; mem_bandwidth = 10 GB/s }
node "host" { gpu = "cpu"; gpus = 1 }
