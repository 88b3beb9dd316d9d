# The train block the import-hf test puts beside an imported model block.
train {
  global_batch = 64
  precision = bf16
  recompute = auto
}
