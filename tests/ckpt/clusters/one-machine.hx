# two-machines.hx after machine m1 was lost: hexic plans again for m0 alone.
gpu "cpu" { tflops = 0.02; memory = 4 GiB; efficiency = 1; mem_bandwidth = 10 GB/s }
node "m0" { gpu = "cpu"; gpus = 2; bandwidth = 5 GB/s; latency = 2 us }
