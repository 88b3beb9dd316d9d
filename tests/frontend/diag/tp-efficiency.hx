# tp_efficiency: 1 at degree 1, never growing with the degree, at most five
# points (degrees 1, 2, 4, 8, 16), each in (0, 1].
model "m" {
  layers = 2; hidden = 64; ffn = 128; heads = 4
  vocab = 100; seq_len = 32
}
train {
  global_batch = 8
}
gpu "A" { tflops = 312; memory = 80 GiB; tp_efficiency = [0.9, 0.8] }
gpu "B" { tflops = 312; memory = 80 GiB; tp_efficiency = [1, 0.7, 0.8] }
gpu "C" { tflops = 312; memory = 80 GiB; tp_efficiency = [1, 0.9, 0.8, 0.7, 0.6, 0.5] }
gpu "D" { tflops = 312; memory = 80 GiB; tp_efficiency = [1, 0]; layer_overhead = 5 }
node "a" { gpu = "A"; gpus = 1 }
node "b" { gpu = "B"; gpus = 1 }
node "c" { gpu = "C"; gpus = 1 }
node "d" { gpu = "D"; gpus = 1 }
