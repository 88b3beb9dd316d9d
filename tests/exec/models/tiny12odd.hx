# A tiny Llama of 12 heads (hidden 96, ffn 176: TP 2, 3 and 4 divide the
# heads, as hexic requires, and 3 splits the ffn columns unevenly) with
# sequences of 31 tokens, so that a TP stage's token rows split unevenly
# under sequence parallelism for degrees 2, 3 and 4 at micro-batch size 1;
# a global batch of 5 for plans/sp_tp4_tp3_zero1.json's uneven DP.
# recompute = auto lets that plan recompute some stages only.
model "tiny12odd" {
  layers = 4; hidden = 96; ffn = 176; heads = 12; kv_heads = 12
  vocab = 256; seq_len = 31
}
train {
  global_batch = 5
  precision = fp32
  recompute = auto
  lr = 1e-3; warmup_steps = 10; steps = 300; seed = 1
}
