# One emulation block per input: --emulate runs on one machine.
model "m" {
  layers = 2; hidden = 64; ffn = 128; heads = 4
  vocab = 100; seq_len = 32
}
train { global_batch = 8 }
gpu "a800" { tflops = 312; memory = 80 GiB }
gpu "cpu-host" { tflops = 400; memory = 64 GiB }
node "n" { gpu = "a800"; gpus = 2; bandwidth = 10 GB/s }
emulation { host = "cpu-host" }
emulation { host = "a800" }
