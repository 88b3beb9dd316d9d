# backward_efficiency and head_efficiency: the backward's and the LM head's
# fraction of peak, in (0, 1] like efficiency, a number.
model "m" {
  layers = 2; hidden = 64; ffn = 128; heads = 4
  vocab = 100; seq_len = 32
}
train {
  global_batch = 8
}
gpu "A" { tflops = 312; memory = 80 GiB; backward_efficiency = 0 }
gpu "B" { tflops = 312; memory = 80 GiB; efficiency = 0.4; backward_efficiency = 1.5 }
gpu "C" { tflops = 312; memory = 80 GiB; backward_efficiency = "fast" }
gpu "D" { tflops = 312; memory = 80 GiB; backward_efficiency = 0.7; head_efficiency = 1.2 }
gpu "E" { tflops = 312; memory = 80 GiB; head_efficiency = 0; backward_efficiency = 0.3 }
node "a" { gpu = "A"; gpus = 1 }
node "b" { gpu = "B"; gpus = 1 }
node "c" { gpu = "C"; gpus = 1 }
node "d" { gpu = "D"; gpus = 1 }
node "e" { gpu = "E"; gpus = 1 }
