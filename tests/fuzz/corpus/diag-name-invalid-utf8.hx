model "m" {
  layers = 2; hidden = 64; ffn = 128; heads = 4
  vocab = 100; seq_len = 32
}
train {
  global_batch = 8
  data = "ÿþ"
}
# Valid UTF-8 is fine, and the caret counts characters: "åŒ—äº¬-A800".
gpu "åŒ—äº¬-A800" { tflops = 10; memory = 8 GiB }
gpu "Latin-1 été" { tflops = 10; memory = 8 GiB }
gpu "overlong À¯" { tflops = 10; memory = 8 GiB }
gpu "surrogate í €" { tflops = 10; memory = 8 GiB }
gpu "truncated åŒ" { tflops = 10; memory = 8 GiB }
node "åŒ—äº¬" { gpu = "åŒ—äº¬-A800"; gpus = 2; bandwidth = 10 GB/s }
node "x" { gpu = "åŒ—äº¬-A800"; gpus = 1; bandwidth = "åŒ—" }
