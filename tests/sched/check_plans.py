#!/usr/bin/env python3
"""Command-line checks of the HexiScale scheduler on seeded random clusters.

usage: check_plans.py CHECK HEXIC REPO
  determinism  two runs -> identical plan.json bytes and identical IR dumps
  baseline     hexic's plan is never slower than the symmetric baseline
  exhaustive   hexic within 2% of --strategy=exhaustive on 6-device clusters
  oracle       hexic is never faster than --strategy=exhaustive (the exact
               planner over a space that holds every plan hexic can return)
               on seeded clusters of 5-6 devices, compared at full precision
  hexiseq      long-context-13b on hetero-64: plan.json devices carry seq and
               heads, baselines[] lists Ring, Ulysses and USP
  plan_tp      a --plan file whose TP degree does not divide the heads fails
  limits       issue 10: a search the clock cuts short still returns its first
               plan (no "no plan fits") and warns that the plan may differ;
               --search-evals=N gives the same plan.json on every run, and on
               small clusters (ranked by the simulator) a larger N is never
               slower; spending every evaluation is noted; bad values exit 2
  tau          --tau=N reaches the stage-order search (tau 1 and 3 plan a seeded
               cluster differently), is in --help, and 0, 17, x exit 2
  profile      a profiled cluster whose times are not affine in the micro-batch
               size: the exact planner plans it, hexic within 2% of it
  mixed        a seeded cluster whose plan gives its pipelines different
               micro-batch sizes: the sizes sum to the global batch, and the
               plan.json read back with --plan simulates to the same time
"""
import json
import os
import random
import re
import subprocess
import sys
import tempfile

GPUS = [("A100", 312, 80), ("RTX4090", 165.2, 24), ("RTX3090", 71, 24), ("L40S", 362, 48),
        ("T4", 65, 16)]
NODE_BW = ["16 GB/s", "25 GB/s", "200 GB/s", "300 GB/s"]
NET_BW = ["1 Gbps", "10 Gbps", "100 Gbps", "25 GB/s"]

MODEL = """model "m" {
  layers = %d; hidden = %d; ffn = %d; heads = %d; kv_heads = %d
  vocab = 32000; seq_len = %d
}
train { global_batch = %d; precision = bf16; recompute = auto; steps = 1; seed = 1 }
"""


def random_cluster(rng, ndev_max, exact=None):
    """A .hx cluster of 1..4 nodes with ndev_max devices at most (exactly
    `exact` when given)."""
    total = exact or rng.randint(2, ndev_max)
    sizes = []
    while sum(sizes) < total:
        sizes.append(min(rng.choice([1, 2, 2, 3, 4]), total - sum(sizes)))
    out = []
    used = set()
    for i, n in enumerate(sizes):
        name, tf, mem = rng.choice(GPUS)
        if name not in used:
            out.append('gpu "%s" { tflops = %s; memory = %d GiB }' % (name, tf, mem))
            used.add(name)
        out.append('node "n%d" { gpu = "%s"; gpus = %d; bandwidth = %s; latency = 5 us }'
                   % (i, name, n, rng.choice(NODE_BW)))
    out.append("network { bandwidth = %s; latency = 20 us }" % rng.choice(NET_BW))
    return "\n".join(out) + "\n"


def random_model(rng):
    heads = rng.choice([8, 12, 16, 32])
    hidden = heads * 128
    return MODEL % (rng.choice([8, 12, 16, 24]), hidden, hidden * 8 // 3 // 64 * 64, heads, heads,
                    rng.choice([1024, 2048]), rng.choice([8, 16, 32]))


def run(hexic, files, *args):
    p = subprocess.run([hexic, *files, "--print-ir", *args], capture_output=True, text=True,
                       timeout=600)
    return p.returncode, p.stdout, p.stderr


