# The tiny Llama with 6 heads (hidden 96), so tensor parallelism of degree
# 2, 3 and 6 divides the heads (and the kv heads, as hexic requires); ffn 176
# splits unevenly by 3. Kv-head replication under TP is covered by the
# emit_fixture plans (--heads6: 6 heads over 2 kv heads). recompute = auto
# lets the hand-written plans/tp3_tp2_uneven.json recompute some stages only.
model "tiny6" {
  layers = 4; hidden = 96; ffn = 176; heads = 6; kv_heads = 6
  vocab = 256; seq_len = 64
}
train {
  global_batch = 8
  precision = fp32
  recompute = auto
  lr = 1e-3; warmup_steps = 10; steps = 300; seed = 1
}
