#!/usr/bin/env python3
"""hexic against the real Hugging Face client (issue 27, item 6).

interop.py WORK SRCDIR HEXIC

Two small Llamas whose RoPE order matters: rope_theta 500000, grouped-query
attention (4 heads over 2 kv heads), seq_len 64, q_proj and k_proj scaled up
so that attention is sharp; one with an untied lm_head, one tied. For each:

  reverse: transformers' LlamaForCausalLM (random weights) -> save_pretrained
           -> the rank programs of a TP 2 + PP 2 plan (4 MPI ranks)
           `--init-from FOLDER --eval-only` print the loss transformers
           computes on the same tokens;
  forward: those programs train from that folder for a few steps with
           checkpoints, `hexic-ckpt export` writes the last one,
           `LlamaForCausalLM.from_pretrained` loads it, and its loss on
           training step 0's batch equals `--resume --eval-only`'s.

Agreement is 1e-5 relative in fp32. The test also shows that it can fail:
the export's q/k rows put back in hexic's interleaved RoPE order (what an
export without the rotate_half permutation would give) move transformers'
loss by more than 1e-3 relative.

Exit 77 (ctest's skip) when torch or transformers is absent: they are
optional (`pip install torch transformers`).
"""
import os
import re
import shutil
import struct
import subprocess
import sys
import time

try:
    import numpy as np
    import torch
    import transformers
    from transformers import LlamaConfig, LlamaForCausalLM
except ImportError as e:
    print(f"SKIP: {e.name} is not installed (optional: pip install torch transformers)")
    sys.exit(77)

SEQ = 64          # seq_len, T
BATCH = 8         # the plan's global batch, B
VOCAB = 256
QK_SCALE = 4.0    # q_proj and k_proj times this: sharp attention, so RoPE's row order shows
INIT_STD = 0.1    # initializer_range of the random models (transformers' default 0.02 gives
                  # logits so flat that the loss is ln 256 whatever attention does)
TRAIN_STEPS = 3
REL_TOL = 1e-5
WRONG_ROPE_MIN = 1e-3

work, src, hexic = sys.argv[1:4]
hexic_ckpt = os.path.join(os.path.dirname(hexic), "hexic-ckpt")
plan_json = os.path.join(src, "tests/ckpt/plans/a_tp2_pp2.json")
cluster = os.path.join(src, "tests/exec/clusters/four.hx")
env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
           OMPI_MCA_rmaps_base_oversubscribe="1",
           HEXIC_TIMEOUT_S=os.environ.get("HEXIC_TIMEOUT_S", "30"))
torch.set_num_threads(2)
transformers.utils.logging.disable_progress_bar()
started = time.time()


def fail(msg):
    print(f"FAIL: {msg}")
    sys.exit(1)


def run(args, log, what):
    """Runs ARGS in WORK, output to LOG; returns it, failing with it shown."""
    p = subprocess.run(args, cwd=work, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True)
    with open(os.path.join(work, log), "w") as f:
        f.write(p.stdout)
    if p.returncode != 0:
        print(p.stdout)
        fail(f"{what}: exit {p.returncode}")
    return p.stdout


def write_shard(path, tokens):
    """An llm.c shard of uint16 tokens (docs/data.md)."""
    header = [20240520, 1, len(tokens)] + [0] * 253
    with open(path, "wb") as f:
        f.write(struct.pack("<256i", *header))
        f.write(np.asarray(tokens, dtype="<u2").tobytes())


def batch_tokens(tokens, batches):
    """Inputs and targets of validation batches 0..K-1 (eval_interface: sequence
    g = k*B + j starts at (g*T) mod (N - T - 1), as training's step k reads it)."""
    n = len(tokens)
    starts = [(g * SEQ) % (n - SEQ - 1) for g in range(batches * BATCH)]
    x = np.stack([tokens[s:s + SEQ] for s in starts]).astype(np.int64)
    y = np.stack([tokens[s + 1:s + SEQ + 1] for s in starts]).astype(np.int64)
    return torch.from_numpy(x), torch.from_numpy(y)


def hf_loss(model, x, y):
    """Mean token cross-entropy of MODEL on inputs X, targets Y, in fp32."""
    with torch.no_grad():
        logits = model(input_ids=x).logits.float()
    return torch.nn.functional.cross_entropy(logits.reshape(-1, VOCAB), y.reshape(-1)).item()


def load(folder):
    model = LlamaForCausalLM.from_pretrained(folder, dtype=torch.float32,
                                             attn_implementation="eager")
    return model.eval()