def times(dump):
    """(plan, baseline) simulated iteration seconds from an IR dump."""
    plan = base = None
    current = None
    for line in dump.splitlines():
        if line.startswith("baseline plan"):
            current = "base"
        elif line.startswith("subset baseline plan"):
            current = "subset"
        elif line.startswith("plan "):
            current = "plan"
        m = re.match(r"\s+simulated: iteration ([0-9.e+-]+) s", line)
        if m:
            if current == "base":
                base = float(m.group(1))
            elif current == "plan":
                plan = float(m.group(1))
    return plan, base


def write(d, name, text):
    path = os.path.join(d, name)
    with open(path, "w") as f:
        f.write(text)
    return path


def is_symmetric(plan):
    """The test's own reading of plan.json: every pipeline has the same
    stages (count, TP degree, layer ranges of equal length) and the same
    micro-batches."""
    pipes = plan["pipelines"]
    shape = [(st["tp"], st["layers"]) for st in pipes[0]["stages"]]
    sizes = {st["layers"][1] - st["layers"][0] for st in pipes[0]["stages"]}
    return (len(sizes) == 1 and
            all([(st["tp"], st["layers"]) for st in p["stages"]] == shape and
                (p["micro_batches"], p["micro_batch_size"]) ==
                (pipes[0]["micro_batches"], pipes[0]["micro_batch_size"]) for p in pipes))


def check_label(plan):
    """Issue 15 item 6: the label says where the plan came from. The search
    takes the faster of the two symmetric baselines as a candidate (ties to
    the baseline), so a plan labelled "hexiscale" must be strictly faster
    than both, and one labelled "symmetric" must be symmetric (read here)
    and be one of them, with its time. Returns None or what is wrong."""
    t = plan["simulated"]["iteration_s"]
    bases = [b for b in (plan.get("baseline"), plan.get("baseline_subset")) if b]
    if plan["strategy"] == "hexiscale":
        slower = [b for b in bases if not t < b["iteration_s"]]
        if slower:
            return "labelled hexiscale at %.9g s, not faster than baseline %s at %.9g s" % (
                t, slower[0]["config"], slower[0]["iteration_s"])
    elif plan["strategy"] == "symmetric":
        if not is_symmetric(plan):
            return "labelled symmetric, but its pipelines differ: %s" % plan["description"]
        same = [b for b in bases if b["config"] == plan["description"] and b["iteration_s"] == t]
        if not same:
            return "labelled symmetric (%s, %.9g s) but no baseline is that plan" % (
                plan["description"], t)
        if any(b["iteration_s"] < t for b in bases):
            return "the symmetric plan taken is not the faster baseline"
    else:
        return "unexpected strategy %s" % plan["strategy"]
    return None


def check_baseline(hexic, d):
    """Labels against plan.json (replaces "never slower than the baseline",
    which held by construction): see check_label. At least one plan of each
    label, so both branches are exercised."""
    rng = random.Random(4)
    labels = {}
    for i in range(14):
        files = [write(d, "m%d.hx" % i, random_model(rng)),
                 write(d, "c%d.hx" % i, random_cluster(rng, 12))]
        p, plan = plan_json(hexic, files, os.path.join(d, "o%d" % i))
        if p.returncode == 3:
            continue  # nothing fits: no plan to compare
        if p.returncode != 0 or plan is None:
            return "case %d: exit %d, no plan\n%s" % (i, p.returncode, p.stderr)
        why = check_label(plan)
        if why:
            return "case %d: %s" % (i, why)
        labels[plan["strategy"]] = labels.get(plan["strategy"], 0) + 1
    if labels.get("hexiscale", 0) < 4 or labels.get("symmetric", 0) < 1:
        return "too few plans of each label: %s" % labels
    print("labels checked on %s" % labels)
    return None


