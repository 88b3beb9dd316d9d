model "m" {
  layers = 2
train {
  global_batch = 8
}
