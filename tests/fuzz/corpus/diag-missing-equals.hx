model "m" {
  layers 40
}