def check_exhaustive(hexic, d):
    rng = random.Random(8)
    worst = 0.0
    done = 0
    # 6-device clusters keep the exact planner a few seconds under the
    # sanitizers; bench/bench.sh measures 20 clusters of 8 devices
    for i in range(5):
        files = [write(d, "m%d.hx" % i, MODEL % (8, 1024, 2816, 8, 8, 1024, 8)),
                 write(d, "c%d.hx" % i, random_cluster(rng, 6, exact=6))]
        rc, out, err = run(hexic, files)
        rc2, out2, err2 = run(hexic, files, "--strategy=exhaustive")
        if rc == 3 and rc2 == 3:
            continue
        if rc or rc2:
            return "case %d: exit %d / %d\n%s%s" % (i, rc, rc2, err, err2)
        h, e = times(out)[0], times(out2)[0]
        gap = h / e - 1
        worst = max(worst, gap)
        done += 1
        print("case %d: hexic %.6g s, exhaustive %.6g s (%+.2f%%)" % (i, h, e, 100 * gap))
        if gap > 0.02:
            return "case %d: hexic %.2f%% slower than the exhaustive optimum" % (i, 100 * gap)
    if done < 3:
        return "only %d cases fit" % done
    # a global batch of 2048 (issue 25 item 5): the search ranks candidates
    # by the simulator, not the estimate (which chose a plan 32% slower on
    # the first of these clusters)
    rng = random.Random(8)
    for i in range(3):
        files = [write(d, "mb%d.hx" % i, MODEL % (8, 1024, 2816, 8, 8, 1024, 2048)),
                 write(d, "cb%d.hx" % i, random_cluster(rng, 6, exact=6))]
        rc, out, err = run(hexic, files)
        rc2, out2, err2 = run(hexic, files, "--strategy=exhaustive")
        if rc or rc2:
            return "batch 2048 case %d: exit %d / %d\n%s%s" % (i, rc, rc2, err, err2)
        h, e = times(out)[0], times(out2)[0]
        print("batch 2048 case %d: hexic %.6g s, exhaustive %.6g s (%+.2f%%)" % (i, h, e, 100 * (h / e - 1)))
        if h / e - 1 > 0.02:
            return "batch 2048 case %d: hexic %.2f%% slower than the exhaustive optimum" % (i, 100 * (h / e - 1))
    return None


def plan_json(hexic, files, out, *args):
    """Runs hexic -o OUT: (the finished process, plan.json as read, or None
    when hexic wrote none)."""
    p = subprocess.run([hexic, *files, "-o", out, *args], capture_output=True, text=True,
                       timeout=600)
    path = os.path.join(out, "plan.json")
    if not os.path.exists(path):
        return p, None
    with open(path) as f:
        return p, json.load(f)


def plan_seconds(hexic, files, out, *args):
    """(exit code, simulated iteration seconds from plan.json at full
    precision, the plan's description)."""
    p, plan = plan_json(hexic, files, out, *args)
    if plan is None:
        return p.returncode, None, p.stderr
    return p.returncode, plan["simulated"]["iteration_s"], plan["description"]


def check_oracle(hexic, d):
    rng = random.Random(11)
    done = 0
    for i in range(6):
        files = [write(d, "m%d.hx" % i, random_model(rng)),
                 write(d, "c%d.hx" % i, random_cluster(rng, 6, exact=rng.choice([5, 6])))]
        rc, h, why = plan_seconds(hexic, files, os.path.join(d, "h%d" % i))
        rc2, e, why2 = plan_seconds(hexic, files, os.path.join(d, "e%d" % i),
                                    "--strategy=exhaustive")
        if h is None and e is None:
            continue  # nothing fits either way
        if h is None or e is None:
            return "case %d: only one planner found a plan: %s / %s" % (i, why, why2)
        done += 1
        print("case %d: hexic %.9g s, exhaustive %.9g s (%s)" % (i, h, e, why2))
        # the same simulator prices both: faster than the optimum is a bug
        if h < e * (1 - 1e-12):
            return "case %d: hexic %.12g s beats the exact planner's %.12g s" % (i, h, e)
    if done < 4:
        return "only %d cases fit" % done
    return None


