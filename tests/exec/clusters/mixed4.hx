# Two CPU "devices" at this machine's speed and two three times slower, as
# --emulate runs them on one machine (tests/exec/run_emulate.sh).
gpu "cpu-fast" { tflops = 0.03; memory = 4 GiB; efficiency = 1 }
gpu "cpu-slow" { tflops = 0.01; memory = 4 GiB; efficiency = 1 }
node "fast" { gpu = "cpu-fast"; gpus = 2; bandwidth = 5 GB/s; latency = 2 us }
node "slow" { gpu = "cpu-slow"; gpus = 2; bandwidth = 5 GB/s; latency = 2 us }
network { bandwidth = 1 GB/s; latency = 20 us }
