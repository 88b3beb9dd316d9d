model "m" {
  layers = 2
}
train {
  global_batch = 8
}
gpu "G" { tflops = 10; memory = 8 GiB }
node "n" { gpu = "G"; gpus = 2; bandwidth = 10 GB/s }