def check_determinism(hexic, d, repo):
    rng = random.Random(2)
    cases = [[os.path.join(repo, "examples/models/llama2-7b.hx"),
              os.path.join(repo, "examples/clusters/case-study.hx")],
             [write(d, "m.hx", random_model(rng)), write(d, "c.hx", random_cluster(rng, 12))]]
    for files in cases:
        blobs = []
        for k in range(2):
            out = os.path.join(d, "out%d" % k)
            subprocess.run([hexic, *files, "-o", out], capture_output=True, timeout=600)
            path = os.path.join(out, "plan.json")
            if not os.path.exists(path):
                return "no plan.json from %s" % files
            with open(path, "rb") as f:
                blobs.append(f.read())
        if blobs[0] != blobs[1]:
            return "plan.json differs between two runs of %s" % files
        if run(hexic, files)[1] != run(hexic, files)[1]:
            return "IR dump differs between two runs of %s" % files
    # a large batch (issue 25 item 5): 65536 sequences on 8 devices, every
    # candidate priced by the simulator's steady-state extrapolation
    with open(os.path.join(repo, "examples/models/tiny.hx")) as f:
        big = re.sub(r"global_batch = [0-9]+", "global_batch = 65536", f.read())
    files = [write(d, "big.hx", big), os.path.join(repo, "examples/clusters/cpu8.hx")]
    blobs = []
    for k in range(2):
        out = os.path.join(d, "big%d" % k)
        subprocess.run([hexic, *files, "-o", out], capture_output=True, timeout=600)
        path = os.path.join(out, "plan.json")
        if not os.path.exists(path):
            return "no plan.json from %s at global batch 65536" % files
        with open(path, "rb") as f:
            blobs.append(f.read())
    if blobs[0] != blobs[1]:
        return "plan.json differs between two runs of %s at global batch 65536" % files
    return None


def check_plan_tp(hexic, d):
    """A plan whose stage has tp 3 for a model of 8 heads must be refused."""
    files = [write(d, "m.hx", MODEL % (4, 1024, 2816, 8, 8, 1024, 8)),
             write(d, "c.hx", 'gpu "G" { tflops = 100; memory = 80 GiB }\n'
                   'node "n" { gpu = "G"; gpus = 3; bandwidth = 100 GB/s; latency = 2 us }\n')]
    p, plan = plan_json(hexic, files, os.path.join(d, "out"))
    if plan is None:
        return "no plan.json for the 3-GPU cluster (exit %d): %s" % (p.returncode, p.stderr)
    # every degree hexic proposed divides the heads
    for p in plan["pipelines"]:
        for st in p["stages"]:
            if 8 % st.get("tp", len(st["ranks"])):
                return "hexic proposed tp %d for 8 heads" % st["tp"]
    bad = plan
    bad["pipelines"] = [dict(plan["pipelines"][0])]
    bad["pipelines"][0]["stages"] = [dict(plan["pipelines"][0]["stages"][0])]
    st = bad["pipelines"][0]["stages"][0]
    st["ranks"], st["tp"], st["layers"] = [0, 1, 2], 3, [0, 4]
    st["leader"] = 0
    bad["groups"] = []
    bad["pipelines"][0]["micro_batches"] = 8 // bad["pipelines"][0]["micro_batch_size"]
    path = write(d, "bad.json", json.dumps(bad))
    rc, _, err = run(hexic, files, "--plan=" + path)
    if rc == 0 or "tp 3" not in err:
        return "a plan with tp 3 for 8 heads was not refused (exit %d): %s" % (rc, err)
    return check_plan_tp_kv(hexic, d)


