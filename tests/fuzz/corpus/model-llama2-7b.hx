# Llama-2-7B (Touvron et al. 2023; released config.json): 32 layers of 4096,
# SwiGLU FFN 11008, 32 heads, 4K context. Global batch 64 as in the case study.
model "llama2-7b" {
  layers = 32; hidden = 4096; ffn = 11008; heads = 32
  vocab = 32000; seq_len = 4096
}
train {
  global_batch = 64
  precision = bf16
  recompute = auto
  lr = 3e-4; warmup_steps = 10; steps = 100; seed = 1
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