def hx_model(name, tied):
    path = os.path.join(work, name + ".hx")
    with open(path, "w") as f:
        f.write(f"""model "{name}" {{
  layers = 4; hidden = 64; ffn = 176; heads = 4; kv_heads = 2
  vocab = {VOCAB}; seq_len = {SEQ}; rope_theta = 500000; norm_eps = 1e-5
  tie_embeddings = {"true" if tied else "false"}
}}
train {{
  global_batch = {BATCH}
  precision = fp32
  lr = 1e-3; steps = {TRAIN_STEPS}; seed = 1
  data = "{work}/data.bin"
}}
""")
    return path


def build(name, tied, lib):
    """hexic's TP 2 + PP 2 plan of the model, its rank programs built."""
    out = os.path.join(work, name)
    run([hexic, hx_model(name, tied), cluster, "--plan=" + plan_json, "--target=cpu", "-o", out],
        name + ".plan.log", f"hexic {name}.hx")
    if os.path.exists(os.path.join(lib, "libhexic.a")):  # the runtime, built once
        shutil.copytree(os.path.join(lib, "obj"), os.path.join(out, "obj"), dirs_exist_ok=True)
        shutil.copy2(os.path.join(lib, "libhexic.a"), out)
    run(["make", "-s", "-C", out, "-j2"], name + ".make.log", f"make in {name}")
    if not os.path.exists(os.path.join(lib, "libhexic.a")):
        shutil.copytree(os.path.join(out, "obj"), os.path.join(lib, "obj"))
        shutil.copy2(os.path.join(out, "libhexic.a"), lib)
    return os.path.join(out, "launch.sh")


def random_hf(folder, tied, seed):
    """transformers' own random Llama of the .hx model's shape, q/k scaled, saved."""
    torch.manual_seed(seed)
    cfg = LlamaConfig(vocab_size=VOCAB, hidden_size=64, intermediate_size=176,
                      num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=2,
                      max_position_embeddings=SEQ, rope_theta=500000.0, rms_norm_eps=1e-5,
                      tie_word_embeddings=tied, initializer_range=INIT_STD)
    model = LlamaForCausalLM(cfg).float()
    with torch.no_grad():
        for layer in model.model.layers:
            layer.self_attn.q_proj.weight.mul_(QK_SCALE)
            layer.self_attn.k_proj.weight.mul_(QK_SCALE)
    model.save_pretrained(folder)
    return model.eval()


def eval_line(out, what, step, batches):
    """The loss of rank 0's `val step S/M | loss X | batches K | tokens N` line."""
    lines = re.findall(r"^val step (\d+)/(\d+) \| loss (\S+) \| batches (\d+) \| tokens (\d+)$",
                       out, re.M)
    if len(lines) != 1:
        print(out)
        fail(f"{what}: {len(lines)} 'val step' lines, not 1")
    s, _, loss, k, n = lines[0]
    if (int(s), int(k), int(n)) != (step, batches, batches * BATCH * SEQ):
        fail(f"{what}: '{' | '.join(lines[0])}': not step {step}, {batches} batches "
             f"of {BATCH * SEQ} tokens")
    if re.search(r"^step \d+", out, re.M):
        fail(f"{what}: --eval-only trained")
    return float(loss)


def same(hx, ref, what):
    rel = abs(hx - ref) / abs(ref)
    if rel > REL_TOL:
        fail(f"{what}: hexic {hx:.9g}, transformers {ref:.9g}: {rel:.2e} relative, "
             f"more than {REL_TOL:g}")
    print(f"  {what}: hexic {hx:.9g}, transformers {ref:.9g} ({rel:.1e} relative)")


def rope_rows(head_dim):
    """Hugging Face row j of a head is hexic row rope_rows[j] (checkpoint-format.md)."""
    half = head_dim // 2
    return [2 * j if j < half else 2 * (j - half) + 1 for j in range(head_dim)]


def in_hexic_order(model):
    """MODEL with the q/k rows of every head put back in hexic's interleaved
    order: the model an export without the RoPE permutation would give."""
    hd = model.config.hidden_size // model.config.num_attention_heads
    inverse = np.argsort(rope_rows(hd))  # hexic row i is HF row inverse[i]
    with torch.no_grad():
        for layer in model.model.layers:
            for proj in (layer.self_attn.q_proj, layer.self_attn.k_proj):
                w = proj.weight
                heads = w.shape[0] // hd
                idx = torch.tensor([h * hd + r for h in range(heads) for r in inverse])
                w.copy_(w[idx])
    return model