def check_plan_tp_kv(hexic, d):
    """tp 4 divides 8 query heads but not 2 kv heads (kv heads are
    replicated): a --plan file with it is accepted and simulated."""
    files = [write(d, "mkv.hx", MODEL % (4, 1024, 2816, 8, 2, 1024, 8)),
             write(d, "ckv.hx", 'gpu "G" { tflops = 100; memory = 80 GiB }\n'
                   'node "n" { gpu = "G"; gpus = 4; bandwidth = 100 GB/s; latency = 2 us }\n')]
    p, plan = plan_json(hexic, files, os.path.join(d, "outkv"))
    if plan is None:
        return "no plan.json for the 4-GPU cluster (exit %d): %s" % (p.returncode, p.stderr)
    plan["pipelines"] = [{"micro_batches": 8, "micro_batch_size": 1, "stages": [
        {"ranks": [0, 1, 2, 3], "tp": 4, "cp": 1, "hp": 1, "layers": [0, 4], "leader": 0,
         "recompute": False}]}]
    plan["groups"] = []
    for dv in plan["devices"]:
        dv["pipeline"], dv["stage"], dv["tp_rank"] = 0, 0, dv["rank"]
        dv["heads"] = [2 * dv["rank"], 2 * dv["rank"] + 2]
    path = write(d, "kv.json", json.dumps(plan))
    rc, dump, err = run(hexic, files, "--plan=" + path)
    if rc != 0:
        return "a plan with tp 4 for 8 heads / 2 kv heads was refused (exit %d): %s" % (rc, err)
    if times(dump)[0] is None or " tp 4 " not in dump:
        return "the tp 4 plan was not simulated as given:\n" + dump
    return None


SEQ_GPUS = [("A100", 312, 80), ("RTX4090", 165.2, 24), ("H100", 989, 80), ("L40S", 362, 48)]


def long_context_case(seed):
    """A seeded short-model long-sequence (model, cluster) pair for HexiSeq."""
    rng = random.Random(seed)
    heads = rng.choice([8, 16, 32])
    hidden = heads * 128
    seq = rng.choice([16384, 32768, 65536])
    model = ('model "m" { layers = %d; hidden = %d; ffn = %d; heads = %d; vocab = 32000; '
             'seq_len = %d }\ntrain { global_batch = %d; recompute = full }\n'
             % (rng.choice([4, 8]), hidden, hidden * 8 // 3 // 64 * 64, heads, seq,
                rng.choice([2, 4])))
    out, used = [], set()
    for i in range(rng.choice([2, 3, 4])):
        name, tf, mem = rng.choice(SEQ_GPUS)
        if name not in used:
            out.append('gpu "%s" { tflops = %s; memory = %d GiB }' % (name, tf, mem))
            used.add(name)
        out.append('node "n%d" { gpu = "%s"; gpus = %d; bandwidth = %s; latency = 5 us }'
                   % (i, name, rng.choice([2, 4]), rng.choice(["25 GB/s", "200 GB/s"])))
    out.append('network { bandwidth = %s; latency = 20 us }'
               % rng.choice(["1 Gbps", "10 Gbps", "25 GB/s"]))
    return model, "\n".join(out) + "\n"


def check_seq_label(plan):
    """Issue 15 item 6: a HexiSeq plan says where it came from. Ring, Ulysses
    and USP are candidates (ties to them): labelled "hexiseq" it is strictly
    faster than each; labelled with one of them it has that baseline's time
    and is no slower than the others. Never slower than the symmetric one."""
    t = plan["simulated"]["iteration_s"]
    times = {b["kind"]: b["iteration_s"] for b in plan.get("baselines", [])}
    kinds = {k: v for k, v in times.items() if k in ("ring", "ulysses", "usp")}
    label = plan["strategy"]
    if label == "hexiseq":
        tied = [k for k, v in kinds.items() if not t < v]
        if tied:
            return "labelled hexiseq at %.9g s, not faster than %s at %.9g s" % (
                t, tied[0], kinds[tied[0]])
    elif label in kinds:
        if t != kinds[label] or any(v < t for v in kinds.values()):
            return "labelled %s at %.9g s; baselines %s" % (label, t, kinds)
    else:
        return "unexpected label %s; baselines %s" % (label, sorted(times))
    if "symmetric" in times and times["symmetric"] < t:
        return "%.9g s, slower than the symmetric baseline's %.9g s" % (t, times["symmetric"])
    return None


