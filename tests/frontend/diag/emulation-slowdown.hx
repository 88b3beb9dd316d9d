# --emulate slows each device down by the host's speed over its own and
# honours at most 1000 times: beyond, an op outlasts HEXIC_TIMEOUT_S and the
# ranks waiting on it take it for a stalled peer. "slow" is 5e7 times slower
# than the host: the error names it and the host ("mid", 1000 times slower,
# is within the limit; tests/frontend/test_cli.sh checks the limit itself).
model "m" {
  layers = 2; hidden = 64; ffn = 128; heads = 4
  vocab = 100; seq_len = 32
}
train { global_batch = 8 }
gpu "host" { tflops = 50; memory = 64 GiB; efficiency = 1 }
gpu "mid" { tflops = 0.05; memory = 8 GiB; efficiency = 1 }
gpu "slow" { tflops = 1e-6; memory = 8 GiB; efficiency = 1 }
node "a" { gpu = "mid"; gpus = 2; bandwidth = 10 GB/s }
node "b" { gpu = "slow"; gpus = 2; bandwidth = 10 GB/s }
network { bandwidth = 1 GB/s }
emulation { host = "host" }
