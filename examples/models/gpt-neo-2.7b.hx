# GPT-Neo-2.7B's shape (EleutherAI; released config.json: 32 layers of 2560,
# 20 heads, 2048 context, vocab 50257) as a Llama-style model: the MLP is
# SwiGLU with ffn 6912 (about 2/3 of GPT-Neo's 4 x 2560 GELU MLP, so the
# layer's FLOPs and weights match within 2%). A planner comparison case.
model "gpt-neo-2.7b" {
  layers = 32; hidden = 2560; ffn = 6912; heads = 20
  vocab = 50257; seq_len = 2048
}
train {
  global_batch = 2048
  precision = bf16
  recompute = auto
  lr = 3e-4; warmup_steps = 10; steps = 100; seed = 1
}