def check_hexiseq(hexic, d, repo):
    # hetero-64 with twice the memory: its GPUs hold these plans in bf16, and
    # the CPU target allocates (and the fit check prices, issue 25) fp32
    with open(os.path.join(repo, "examples/clusters/hetero-64.hx")) as f:
        doubled = re.sub(r"memory = (\d+) GiB",
                         lambda m: "memory = %d GiB" % (2 * int(m.group(1))), f.read())
    files = [os.path.join(repo, "examples/models/long-context-13b.hx"),
             write(d, "hetero-64-x2.hx", doubled)]
    p, plan = plan_json(hexic, files, os.path.join(d, "seq"))
    # the CPU programs run context parallelism (issue 14): plan.json and
    # the programs are written, exit 0
    if p.returncode != 0 or plan is None:
        return "exit %d, no plan.json: %s" % (p.returncode, p.stderr)
    used = [dv for dv in plan["devices"] if dv.get("pipeline", -1) >= 0]
    if not used or any("seq" not in dv or "heads" not in dv for dv in used):
        return "devices without seq/heads"
    if not any(len(dv["seq"]) > 1 or dv["seq"][0] != [0, plan["model"]["seq_len"]]
               for dv in used):
        return "no device holds a part of the sequence: not a context-parallel plan"
    names = " ".join(str(b.get("kind", "")) for b in plan.get("baselines", []))
    for want in ("ring", "ulysses", "usp"):
        if want not in names.lower():
            return "baselines[] lacks %s: %s" % (want, names)
    labels = [plan["strategy"]]
    why = check_seq_label(plan)
    # seeds 0 and 4: Ring's layout is the fastest (HexiSeq's own ties it),
    # so the plan must be labelled ring, not hexiseq
    for seed in (0, 1, 4):
        model, cluster = long_context_case(seed)
        case = [write(d, "lm%d.hx" % seed, model), write(d, "lc%d.hx" % seed, cluster)]
        p, plan = plan_json(hexic, case, os.path.join(d, "lseq%d" % seed), "--strategy=hexiseq")
        if p.returncode not in (0, 2) or plan is None:
            return "seed %d: exit %d, no plan.json: %s" % (seed, p.returncode, p.stderr)
        why = why or check_seq_label(plan)
        labels.append(plan["strategy"])
    if why:
        return why
    if "hexiseq" not in labels or len(set(labels)) < 2:
        return "labels %s: both kinds of label must occur" % labels
    print("HexiSeq labels %s" % labels)
    return None


# 7 one-GPU machines whose links are slower than their own GPUs (no TP
# across them), a 4-layer model: one pipeline would need 7 stages, and no
# symmetric shape divides the batch of 64 over 7 devices, so only a search
# that looks past D_dp = 1 finds a plan.
SEVEN = ('gpu "A" { tflops = 100; memory = 16 GiB }\n'
         'node "n" { gpu = "A"; gpus = 1; bandwidth = 100 GB/s; replicas = 7 }\n'
         'network { bandwidth = 10 GB/s; latency = 5 us }\n')


