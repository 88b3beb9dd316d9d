model "m" {
  layers 2
  hidden = 
  ffn = 1 2
}
gpu "G" { tflops == 3 }
