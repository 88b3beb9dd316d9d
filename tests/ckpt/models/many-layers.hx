# 114 layers of a very small Llama: 1029 tensors (2 + 9 x 114 + 1), for
# hexic-ckpt export over a checkpoint of a thousand tensors (it re-read the
# MANIFEST for every tensor: over 600 s for 1024 tensors).
model "many-layers" {
  layers = 114; hidden = 16; ffn = 32; heads = 2; kv_heads = 2
  vocab = 64; seq_len = 16
}
train {
  global_batch = 2
  precision = fp32
  lr = 1e-3; warmup_steps = 1; steps = 10; seed = 1
}
