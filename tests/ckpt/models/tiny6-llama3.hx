# tiny6 (tests/exec/models/tiny6.hx) with Llama 3's RoPE: rope_theta 500000
# and rope_type llama3's frequency scaling. With hd 16 and an original
# length of 64, pairs fall in all three bands (kept, interpolated, divided).
model "tiny6-llama3" {
  layers = 4; hidden = 96; ffn = 176; heads = 6; kv_heads = 6
  vocab = 256; seq_len = 64; rope_theta = 500000
  rope_scaling = llama3; rope_factor = 8; rope_low_freq_factor = 1
  rope_high_freq_factor = 4; rope_original_max_len = 64
}
train {
  global_batch = 8
  precision = fp32
  recompute = auto
  lr = 1e-3; warmup_steps = 10; steps = 300; seed = 1
}