def check_limits(hexic, d):
    files = [write(d, "m.hx", MODEL % (4, 256, 704, 4, 4, 256, 64)), write(d, "c.hx", SEVEN)]
    p, plan = plan_json(hexic, files, os.path.join(d, "cut"), "--search-budget=1e-9")
    if p.returncode != 0 or plan is None:
        return "a search cut short by the clock found no plan (exit %d): %s" % (p.returncode,
                                                                               p.stderr)
    if "warning:" not in p.stderr or "may differ" not in p.stderr:
        return "no warning that a cut search may give another plan: %s" % p.stderr
    rng = random.Random(5)
    small = [write(d, "sm.hx", MODEL % (8, 1024, 2816, 8, 8, 1024, 16)),
             write(d, "sc.hx", random_cluster(rng, 8, exact=8))]
    last = None
    for n in (1, 3, 30, 300, 100000):
        blobs = []
        for k in range(2):
            p, plan = plan_json(hexic, small, os.path.join(d, "e%d_%d" % (n, k)),
                                "--search-evals=%d" % n)
            if p.returncode != 0 or plan is None:
                return "--search-evals=%d: exit %d: %s" % (n, p.returncode, p.stderr)
            with open(os.path.join(d, "e%d_%d" % (n, k), "plan.json"), "rb") as f:
                blobs.append(f.read())
        if blobs[0] != blobs[1]:
            return "--search-evals=%d: plan.json differs between two runs" % n
        t = plan["simulated"]["iteration_s"]
        print("--search-evals=%d: %.9g s" % (n, t))
        if last is not None and t > last * (1 + 1e-12):
            return "--search-evals=%d gave a slower plan (%.9g s) than fewer (%.9g s)" % (n, t,
                                                                                       last)
        if n == 3 and "--search-evals=3" not in p.stderr:
            return "spending every evaluation was not noted: %s" % p.stderr
        last = t
    for bad in ("0", "-1", "1.5", "x", "2000000000"):
        rc, _, err = run(hexic, small, "--search-evals=" + bad)
        if rc != 2:
            return "--search-evals=%s: exit %d, not a usage error" % (bad, rc)
    return None


def check_tau(hexic, d):
    # 24 devices: above the local search's 16, which on smaller clusters
    # climbs to the same plan from either order (under issue 18's TP model
    # the 16-device cluster this test used no longer tells tau 1 from 3)
    rng = random.Random(0)
    files = [write(d, "m.hx", random_model(rng)),
             write(d, "c.hx", random_cluster(rng, 24, exact=24))]
    dumps = []
    for tau in (1, 3):
        rc, out, err = run(hexic, files, "--tau=%d" % tau)
        if rc != 0:
            return "--tau=%d: exit %d: %s" % (tau, rc, err)
        dumps.append(out)
    if dumps[0] == dumps[1]:
        return "--tau=1 and --tau=3 gave the same plan: the option does not reach the search"
    rc, out, _ = run(hexic, files, "--tau=3")
    if out != dumps[1]:
        return "--tau=3 is not deterministic"
    p = subprocess.run([hexic, "--help"], capture_output=True, text=True, timeout=60)
    if "--tau=N" not in p.stdout:
        return "--help does not document --tau"
    for bad in ("0", "17", "x", "-1", ""):
        rc, _, err = run(hexic, files, "--tau=" + bad)
        if rc != 2:
            return "--tau=%s: exit %d, not a usage error" % (bad, rc)
    return None


