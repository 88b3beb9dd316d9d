gpu "A800 { tflops = 1 }
