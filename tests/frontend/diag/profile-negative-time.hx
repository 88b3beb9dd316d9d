# Measured times must be positive, memory too; each bad value is pointed at.
model "m" {
  layers = 2; hidden = 64; ffn = 128; heads = 4
  vocab = 100; seq_len = 32
}
train {
  global_batch = 8
}
gpu "A100" { tflops = 312; memory = 80 GiB }
node "n" { gpu = "A100"; gpus = 1 }
profile "A100" {
  tp = 1
  micro_batch = [1, 2, 4]
  forward = [1 ms, -2 ms, 4 ms]
  backward = [2 ms, 4 ms, 0 ms]
  memory = [1 GiB, 2 GiB, -4 GiB]
}