def check_mixed(hexic, d):
    rng = random.Random(213)  # a small cluster whose best plan mixes sizes
    m = MODEL % (rng.choice([8, 12]), 1024, 2816, 8, 8, 1024, rng.choice([32, 64, 128]))
    # the cluster was drawn for the unsharded memory model (issue 16's zero1
    # frees memory, and its best plan then shares one size)
    m = m.replace("steps = 1;", "steps = 1; optimizer_sharding = none;")
    files = [write(d, "m.hx", m),
             write(d, "c.hx", random_cluster(rng, 12, exact=rng.choice([9, 10, 12])))]
    # no clock cut under the sanitizers: the plan must be the deterministic one
    p, plan = plan_json(hexic, files, os.path.join(d, "mix"), "--search-budget=1000")
    if plan is None:
        return "no plan.json (exit %d): %s" % (p.returncode, p.stderr)
    sizes = [pl["micro_batch_size"] for pl in plan["pipelines"]]
    if len(set(sizes)) < 2:
        return "the pipelines share one micro-batch size %s" % sizes
    total = sum(pl["micro_batch_size"] * pl["micro_batches"] for pl in plan["pipelines"])
    batch = plan["model"]["global_batch"]
    if total != batch:
        return "pipelines take %d sequences, the global batch is %d" % (total, batch)
    rc, dump, err = run(hexic, files, "--plan=" + os.path.join(d, "mix", "plan.json"))
    again = times(dump)[0]
    if rc != 0 or again is None:
        return "the mixed plan read back: exit %d: %s" % (rc, err)
    if abs(again - plan["simulated"]["iteration_s"]) > 1e-5 * again:  # the dump has 6 digits
        return "read back it simulates to %.9g s, not %.9g s" % (again,
                                                                plan["simulated"]["iteration_s"])
    print("micro-batch sizes %s, %.6g s" % (sizes, again))
    return None


PROFILED = """gpu "G" { tflops = 50; memory = 24 GiB }
node "n" { gpu = "G"; gpus = 4; bandwidth = 50 GB/s; latency = 5 us }
profile "G" { tp = 1; micro_batch = [1, 2, 4, 8]; forward = [%s]; backward = [%s] }
profile "G" { tp = 2; micro_batch = [1, 2, 4, 8]; forward = [%s]; backward = [%s] }
profile "G" { tp = 4; micro_batch = [1, 2, 4, 8]; forward = [%s]; backward = [%s] }
"""


def check_profile(hexic, d):
    """Issue 18: measured profiles need not be affine in the micro-batch size
    (here a size of 2 costs far more per sequence than 1 or 4), which the
    exact planner's bounds assumed: it must plan without an internal error,
    and hexic's search stay within 2% of it."""
    rows = {1: (1, 8, 9, 40), 2: (0.6, 5, 5.5, 24), 4: (0.4, 3, 3.3, 14)}
    ms = lambda v, k: ", ".join("%g ms" % (x * k) for x in v)
    cluster = PROFILED % tuple(x for t in (1, 2, 4) for x in (ms(rows[t], 1), ms(rows[t], 2)))
    files = [write(d, "m.hx", MODEL % (8, 1024, 2816, 8, 8, 1024, 8)), write(d, "c.hx", cluster)]
    rc, out, err = run(hexic, files)
    rc2, out2, err2 = run(hexic, files, "--strategy=exhaustive")
    if rc or rc2:
        return "exit %d / %d\n%s%s" % (rc, rc2, err, err2)
    h, e = times(out)[0], times(out2)[0]
    print("profiled: hexic %.6g s, exhaustive %.6g s" % (h, e))
    if h > e * 1.02:
        return "hexic %.2f%% slower than the exhaustive optimum" % (100 * (h / e - 1))
    return None


def main():
    check, hexic, repo = sys.argv[1], sys.argv[2], sys.argv[3]
    with tempfile.TemporaryDirectory() as d:
        if check == "baseline":
            why = check_baseline(hexic, d)
        elif check == "exhaustive":
            why = check_exhaustive(hexic, d)
        elif check == "oracle":
            why = check_oracle(hexic, d)
        elif check == "determinism":
            why = check_determinism(hexic, d, repo)
        elif check == "hexiseq":
            why = check_hexiseq(hexic, d, repo)
        elif check == "plan_tp":
            why = check_plan_tp(hexic, d)
        elif check == "limits":
            why = check_limits(hexic, d)
        elif check == "tau":
            why = check_tau(hexic, d)
        elif check == "mixed":
            why = check_mixed(hexic, d)
        elif check == "profile":
            why = check_profile(hexic, d)
        else:
            why = "unknown check " + check
    if why:
        print("FAIL:", why)
        return 1
    print("ok:", check)
    return 0


if __name__ == "__main__":
    sys.exit(main())