def variant(name, tied, seed, tokens, lib):
    launch = build(name, tied, lib)
    start = os.path.join(work, name + "-start")
    ref_model = random_hf(start, tied, seed)
    if not os.path.exists(os.path.join(start, "model.safetensors")):
        fail(f"save_pretrained wrote no {start}/model.safetensors")

    # reverse: save_pretrained -> --init-from FOLDER --eval-only, two batches
    x2, y2 = batch_tokens(tokens, 2)
    out = run([launch, "--init-from", start, "--eval-only", "--val-batches", "2",
               "--steps", str(TRAIN_STEPS)], name + ".reverse.log", f"{name}: --init-from --eval-only")
    same(eval_line(out, f"{name} reverse", 0, 2), hf_loss(ref_model, x2, y2),
         f"{name}: save_pretrained -> --init-from --eval-only, 2 batches")

    # forward: train from it, export, from_pretrained
    ck = os.path.join(work, name + "-ck")
    out = run([launch, "--init-from", start, "--steps", str(TRAIN_STEPS), "--checkpoint-dir", ck],
              name + ".train.log", f"{name}: training")
    losses = re.findall(r"^step (\d+)/\d+ \| loss (\S+)", out, re.M)
    if len(losses) != TRAIN_STEPS:
        print(out)
        fail(f"{name}: {len(losses)} training steps printed, not {TRAIN_STEPS}")
    x1, y1 = batch_tokens(tokens, 1)
    step1, initial = float(losses[0][1]), hf_loss(ref_model, x1, y1)
    if abs(step1 - initial) > 1e-5:  # step 1 prints 6 decimals: the initial weights on batch 0
        fail(f"{name}: step 1's loss {step1} is not transformers' {initial:.9g}")
    exported = os.path.join(work, name + "-export")
    os.makedirs(exported)
    run([hexic_ckpt, "export", ck, "-o", os.path.join(exported, "model.safetensors")],
        name + ".export.log", f"{name}: hexic-ckpt export")
    out = run([launch, "--checkpoint-dir", ck, "--resume", "--eval-only", "--val-batches", "1",
               "--steps", str(TRAIN_STEPS)], name + ".eval.log", f"{name}: --resume --eval-only")
    hx = eval_line(out, f"{name} forward", TRAIN_STEPS, 1)
    model = load(exported)
    if model.config.tie_word_embeddings != tied:
        fail(f"{name}: from_pretrained's tie_word_embeddings is {model.config.tie_word_embeddings}")
    ref = hf_loss(model, x1, y1)
    same(hx, ref, f"{name}: {TRAIN_STEPS} steps on TP 2 + PP 2 -> export -> from_pretrained, "
         "step 0's batch")
    if ref >= step1:
        fail(f"{name}: {TRAIN_STEPS} steps did not lower batch 0's loss ({step1} -> {ref})")
    return model, x1, y1, ref


def main():
    if os.path.exists(work):
        shutil.rmtree(work)
    os.makedirs(work)
    lib = os.path.join(work, "lib")
    os.makedirs(lib)
    # text as bytes (vocab 256): a real stream with structure for attention to find
    with open(os.path.join(src, "docs/model-spec.md"), "rb") as f:
        tokens = np.frombuffer(f.read(), dtype=np.uint8).astype(np.uint16)
    write_shard(os.path.join(work, "data.bin"), tokens)
    print(f"torch {torch.__version__}, transformers {transformers.__version__}; "
          f"{len(tokens)} tokens of docs/model-spec.md")

    model, x1, y1, ref = variant("untied", False, 1, tokens, lib)
    variant("tied", True, 2, tokens, lib)

    wrong = hf_loss(in_hexic_order(model), x1, y1)
    moved = abs(wrong - ref) / ref
    if moved <= WRONG_ROPE_MIN:
        fail(f"q/k rows in hexic's order move transformers' loss only {moved:.1e} relative "
             f"({ref:.9g} -> {wrong:.9g}): this model cannot tell a wrong RoPE order")
    print(f"  q/k rows in hexic's RoPE order instead: transformers' loss {wrong:.9g} "
          f"({moved:.1e} relative from {ref:.9g}; a wrong order fails by {moved / REL_TOL:.0f}x "
          "the tolerance)")
    shutil.rmtree(work)
    print(f"ok (hexic and transformers agree both ways; {time.time() - started:.0f} s)")


main()
