# A tiny Llama with sequences long enough to split (issue 14): HexiSeq plans
# (context and head parallelism, uneven tokens and heads) against one rank.
# recompute = auto lets hand-written plans choose per stage.
model "seqtiny" {
  layers = 2; hidden = 64; ffn = 176; heads = 4; kv_heads = 2
  vocab = 256; seq_len = 128
}
train {
  global_batch = 4
  precision = fp32
  recompute = auto
  lr = 1e-3; warmup_steps = 2; steps = 10; seed = 1
}
