# Llama 3's RoPE scaling: rope_scaling = llama3 takes its four figures, each
# given; factor at least 1; high_freq_factor above low_freq_factor
model "m" {
  layers = 2; hidden = 64; ffn = 128; heads = 4
  vocab = 100; seq_len = 32
  rope_scaling = llama3; rope_factor = 0.5; rope_low_freq_factor = 4
  rope_high_freq_factor = 1
}
train {
  global_batch = 8
}
gpu "G" { tflops = 10; memory = 8 GiB }
node "n" { gpu = "G"; gpus = 2; bandwidth = 10 GB/s }
