#!/usr/bin/env python3
"""reference_vs_generated: the generated program against the independent
double-precision reference (tests/reference/ref_llama.c), the llm.c way.

Compiles examples/models/tiny.hx for one CPU device (examples/clusters/cpu1.hx)
with `data` pointing at a byte-level shard of a real text and `steps = 10`,
builds the generated program with its Makefile, runs it, and compares every
step's loss with ref_llama's on the same shard and settings.

Tolerance (relative, per step): 5e-6. The generated program runs in fp32
(unit roundoff 6e-8); a forward pass sums at most a few hundred products per
output, so the step-0 loss agrees with the double result to ~1e-7, and ten
AdamW steps carry that along: measured on tiny.hx, the largest difference
over the 10 steps was 8.2e-8 (the log's 6 decimals bound what can be seen).
5e-6 leaves a margin of 50 over that, yet catches what moves a loss by 1e-5
or more on this model (measured with the reference): rope_theta 5e5 instead
of 1e4 (1.0e-5), RoPE rotating the wrong way (1.9e-5), no weight decay
(4.8e-5), decaying the norm gains (7.8e-5), no clipping (4.9e-4), norm_eps
1e-6 (5.3e-4), beta2 0.999 (2.2e-3), a schedule one step longer (4.1e-3),
query head h reading kv head h % K (5.4e-3). The learning rates the log
prints are compared with the spec's schedule to 1e-4 (a %.4e print).
The example warms up for 10 of its 300 steps; the 10-step run here keeps 5
of warmup so that the cosine half of the schedule is exercised too.

Every setting the reference needs is written explicitly into the copy of
tiny.hx (the example's own value when it has one, else the value below), so
both sides use the same numbers whatever the compiler's defaults are."""
import argparse
import math
import os
import re
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from make_byte_shard import write_shard  # noqa: E402

# field -> (ref_llama option, value used when tiny.hx does not set it)
MODEL_FIELDS = {
    "layers": ("--layers", None), "hidden": ("--hidden", None), "ffn": ("--ffn", None),
    "heads": ("--heads", None), "kv_heads": ("--kv-heads", None), "vocab": ("--vocab", None),
    "seq_len": ("--seq-len", None), "rope_theta": ("--rope-theta", "10000.0"),
    "norm_eps": ("--norm-eps", "1e-5"), "tie_embeddings": ("--tie-embeddings", "false"),
}
TRAIN_FIELDS = {
    "global_batch": ("--global-batch", None), "lr": ("--lr", "3e-4"),
    "beta1": ("--beta1", "0.9"), "beta2": ("--beta2", "0.95"), "eps": ("--eps", "1e-8"),
    "weight_decay": ("--weight-decay", "0.1"), "grad_clip": ("--grad-clip", "1.0"),
    "warmup_steps": ("--warmup-steps", "0"), "seed": ("--seed", "1337"),
}
GENERATED_LINE = re.compile(r"\bstep\s+(\d+)\s*/\s*(\d+)\b.*?\bloss[\s=:]+([-+]?[0-9.]+(?:[eE][-+]?\d+)?|nan|inf)",
                            re.IGNORECASE)
NUMBER = r"([-+]?[0-9.]+(?:[eE][-+]?\d+)?)"
GENERATED_LR = re.compile(r"\blr[\s=:]+" + NUMBER)
REF_LINE = re.compile(r"^step (\d+) loss (\S+) lr (\S+) grad_norm (\S+)$")
# The generated log prints lr with few digits: 1e-4 relative covers a %.4e.
LR_RTOL = 1e-4


class Failure(Exception):
    pass


def strip_comments(text):
    return re.sub(r"(#|//)[^\n]*", "", text)


def find_block(text, header_regex, what):
    """(start, end) of the body between a block's braces."""
    m = re.search(header_regex + r"\s*\{", text)
    if not m:
        raise Failure("%s has no %s block" % ("tiny.hx", what))
    depth, i = 1, m.end()
    while depth and i < len(text):
        depth += {"{": 1, "}": -1}.get(text[i], 0)
        i += 1
    if depth:
        raise Failure("tiny.hx: unbalanced braces in the %s block" % what)
    return m.end(), i - 1


