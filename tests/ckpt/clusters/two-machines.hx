# The elastic-restart test's cluster: two machines of two CPU "devices".
gpu "cpu" { tflops = 0.02; memory = 4 GiB; efficiency = 1; mem_bandwidth = 10 GB/s }
node "m0" { gpu = "cpu"; gpus = 2; bandwidth = 5 GB/s; latency = 2 us }
node "m1" { gpu = "cpu"; gpus = 2; bandwidth = 5 GB/s; latency = 2 us }
network { bandwidth = 1 GB/s; latency = 20 us }
