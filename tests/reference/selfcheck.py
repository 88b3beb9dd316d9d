#!/usr/bin/env python3
"""Self-checks of ref_llama that need a data file (its gradient is checked by
ref_llama --grad-check itself).

  selfcheck.py training REF TEXT WORKDIR
      fresh model: step-0 loss within 0.05 of ln(vocab); 10 steps on TEXT
      (byte-level, vocab 256) lower the loss by more than 0.1, every later step
      below step 0; two runs print identical bytes.
  selfcheck.py formats REF TEXT WORKDIR
      the same tokens as an llm.c uint16 shard, an llm.c uint32 (v7) shard and
      a raw uint16 file give identical losses; synthetic data runs."""
import math
import os
import re
import struct
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from make_byte_shard import write_shard  # noqa: E402

SHAPE = ["--layers", "2", "--hidden", "64", "--ffn", "172", "--heads", "4",
         "--kv-heads", "2", "--vocab", "256", "--seq-len", "64", "--global-batch", "8",
         "--seed", "1337", "--steps", "10"]
LINE = re.compile(r"^step (\d+) loss (-?\d+\.\d{9})$")


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def run_ref(ref, extra):
    proc = subprocess.run([ref] + SHAPE + extra, capture_output=True, text=True, timeout=120)
    if proc.returncode != 0:
        fail("ref_llama exited %d: %s" % (proc.returncode, proc.stderr.strip()))
    losses = []
    for n, line in enumerate(proc.stdout.splitlines()):
        m = LINE.match(line)
        if not m or int(m.group(1)) != n:
            fail("unexpected output line %r" % line)
        losses.append(float(m.group(2)))
    return proc.stdout, losses


def read_text(path):
    with open(path, "rb") as f:
        return list(f.read())


def check_training(ref, text, workdir):
    shard = os.path.join(workdir, "text_u16.bin")
    write_shard(shard, read_text(text), 20240520, 1, 2)
    out1, losses = run_ref(ref, ["--data", shard])
    out2, _ = run_ref(ref, ["--data", shard])
    print(out1, end="")
    if len(losses) != 10:
        fail("expected 10 steps, got %d" % len(losses))
    # Init std 0.02 makes logits ~N(0, 0.02^2 D): the expected loss is
    # ln V + 0.02^2 D / 2 ~ ln V + 0.013 for D = 64.
    if abs(losses[0] - math.log(256)) > 0.05:
        fail("step-0 loss %.6f is not within 0.05 of ln(256) = %.6f" % (losses[0], math.log(256)))
    if not losses[-1] < losses[0] - 0.1:
        fail("loss did not fall by 0.1 over 10 steps: %.6f -> %.6f" % (losses[0], losses[-1]))
    if any(x >= losses[0] for x in losses[1:]):
        fail("a later step's loss is not below step 0's")
    if out1 != out2:
        fail("two identical runs printed different output")
    print("PASS: step 0 %.6f (ln 256 = %.6f), step 9 %.6f, deterministic"
          % (losses[0], math.log(256), losses[-1]))


def check_formats(ref, text, workdir):
    tokens = read_text(text)
    paths = {"u16": os.path.join(workdir, "fmt_u16.bin"),
             "u32": os.path.join(workdir, "fmt_u32.bin"),
             "raw": os.path.join(workdir, "fmt_raw.bin")}
    write_shard(paths["u16"], tokens, 20240520, 1, 2)
    write_shard(paths["u32"], tokens, 20240801, 7, 4)
    with open(paths["raw"], "wb") as f:
        f.write(struct.pack("<%dH" % len(tokens), *tokens))
    outs = {k: run_ref(ref, ["--data", p, "--run-steps", "2"])[0] for k, p in paths.items()}
    if not (outs["u16"] == outs["u32"] == outs["raw"]) or not outs["u16"]:
        fail("the three file formats disagree:\n%s" % outs)
    _, synth = run_ref(ref, ["--run-steps", "2"])
    if len(synth) != 2 or abs(synth[0] - math.log(256)) > 0.05:
        fail("synthetic-data run: %s" % synth)
    print("PASS: uint16 shard, uint32 shard and raw uint16 agree; synthetic step 0 %.6f" % synth[0])


def main():
    if len(sys.argv) != 5 or sys.argv[1] not in ("training", "formats"):
        sys.exit(__doc__)
    mode, ref, text, workdir = sys.argv[1:]
    os.makedirs(workdir, exist_ok=True)
    (check_training if mode == "training" else check_formats)(ref, text, workdir)


if __name__ == "__main__":
    main()