FIELD = re.compile(r"\b([a-z_][a-z0-9_]*)\s*=\s*(\"[^\"]*\"|\[[^\]]*\]|[^\s,;}\]]+)")


def block_fields(body):
    return {m.group(1): m.group(2) for m in FIELD.finditer(body)}


def rewrite_block(body, fields, overrides, table):
    """The block with `overrides` replacing any earlier value and every field of
    `table` written out explicitly; returns (new body, field values)."""
    values = dict(fields)
    values.update(overrides)
    for name, (_, default) in table.items():
        if name not in values:
            if default is None and name == "kv_heads":
                default = values.get("heads")
            if default is None:
                raise Failure("tiny.hx does not set %s, which the reference needs" % name)
            values[name] = default
    # Drop an overridden field with its `;` separator, if any.
    kept = re.sub(FIELD.pattern + r"[ \t]*;?",
                  lambda m: "" if m.group(1) in overrides else m.group(0), body)
    added = "".join("\n  %s = %s" % (k, values[k])
                    for k in dict.fromkeys(list(table) + list(overrides))
                    if k not in fields or k in overrides)
    return added + "\n" + kept, values


def make_input(source, workdir, shard, steps):
    text = strip_comments(open(os.path.join(source, "examples/models/tiny.hx")).read())
    ms, me = find_block(text, r"\bmodel\s+\"[^\"]*\"", "model")
    ts, te = find_block(text, r"\btrain\b", "train")
    model_body, model = rewrite_block(text[ms:me], block_fields(text[ms:me]), {}, MODEL_FIELDS)
    train_fields = block_fields(text[ts:te])
    overrides = {"data": '"%s"' % shard, "steps": str(steps)}
    # The example warms up for longer than this short run: keep at most half of
    # it as warmup so that the cosine half of the schedule is compared too.
    if int(train_fields.get("warmup_steps", "0")) > steps // 2:
        overrides["warmup_steps"] = str(steps // 2)
    train_body, train = rewrite_block(text[ts:te], train_fields, overrides, TRAIN_FIELDS)
    edits = sorted([(ms, me, model_body), (ts, te, train_body)], reverse=True)
    for start, end, body in edits:
        text = text[:start] + body + text[end:]
    path = os.path.join(workdir, "tiny_ref.hx")
    with open(path, "w") as f:
        f.write(text)
    return path, model, train


def ref_args(model, train, shard, steps):
    args = []
    for table, values in ((MODEL_FIELDS, model), (TRAIN_FIELDS, train)):
        for name, (opt, _) in table.items():
            value = values[name]
            value = {"true": "1", "false": "0"}.get(value, value)
            args += [opt, value]
    return args + ["--steps", str(steps), "--data", shard, "--verbose"]


def run(cmd, what, cwd, timeout, env=None):
    print("+ " + " ".join(cmd), flush=True)
    try:
        proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout,
                              env=env)
    except subprocess.TimeoutExpired:
        raise Failure("%s did not finish within %d s" % (what, timeout))
    if proc.returncode != 0:
        tail = (proc.stdout + proc.stderr).strip().splitlines()[-25:]
        raise Failure("%s failed (exit %d):\n  %s" % (what, proc.returncode, "\n  ".join(tail)))
    return proc.stdout + proc.stderr


def generated_losses(output, steps):
    """[(loss, lr or None)] in step order."""
    losses = {}
    for line in output.splitlines():
        m = GENERATED_LINE.search(line)
        if m:
            if int(m.group(2)) != steps:
                raise Failure("the generated program says %s steps, expected %d: %r"
                              % (m.group(2), steps, line))
            if m.group(1) in losses:
                raise Failure("step %s printed twice (once per rank?): %r" % (m.group(1), line))
            lr = GENERATED_LR.search(line)
            losses[m.group(1)] = (float(m.group(3)), float(lr.group(1)) if lr else None)
    # Steps may count from 0 or 1: order by number, then compare in order.
    ordered = [losses[k] for k in sorted(losses, key=int)]
    if len(ordered) != steps:
        raise Failure("expected %d `step N/%d ... loss X` lines from the generated program, "
                      "found %d; its output:\n%s" % (steps, steps, len(ordered), output))
    return ordered


