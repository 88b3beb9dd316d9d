# rope_scaling is none or llama3; its figures without llama3 are refused,
# not ignored
model "m" {
  layers = 2; hidden = 64; ffn = 128; heads = 4
  vocab = 100; seq_len = 32
  rope_scaling = yarn; rope_original_max_len = 8192
}
train {
  global_batch = 8
}
gpu "G" { tflops = 10; memory = 8 GiB }
node "n" { gpu = "G"; gpus = 2; bandwidth = 10 GB/s }
