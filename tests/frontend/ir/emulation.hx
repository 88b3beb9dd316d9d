# An emulation block names the machine --emulate runs on (hexic-profile's
# gpu block): no node uses it, and no warning says so; the dump shows it.
model "m" {
  layers = 2; hidden = 64; ffn = 128; heads = 4
  vocab = 100; seq_len = 32
}
train { global_batch = 8 }
gpu "A100" { tflops = 312; memory = 80 GiB }
gpu "cpu-host" { tflops = 400; memory = 64 GiB; efficiency = 0.6 }
node "a" { gpu = "A100"; gpus = 2; bandwidth = 300 GB/s; latency = 2 us }
emulation { host = "cpu-host" }
