# Llama-2-70B (Touvron et al. 2023; released config.json): 80 layers of 8192,
# FFN 28672, 64 query heads sharing 8 key/value heads (grouped-query attention).
model "llama2-70b" {
  layers = 80; hidden = 8192; ffn = 28672; heads = 64; kv_heads = 8
  vocab = 32000; seq_len = 4096
  rope_theta = 10000; norm_eps = 1e-5
}
train {
  global_batch = 64
  precision = bf16
  recompute = full
  lr = 1.5e-4; warmup_steps = 10; steps = 100; seed = 1
}
# Eight CPU "devices" of three speeds for end-to-end runs on one machine: each
# device is an MPI rank. The figures are what fp32 CPU kernels of one rank
# reach (tens of GFLOP/s), already measured throughputs (efficiency 1), and
# what shared memory (inside a "node") and loopback TCP (between) give.
gpu "cpu-fast" { tflops = 0.02;  memory = 4 GiB; efficiency = 1 }
gpu "cpu-mid"  { tflops = 0.01;  memory = 4 GiB; efficiency = 1 }
gpu "cpu-slow" { tflops = 0.005; memory = 4 GiB; efficiency = 1 }

node "fast" { gpu = "cpu-fast"; gpus = 3; bandwidth = 5 GB/s; latency = 2 us }
node "mid"  { gpu = "cpu-mid";  gpus = 3; bandwidth = 5 GB/s; latency = 2 us }
node "slow" { gpu = "cpu-slow"; gpus = 2; bandwidth = 5 GB/s; latency = 2 us }

network { bandwidth = 1 GB/s; latency = 20 us }   # loopback TCP between "machines"
