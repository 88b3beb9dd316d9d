# The tiny Llama with 2048-token sequences: long-context training on CPU in
# seconds (issue 14). With examples/clusters/cpu8-long.hx one sequence's
# activations fit no device, so hexic splits every sequence over the 8 ranks
# (HexiSeq: uneven token ranges by device speed, ring attention) and the
# generated programs train it. No `data` line: pass --data to launch.sh (or
# run scripts/demo.sh examples/clusters/cpu8-long.hx 20 examples/models/tiny-long.hx).
model "tiny-long" {
  layers = 2; hidden = 64; ffn = 176; heads = 4; kv_heads = 2
  vocab = 256; seq_len = 2048
}
train {
  global_batch = 4
  precision = fp32
  lr = 2e-3; warmup_steps = 5; steps = 20; seed = 1
}
