# Issue 18: a TP efficiency curve and a per-layer overhead in a gpu block,
# and measured profiles (one per GPU type and TP degree; a single value is a
# list of one). The tp 2 profile does not cover the planner's micro-batch
# sizes (1..8): a warning says what is used outside it.
model "m" {
  layers = 2; hidden = 64; ffn = 128; heads = 4
  vocab = 100; seq_len = 32
}
train { global_batch = 8 }
gpu "A100" { tflops = 312; memory = 80 GiB; tp_efficiency = [1, 0.9, 0.75]; layer_overhead = 40 us }
gpu "V100" { tflops = 125; memory = 16 GiB }
profile "A100" {
  tp = 1
  micro_batch = [1, 2, 4, 8]
  forward = [1 ms, 1.9 ms, 3.7 ms, 7.3 ms]
  backward = [2 ms, 3.8 ms, 7.4 ms, 14.6 ms]
  memory = [100 MiB, 200 MiB, 400 MiB, 800 MiB]
}
profile "A100" { tp = 2; micro_batch = [2, 4]; forward = [1.1 ms, 2.1 ms]; backward = [2.2 ms, 4.2 ms] }
node "a" { gpu = "A100"; gpus = 2; bandwidth = 300 GB/s; latency = 2 us }
node "v" { gpu = "V100"; gpus = 1 }
network { bandwidth = 10 GB/s; latency = 10 us }
