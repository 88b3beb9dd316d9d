# A long-context model for HexiSeq (asymmetric context/head parallelism): the
# Llama-2-13B shapes at 128K tokens per sequence, a few sequences per step as
# in the HexiSeq evaluation (global batch 8). RoPE base raised as long-context
# fine-tunes of Llama 2 do (Code Llama uses 1e6).
model "long-context-13b" {
  layers = 40; hidden = 5120; ffn = 13824; heads = 40
  vocab = 32000; seq_len = 131072
  rope_theta = 1000000
}
train {
  global_batch = 8
  precision = bf16
  recompute = full
  lr = 1e-4; steps = 100; seed = 1
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
