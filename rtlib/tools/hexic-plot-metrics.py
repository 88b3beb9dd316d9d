#!/usr/bin/env python3
"""hexic-plot-metrics: a rank program's --metrics file (one JSON object per
step, docs/evaluation.md) in, one PNG out with two panels over the steps:
the training loss with the validation loss where it was computed, and the
throughput (tokens/s, and MFU on a second axis when the file has it).

    hexic-plot-metrics.py METRICS.jsonl OUT.png [--title TEXT] [--force]

OUT.png is not written over unless --force. Needs matplotlib (an optional
dependency: pip install matplotlib, or apt-get install python3-matplotlib);
without it the script says so and exits 3, before reading anything.
"""
import argparse
import json
import math
import os
import sys

PROG = "hexic-plot-metrics"
EXIT_USAGE, EXIT_INPUT, EXIT_NO_MATPLOTLIB = 2, 1, 3
MAX_LINES = 10_000_000  # a run of ten million steps; more is not a metrics file
MAX_LINE_BYTES = 1 << 16


def die(code, msg):
    print(f"{PROG}: error: {msg}", file=sys.stderr)
    sys.exit(code)


def load_pyplot():
    try:
        import matplotlib
    except ImportError:
        die(EXIT_NO_MATPLOTLIB,
            "matplotlib is not installed (it is optional, needed only for plots): "
            "pip install matplotlib, or apt-get install python3-matplotlib")
    matplotlib.use("Agg")  # no display: a file only
    import matplotlib.pyplot as plt
    return plt


def number(obj, key, where):
    """obj[key] as a finite float, None when absent."""
    if key not in obj:
        return None
    v = obj[key]
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        die(EXIT_INPUT, f"{where}: \"{key}\" is not a finite number: {v!r}")
    return float(v)


def read_metrics(path):
    """Per step: step, loss, val_loss, tokens_per_s, mfu (None when absent)."""
    rows = []
    try:
        f = open(path, "rb")
    except OSError as e:
        die(EXIT_INPUT, f"{path}: cannot open: {e.strerror}")
    with f:
        for lineno, raw in enumerate(f, 1):
            where = f"{path}:{lineno}"
            if lineno > MAX_LINES:
                die(EXIT_INPUT, f"{path}: more than {MAX_LINES} lines")
            if len(raw) > MAX_LINE_BYTES:
                die(EXIT_INPUT, f"{where}: a line of more than {MAX_LINE_BYTES} bytes")
            if not raw.strip():
                continue
            try:
                obj = json.loads(raw)
            except (ValueError, UnicodeDecodeError) as e:
                die(EXIT_INPUT, f"{where}: not JSON: {e}")
            if not isinstance(obj, dict):
                die(EXIT_INPUT, f"{where}: not a JSON object")
            step = number(obj, "step", where)
            if step is None:
                die(EXIT_INPUT, f"{where}: no \"step\"")
            rows.append({k: number(obj, k, where)
                         for k in ("loss", "val_loss", "tokens_per_s", "mfu")} | {"step": step})
    if not rows:
        die(EXIT_INPUT, f"{path}: no steps")
    return rows


def series(rows, key):
    pts = [(r["step"], r[key]) for r in rows if r[key] is not None]
    return [p[0] for p in pts], [p[1] for p in pts]


def plot(plt, rows, out, title):
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(8, 7), sharex=True)
    for key, label, style in (("loss", "training loss", "-"),
                              ("val_loss", "validation loss", "o--")):
        xs, ys = series(rows, key)
        if xs:
            top.plot(xs, ys, style, label=label)
    top.set_ylabel("loss (mean token cross-entropy)")
    top.legend()
    top.grid(alpha=0.3)
    xs, ys = series(rows, "tokens_per_s")
    if xs:
        bottom.plot(xs, ys, "-", color="tab:green", label="tokens/s")
    bottom.set_ylabel("tokens/s")
    bottom.set_xlabel("step")
    bottom.grid(alpha=0.3)
    xs, ys = series(rows, "mfu")
    if xs:
        right = bottom.twinx()
        right.plot(xs, [100 * y for y in ys], ":", color="tab:red", label="MFU")
        right.set_ylabel("MFU (% of the plan's peak)")
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(out, format="png", dpi=100)
    plt.close(fig)


def main():
    ap = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n\n")[0])
    ap.add_argument("metrics", help="the --metrics file (JSON lines)")
    ap.add_argument("out", help="the PNG to write")
    ap.add_argument("--title", default="", help="a title above the panels")
    ap.add_argument("--force", action="store_true", help="write over OUT if it exists")
    args = ap.parse_args()
    plt = load_pyplot()
    if os.path.lexists(args.out) and not args.force:
        die(EXIT_USAGE, f"{args.out} exists: it is not written over; name another or add --force")
    rows = read_metrics(args.metrics)
    tmp = args.out + ".tmp"
    try:
        plot(plt, rows, tmp, args.title)
        os.replace(tmp, args.out)
    except OSError as e:
        if os.path.exists(tmp):
            os.remove(tmp)
        die(EXIT_INPUT, f"{args.out}: cannot write: {e.strerror}")
    print(f"{PROG}: {len(rows)} steps drawn to {args.out}")


if __name__ == "__main__":
    main()
