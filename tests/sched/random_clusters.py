#!/usr/bin/env python3
"""Plans seeded random clusters of 1-4096 devices (issue 10): no crash.

usage: random_clusters.py HEXIC [COUNT [SEED]]

Each case is a random model (tiny to 70B, random global batch) on a random
cluster of one of these shapes:
  flat   one-GPU machines on one network (the shape whose METIS graphs once
         overflowed: 500-640 of them)
  deep   islands of multi-GPU machines joined by fast links, the islands by
         a slower network
  giant  one machine with many GPUs
  tiny   many machines of 1-2 GPUs of several types
  mixed  a few machine kinds of several GPU types
The sizes are biased towards the shapes that crashed (500-640 flat machines,
4096 devices, a global batch of 1024). Every run must end with exit 0 (a
plan, which hexic's verifier checked after each pass and the simulator
judged) or 3 (no plan fits), and print no internal error or sanitizer report.
--search-evals keeps each run short: the crashes were in partitioning and
completing plans, which a short search reaches as well as a long one.
"""
import random
import re
import subprocess
import sys
import tempfile
import time

GPUS = [("A100", 312, 80), ("H100", 989, 80), ("RTX4090", 165.2, 24), ("RTX3090", 71, 24),
        ("L40S", 362, 48), ("T4", 65, 16)]
NODE_BW = ["16 GB/s", "32 GB/s", "200 GB/s", "450 GB/s"]
NET_BW = ["1 Gbps", "10 Gbps", "100 Gbps", "25 GB/s"]

# (layers, hidden, ffn, heads, kv_heads, seq_len): tiny .. Llama-2-70B
MODELS = [(4, 64, 176, 4, 2, 64), (8, 1024, 2816, 8, 8, 1024), (32, 4096, 11008, 32, 32, 4096),
          (40, 5120, 13824, 40, 40, 4096), (80, 8192, 28672, 64, 8, 4096)]


def model_text(rng):
    layers, hidden, ffn, heads, kv, seq = rng.choice(MODELS)
    batch = rng.choice([1, 7, 64, 256, 1024, 4096])
    return ('model "m" { layers = %d; hidden = %d; ffn = %d; heads = %d; kv_heads = %d\n'
            '  vocab = 32000; seq_len = %d }\n'
            'train { global_batch = %d; precision = bf16; recompute = %s; steps = 1; seed = 1 }\n'
            % (layers, hidden, ffn, heads, kv, seq, batch, rng.choice(["none", "full", "auto"])))


def gpu_lines(types):
    return ['gpu "%s" { tflops = %s; memory = %d GiB }' % t for t in types]


def node_line(name, gpu, gpus, replicas, rng):
    bw = "; bandwidth = %s" % rng.choice(NODE_BW) if gpus > 1 else ""
    return ('node "%s" { gpu = "%s"; gpus = %d%s; latency = 2 us; replicas = %d }'
            % (name, gpu, gpus, bw, replicas))


def network(rng):
    return "network { bandwidth = %s; latency = 10 us }" % rng.choice(NET_BW)


def flat(rng):
    n = rng.choice([rng.randint(1, 64), rng.randint(480, 660), rng.randint(480, 660), 4096])
    t = rng.choice(GPUS)
    return gpu_lines([t]) + [node_line("n", t[0], 1, n, rng), network(rng)]


def deep(rng):
    types = rng.sample(GPUS, rng.randint(1, 3))
    per, out = rng.choice([4, 8]), gpu_lines(types)
    total = rng.choice([64, 512, 1024, 4096])
    for i, t in enumerate(types):
        reps = max(1, total // per // len(types))
        out.append(node_line("i%d" % i, t[0], per, reps, rng))
        out.append('link "i%d" "i%d" { bandwidth = 400 Gbps; latency = 3 us }' % (i, i))
        if reps > 2 and rng.random() < 0.5:  # one replica pair apart from its block
            out.append('link "i%d-1" "i%d-2" { bandwidth = 100 Gbps; latency = 4 us }' % (i, i))
    return out + [network(rng)]


def giant(rng):
    t = rng.choice(GPUS)
    return gpu_lines([t]) + [node_line("g", t[0], rng.choice([1, 3, 64, 1024]), 1, rng)]


def tiny(rng):
    types = rng.sample(GPUS, rng.randint(2, 4))
    out, left = gpu_lines(types), rng.choice([100, 700, 2048, 4096])
    for i, t in enumerate(types):
        reps = left if i == len(types) - 1 else rng.randint(1, max(1, left - (len(types) - i - 1)))
        reps = max(1, min(reps, left // rng.choice([1, 2])))
        gpus = rng.choice([1, 2]) if reps * 2 <= left else 1
        out.append(node_line("t%d" % i, t[0], gpus, reps, rng))
        left -= reps * gpus
        if left <= 0:
            break
    return out + [network(rng)]


def mixed(rng):
    types = rng.sample(GPUS, rng.randint(1, 4))
    out = gpu_lines(types)
    for i, t in enumerate(types):
        out.append(node_line("m%d" % i, t[0], rng.choice([1, 2, 3, 4, 8]), rng.randint(1, 32), rng))
    return out + [network(rng)]


SHAPES = [flat, deep, giant, tiny, mixed]


def devices(cluster):
    """Devices of a generated cluster file (gpus x replicas per node line)."""
    total = 0
    for line in open(cluster):
        m = re.search(r"gpus = (\d+).*replicas = (\d+)", line)
        if m:
            total += int(m.group(1)) * int(m.group(2))
    return total


def check(hexic, d, case, rng):
    shape = SHAPES[case % len(SHAPES)]
    cluster, model = "%s/c%d.hx" % (d, case), "%s/m%d.hx" % (d, case)
    with open(cluster, "w") as f:
        f.write("\n".join(shape(rng)) + "\n")
    with open(model, "w") as f:
        f.write(model_text(rng))
    start = time.monotonic()
    # exit 0 means the schedule and simulate passes ran with the verifier
    # after each, on a plan the simulator could judge
    p = subprocess.run([hexic, model, cluster, "--search-evals=40"], capture_output=True,
                       text=True, timeout=600)
    print("case %2d %-5s %4d devices  exit %d  %5.1f s" % (case, shape.__name__, devices(cluster),
                                                          p.returncode, time.monotonic() - start))
    bad = [w for w in ("internal error", "AddressSanitizer", "runtime error", "LeakSanitizer")
           if w in p.stderr]
    ok = p.returncode in (0, 3) and not bad
    if not ok:
        print("FAIL case %d (%s): exit %d %s\n--- %s\n%s--- %s\n%s--- stderr\n%s"
              % (case, shape.__name__, p.returncode, bad, model, open(model).read(), cluster,
                 open(cluster).read(), p.stderr[-4000:]))
    return ok, p.returncode


def main():
    hexic = sys.argv[1]
    count = int(sys.argv[2]) if len(sys.argv) > 2 else 20
    rng = random.Random(int(sys.argv[3]) if len(sys.argv) > 3 else 10)
    failed, planned = 0, 0
    with tempfile.TemporaryDirectory() as d:
        for case in range(count):
            ok, rc = check(hexic, d, case, rng)
            failed += not ok
            planned += rc == 0
    print("%d random clusters: %d planned, %d without a plan that fits, %d failed"
          % (count, planned, count - planned - failed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
