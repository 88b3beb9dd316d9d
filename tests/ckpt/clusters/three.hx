# Three equal CPU "devices" on one node, for the 3-rank plans of the resharding test.
gpu "cpu" { tflops = 0.02; memory = 4 GiB; efficiency = 1 }
node "host" { gpu = "cpu"; gpus = 3; bandwidth = 100 GB/s; latency = 1 us }
