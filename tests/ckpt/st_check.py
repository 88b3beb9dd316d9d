#!/usr/bin/env python3
"""Hugging Face's own safetensors reader against hexic-ckpt (tests/ckpt, mode hf).

st_check.py exported MODEL.safetensors MODEL_BF16.safetensors WEIGHTS.bin CONFIG.json
    the export read by safetensors.numpy: every Llama name, shape and value
    (fp32 bit for bit against the raw weights of --dump-weights, q/k rows in
    rotate_half's order); the bf16 file's bits are fp32 rounded to nearest even.
st_check.py imported INIT.safetensors WEIGHTS.bin [f32|f16|bf16]
    hexic-ckpt import's file: hexic's names, the spec's order, bit for bit
    (of an F16 or BF16 source: the weights rounded so).
st_check.py to_f16 MODEL.safetensors OUT.safetensors
    the export converted to F16 by numpy.
st_check.py shard MODEL.safetensors DIR
    splits the export into two shards and a model.safetensors.index.json.
st_check.py twice DIR
    copies a tensor of DIR's first shard into its second (a parameter
    present twice) and prints its name.
st_check.py hostile MODEL.safetensors DIR
    writes the hostile files: truncated, header length beyond the file,
    overlapping offsets, wrong dtype, missing tensor.
st_check.py mutate MODEL.safetensors DIR COUNT
    writes COUNT damaged copies of the export's beginning (random bytes in
    the header, cut short), the same every run.
"""
import json
import os
import struct
import sys

import numpy as np
from safetensors.numpy import load_file, save_file

LAYER = ["input_layernorm", "self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj",
         "self_attn.o_proj", "post_attention_layernorm", "mlp.gate_proj", "mlp.up_proj",
         "mlp.down_proj"]
HEXIC = ["attn_norm", "wq", "wk", "wv", "wo", "mlp_norm", "w_gate", "w_up", "w_down"]


def spec_tensors(cfg):
    """(hf name, hexic name, shape) in docs/model-spec.md's order."""
    d, f, v = cfg["hidden_size"], cfg["intermediate_size"], cfg["vocab_size"]
    h, k = cfg["num_attention_heads"], cfg["num_key_value_heads"]
    hd = d // h
    out = [("model.embed_tokens.weight", "tok_emb", (v, d))]
    for l in range(cfg["num_hidden_layers"]):
        shapes = [(d,), (h * hd, d), (k * hd, d), (k * hd, d), (d, h * hd), (d,), (f, d), (f, d), (d, f)]
        for j in range(9):
            out.append((f"model.layers.{l}.{LAYER[j]}.weight", f"layers.{l}.{HEXIC[j]}", shapes[j]))
    out.append(("model.norm.weight", "final_norm", (d,)))
    if not cfg.get("tie_word_embeddings", False):
        out.append(("lm_head.weight", "lm_head", (v, d)))
    return out


def split_raw(raw, tensors):
    """The raw spec-order float32 weights cut into tensors."""
    out, at = {}, 0
    for _, hexic, shape in tensors:
        n = int(np.prod(shape))
        out[hexic] = raw[at:at + n].reshape(shape)
        at += n
    assert at == raw.size, f"{raw.size} floats, the model has {at}"
    return out


def to_rotate_half(w, heads):
    """hexic's interleaved RoPE rows -> Hugging Face's halves, per head."""
    hd = w.shape[0] // heads
    perm = [2 * j if j < hd // 2 else 2 * (j - hd // 2) + 1 for j in range(hd)]
    rows = [h * hd + p for h in range(heads) for p in perm]
    return w[rows]


def bf16_bits(x):
    u = x.astype(np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def read_raw_st(path):
    """A safetensors file parsed by hand (numpy has no bfloat16)."""
    data = open(path, "rb").read()
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + n])
    return header, data[8 + n:]


def exported(model, model_bf16, weights, config):
    cfg = json.load(open(config))
    tensors = spec_tensors(cfg)
    raw = split_raw(np.fromfile(weights, dtype="<f4"), tensors)
    got = load_file(model)
    names = {hf for hf, _, _ in tensors}
    assert set(got) == names, f"names differ: {sorted(set(got) ^ names)}"
    header, blob = read_raw_st(model_bf16)
    for hf, hexic, shape in tensors:
        want = raw[hexic].reshape(shape)
        if hexic.endswith(".wq"):
            want = to_rotate_half(want, cfg["num_attention_heads"])
        if hexic.endswith(".wk"):
            want = to_rotate_half(want, cfg["num_key_value_heads"])
        assert got[hf].dtype == np.float32 and got[hf].shape == shape, \
            f"{hf}: {got[hf].dtype} {got[hf].shape}, want float32 {shape}"
        assert np.array_equal(got[hf].view(np.uint32), want.view(np.uint32)), f"{hf}: values differ"
        meta = header[hf]
        assert meta["dtype"] == "BF16" and tuple(meta["shape"]) == shape, f"bf16 {hf}: {meta}"
        b, e = meta["data_offsets"]
        bits = np.frombuffer(blob[b:e], dtype="<u2").reshape(shape)
        assert np.array_equal(bits, bf16_bits(want)), f"bf16 {hf}: not fp32 rounded to nearest even"
    print(f"st_check: {len(tensors)} tensors read by safetensors {__import__('safetensors').__version__}:"
          f" names, shapes and fp32 values exact; bf16 rounded to nearest even")