def reference_losses(output, steps):
    """[(loss, lr)] in step order (ref_llama --verbose)."""
    losses = [(float(m.group(2)), float(m.group(3)))
              for m in map(REF_LINE.match, output.splitlines()) if m]
    if len(losses) != steps:
        raise Failure("ref_llama printed %d steps, expected %d" % (len(losses), steps))
    return losses


def check_prerequisites(args):
    missing = [p for p in (os.path.join(args.source, "examples/models/tiny.hx"),
                           os.path.join(args.source, "examples/clusters/cpu1.hx"),
                           args.hexic, args.ref, args.text) if not os.path.exists(p)]
    if missing:
        raise Failure("missing (not written or not built yet): " + ", ".join(missing))
    if not shutil.which("make") or not shutil.which("mpirun"):
        raise Failure("make and mpirun are needed to build and run the generated program")


def compare(gen, ref, rtol):
    worst = worst_lr = 0.0
    print("%5s %16s %16s %12s %12s" % ("step", "generated", "reference", "rel diff", "lr rel diff"))
    for s, ((g, g_lr), (r, r_lr)) in enumerate(zip(gen, ref)):
        rel = abs(g - r) / abs(r) if math.isfinite(g) else math.inf
        lr_rel = abs(g_lr - r_lr) / r_lr if g_lr is not None and r_lr > 0 else 0.0
        worst, worst_lr = max(worst, rel), max(worst_lr, lr_rel)
        print("%5d %16.9f %16.9f %12.3e %12s%s" % (
            s, g, r, rel, "-" if g_lr is None else "%.3e" % lr_rel,
            "" if rel <= rtol and lr_rel <= LR_RTOL else "  <-- over"))
    print("max relative difference %.3e (tolerance %.0e)" % (worst, rtol))
    if gen[0][1] is None:
        print("(the generated log prints no lr, so the schedules were not compared)")
    if worst_lr > LR_RTOL:
        raise Failure("the generated program's learning rates differ from the spec's schedule "
                      "by %.3e relative (tolerance %.0e)" % (worst_lr, LR_RTOL))
    if not worst <= rtol:
        raise Failure("the generated program's losses differ from the reference by more than "
                      "%.0e relative" % rtol)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hexic", required=True)
    ap.add_argument("--ref", required=True)
    ap.add_argument("--source", required=True, help="the hexic source tree")
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--text", default="/usr/share/common-licenses/GPL-3")
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--rtol", type=float, default=5e-6)
    args = ap.parse_args()
    try:
        check_prerequisites(args)
        shutil.rmtree(args.workdir, ignore_errors=True)
        os.makedirs(args.workdir)
        shard = os.path.join(os.path.abspath(args.workdir), "text.bin")
        with open(args.text, "rb") as f:
            write_shard(shard, list(f.read()))
        hx, model, train = make_input(args.source, args.workdir, shard, args.steps)
        out = os.path.join(os.path.abspath(args.workdir), "out")
        run([args.hexic, hx, os.path.join(args.source, "examples/clusters/cpu1.hx"), "-o", out],
            "hexic", args.workdir, 300)
        run(["make", "-C", out, "-j2", "HEXIC_HOME=" + args.source], "make (generated Makefile)",
            args.workdir, 600)
        env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
                   OMPI_MCA_rmaps_base_oversubscribe="1")
        gen_out = run(["bash", os.path.join(out, "launch.sh")], "the generated program",
                      args.workdir, 600, env)
        ref_out = run([args.ref] + ref_args(model, train, shard, args.steps), "ref_llama",
                      args.workdir, 300)
        compare(generated_losses(gen_out, args.steps), reference_losses(ref_out, args.steps),
                args.rtol)
    except Failure as e:
        print("FAIL reference_vs_generated: %s" % e)
        return 1
    print("PASS reference_vs_generated")
    return 0


if __name__ == "__main__":
    sys.exit(main())
