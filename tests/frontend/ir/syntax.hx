model "syn" { layers = 2; hidden = 64; ffn = 128; heads = 4; vocab = 100; seq_len = 32 }
train
{
  global_batch = 8;;;
  schedule = 1f1b; optimizer = "sgd"; optimizer_sharding = none
  lr = 1e-3; beta1 = .5; beta2 = 0.99; eps = 1E-6
  checkpoint_dir = "ck\"pt"; checkpoint_every = 10
}
gpu "G" { tflops = 1.5e1; memory = 1 TiB }
node "n" { gpu = "G"; gpus = 1; latency = 0 s } network { bandwidth = 1 Kbps; latency = 1 ms }