# Lists of unequal lengths, micro-batch sizes out of order, a second profile
# of one (GPU type, TP degree), wrong units and a missing field.
model "m" {
  layers = 2; hidden = 64; ffn = 128; heads = 4
  vocab = 100; seq_len = 32
}
train {
  global_batch = 8
}
gpu "A100" { tflops = 312; memory = 80 GiB }
node "n" { gpu = "A100"; gpus = 1 }
profile "A100" { tp = 1; micro_batch = [1, 2, 4]; forward = [1 ms, 2 ms]; backward = [2 ms, 4 ms, 8 ms] }
profile "A100" { tp = 1; micro_batch = [2, 1]; forward = [1 ms, 2 ms]; backward = [2 ms, 4 ms] }
profile "A100" { tp = 1; micro_batch = []; forward = [1 GiB]; backward = 2 }
profile "A100" { tp = 2; micro_batch = 1; forward = 1 ms }