def imported(init, weights, kind="f32"):
    got = load_file(init)
    header, _ = read_raw_st(init)  # hexic-ckpt writes the tensors in the spec's order
    order = sorted(got, key=lambda name: header[name]["data_offsets"][0])
    flat = np.concatenate([got[name].reshape(-1) for name in order])
    raw = np.fromfile(weights, dtype="<f4")
    if kind == "f16":  # imported from an F16 file: the weights rounded to fp16
        raw = raw.astype(np.float16).astype(np.float32)
    if kind == "bf16":
        raw = (bf16_bits(raw).astype(np.uint32) << 16).view(np.float32)
    assert flat.size == raw.size and np.array_equal(flat.view(np.uint32), raw.view(np.uint32)), \
        "the imported weights are not the checkpoint's, bit for bit"
    print(f"st_check: import of {kind} -> {len(got)} tensors in hexic's names, {flat.size} floats bit-exact")


def shard(model, out):
    got = load_file(model)
    names = list(got)
    half = len(names) // 2
    parts = {"model-00001-of-00002.safetensors": names[:half],
             "model-00002-of-00002.safetensors": names[half:]}
    weight_map = {}
    for file, part in parts.items():
        save_file({n: got[n] for n in part}, os.path.join(out, file), metadata={"format": "pt"})
        weight_map.update({n: file for n in part})
    json.dump({"metadata": {"total_size": 0}, "weight_map": weight_map},
              open(os.path.join(out, "model.safetensors.index.json"), "w"))


def twice(out):
    first = os.path.join(out, "model-00001-of-00002.safetensors")
    second = os.path.join(out, "model-00002-of-00002.safetensors")
    a, b = load_file(first), load_file(second)
    name = sorted(a)[0]
    b[name] = a[name]
    save_file(b, second, metadata={"format": "pt"})
    print(name)


def to_f16(model, out):
    """The export in F16, as Hugging Face ships Llama-2 (numpy's rounding)."""
    got = load_file(model)
    save_file({n: t.astype(np.float16) for n, t in got.items()}, out, metadata={"format": "pt"})


def write_st(path, header, blob):
    text = json.dumps(header).encode()
    open(path, "wb").write(struct.pack("<Q", len(text)) + text + blob)


def hostile(model, out):
    data = open(model, "rb").read()
    header, blob = read_raw_st(model)
    open(os.path.join(out, "truncated.safetensors"), "wb").write(data[:5])
    n = struct.unpack("<Q", data[:8])[0]
    open(os.path.join(out, "beyond.safetensors"), "wb").write(struct.pack("<Q", len(data)) + data[8:])
    h = json.loads(json.dumps(header))
    h["model.layers.1.mlp.up_proj.weight"]["data_offsets"] = h["model.layers.1.mlp.gate_proj.weight"]["data_offsets"]
    write_st(os.path.join(out, "overlap.safetensors"), h, blob)
    h = json.loads(json.dumps(header))
    h["model.layers.0.self_attn.v_proj.weight"]["dtype"] = "I32"
    write_st(os.path.join(out, "dtype.safetensors"), h, blob)
    h = json.loads(json.dumps(header))
    del h["model.layers.2.mlp.up_proj.weight"]
    write_st(os.path.join(out, "missing.safetensors"), h, blob)
    assert n > 0


def mutate(model, out, count):
    """count copies of the export's first 4 KiB with bytes of the length and
    the header overwritten at random (seeded: the same files every run)."""
    import random
    rng = random.Random(17)
    data = bytearray(open(model, "rb").read()[:4096])
    n = min(struct.unpack("<Q", bytes(data[:8]))[0] + 8, len(data))
    for i in range(int(count)):
        m = bytearray(data)
        for _ in range(rng.randint(1, 4)):
            m[rng.randrange(n)] = rng.choice(b'{}[]",:0123456789 \\ux\x00\xff')
        open(os.path.join(out, f"m{i:03d}.safetensors"), "wb").write(bytes(m[:rng.randint(n // 2, len(m))]))


if __name__ == "__main__":
    {"exported": exported, "imported": imported, "shard": shard, "hostile": hostile,
     "mutate": mutate, "to_f16": to_f16, "twice": twice}[sys.argv[1]](*sys.argv[2:])
