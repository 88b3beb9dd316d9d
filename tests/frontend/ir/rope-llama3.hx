# Llama 3's RoPE scaling in the model IR (rope_scaling = llama3 and its four
# figures; an unscaled model's dump has no rope_scaling line)
model "llama3" {
  layers = 2; hidden = 64; ffn = 128; heads = 4
  vocab = 100; seq_len = 32; rope_theta = 500000
  rope_scaling = llama3; rope_factor = 8; rope_low_freq_factor = 1
  rope_high_freq_factor = 4; rope_original_max_len = 8192
}
train { global_batch = 8 }
gpu "A100" { tflops = 312; memory = 80 GiB }
node "a" { gpu = "A100"; gpus = 2; bandwidth = 300 GB/s; latency = 2 us }
