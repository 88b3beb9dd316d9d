model "m" {
  layers = 2; hidden = 64; ffn = 128; heads = 4
  vocab = 100; seq_len = 32
}
train {
  global_batch = 8
  data = "data/train.bin"
  checkpoint_dir = "ok \"quoted\" $(dir)\t"
}
gpu "G" { tflops = 10; memory = 8 GiB }
# The issue's example: an escaped newline would plant "#error x" in rank_NNNN.c.
gpu "G\n#error x\n//" { tflops = 10; memory = 8 GiB }
# A raw tab, a raw escape byte (an unknown GPU type: shown as '?' there too).
node "n	ode" { gpu = "G"; gpus = 2; bandwidth = 10 GB/s }
node "m" { gpu = "G[31m"; gpus = 1 }
link "n" "m" { bandwidth = 1 GB/s }
