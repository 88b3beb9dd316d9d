model "m" {
  layers = 2
