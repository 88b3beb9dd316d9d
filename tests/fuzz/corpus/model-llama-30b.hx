# LLaMA-30B (Touvron et al. 2023, "LLaMA", table 2: 32.5B parameters):
# 60 layers of 6656, 52 heads, FFN 17920, 2K context; the 30B-class model of
# the HexiScale MFU tables, with global batch 32.
model "llama-30b" {
  layers = 60; hidden = 6656; ffn = 17920; heads = 52
  vocab = 32000; seq_len = 2048
}
train {
  global_batch = 32
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
