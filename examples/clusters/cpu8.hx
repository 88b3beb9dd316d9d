# Eight CPU "devices" of three speeds for end-to-end runs on one machine: each
# device is an MPI rank. The figures are what fp32 CPU kernels of one rank
# reach (tens of GFLOP/s), already measured throughputs (efficiency 1), and
# what shared memory (inside a "node") and loopback TCP (between) give.
# tp_efficiency: what hexic-profile measures for one core's sgemm at the
# shapes a TP rank multiplies (1.000, 1.000, 0.986 at TP 1, 2, 4 here): CPU
# kernels keep their rate when sharded, unlike the GPU default curve.
gpu "cpu-fast" { tflops = 0.02;  memory = 4 GiB; efficiency = 1; mem_bandwidth = 10 GB/s; tp_efficiency = [1, 1, 0.99] }
gpu "cpu-mid"  { tflops = 0.01;  memory = 4 GiB; efficiency = 1; mem_bandwidth = 10 GB/s; tp_efficiency = [1, 1, 0.99] }
gpu "cpu-slow" { tflops = 0.005; memory = 4 GiB; efficiency = 1; mem_bandwidth = 10 GB/s; tp_efficiency = [1, 1, 0.99] }

node "fast" { gpu = "cpu-fast"; gpus = 3; bandwidth = 5 GB/s; latency = 2 us }
node "mid"  { gpu = "cpu-mid";  gpus = 3; bandwidth = 5 GB/s; latency = 2 us }
node "slow" { gpu = "cpu-slow"; gpus = 2; bandwidth = 5 GB/s; latency = 2 us }

network { bandwidth = 1 GB/s; latency = 20 us }   # loopback TCP between "machines"
