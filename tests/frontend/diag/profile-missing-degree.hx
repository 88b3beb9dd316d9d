# A profiled GPU type needs a profile at every TP degree the planner may give
# it (4 heads, 4 GPUs: degrees 1, 2 and 4); this one lacks 2 and 4.
model "m" {
  layers = 2; hidden = 64; ffn = 128; heads = 4
  vocab = 100; seq_len = 32
}
train {
  global_batch = 8
}
gpu "A100" { tflops = 312; memory = 80 GiB }
node "n" { gpu = "A100"; gpus = 4; bandwidth = 300 GB/s }
profile "A100" { tp = 1; micro_batch = [1, 8]; forward = [1 ms, 7 ms]; backward = [2 ms, 14 ms] }
