# --emulate only slows devices down: a type a node uses (tflops x efficiency)
# must not be faster than the emulation host. g4090 (165 x 0.5) is exactly as
# fast as the host (330 x 0.25) and passes; a800 (312 x 0.5) does not. An
# unused faster type (h100) is no error.
model "m" {
  layers = 2; hidden = 64; ffn = 128; heads = 4
  vocab = 100; seq_len = 32
}
train { global_batch = 8 }
gpu "a800" { tflops = 312; memory = 80 GiB }
gpu "g4090" { tflops = 165; memory = 24 GiB }
gpu "h100" { tflops = 990; memory = 80 GiB }
gpu "cpu-host" { tflops = 330; memory = 64 GiB; efficiency = 0.25 }
node "a" { gpu = "a800"; gpus = 2; bandwidth = 10 GB/s }
node "g" { gpu = "g4090"; gpus = 2; bandwidth = 10 GB/s }
network { bandwidth = 1 GB/s }
emulation { host = "cpu-host" }
