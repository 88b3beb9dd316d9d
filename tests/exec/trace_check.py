#!/usr/bin/env python3
"""Checks a runtime trace (HEXIC_TRACE=FILE, rtlib/rt_emulate.c) of a
pipeline plan:
  trace_check.py TRACE RANKS STEPS [SIMULATED_TRACE_JSON] [--emulated [--compute-line=OUT]]
- it is trace.json's format (codegen/trace.c): Chrome trace events, one
  track (tid) per rank named by a thread_name event, complete events with
  the simulator's fields;
- with SIMULATED_TRACE_JSON (hexic's trace.json of the same plan), every
  measured event kind (cat) is one the simulator also writes;
- receives posted ahead (rtlib/rt_exec_ops.c): on every rank that receives,
  each receive event overlaps a compute event (forward or backward) of the
  same rank, i.e. it was posted before the compute before it ended, but for
  at most one receive per step (a step's first receive has no compute
  before it in its step). Prints one line per receiving rank.
- with --emulated (a run under --emulate): every gradient all-reduce names
  its group, and its members, matched by step, group and order, record one
  completion ("done", the emulated link's) no earlier than the last
  member's arrival; every receive records its data's arrival no earlier
  than its send's start; every compute op (forward, backward, optimizer)
  records its compute at the device's speed ("emulated"), one reference
  a kind on each rank (the figures of a kind never grow), and with
  --compute-line=OUT (the run's output) each rank's last step sums to the
  "compute of one step at each device's speed" the run printed for it
  (bench/measured.sh's kind table compares the simulator with these)."""
import re
from collections import defaultdict
import json
import sys

FIELDS = ("pipeline", "stage", "micro_batch", "layer", "peer")


def fail(msg):
    print("FAIL: " + msg, file=sys.stderr)
    sys.exit(1)


def load(path):
    try:
        with open(path) as f:
            return json.load(f)["traceEvents"]
    except (OSError, ValueError, KeyError) as e:
        fail("%s is not a trace.json-format trace: %s" % (path, e))


def check_format(events, ranks):
    tracks = sorted(e["tid"] for e in events if e.get("name") == "thread_name")
    if tracks != list(range(ranks)):
        fail("tracks %s, not one per rank 0..%d" % (tracks, ranks - 1))
    spans = [e for e in events if e.get("ph") == "X"]
    for e in spans:
        for key in ("name", "cat", "pid", "tid", "ts", "dur", "args"):
            if key not in e:
                fail("event %s has no %s" % (e, key))
        if any(k not in e["args"] for k in FIELDS) or e["dur"] < 0:
            fail("event %s lacks the simulator's args %s or has a negative dur" % (e, FIELDS))
    return spans


def overlaps(a, b):
    return a["ts"] < b["ts"] + b["dur"] and b["ts"] < a["ts"] + a["dur"]


def check_ahead(spans, steps):
    receivers = sorted({e["tid"] for e in spans if e["cat"] == "recv"})
    if not receivers:
        fail("no receive events: not a pipeline plan's trace")
    for tid in receivers:
        mine = [e for e in spans if e["tid"] == tid]
        recvs = [e for e in mine if e["cat"] == "recv"]
        compute = [e for e in mine if e["cat"] in ("forward", "backward")]
        ahead = [r for r in recvs if any(overlaps(r, c) for c in compute)]
        print("  rank %d: %d of %d receives posted before the compute before them ended"
              % (tid, len(ahead), len(recvs)))
        if len(ahead) < len(recvs) - steps or not ahead:
            fail("rank %d: only %d of its %d receives overlap a compute op: the hop is not "
                 "posted ahead" % (tid, len(ahead), len(recvs)))


def step_of(spans):
    """Per event, its rank's optimizer events that end before it."""
    ends = defaultdict(list)
    for e in spans:
        if e["cat"] == "optimizer":
            ends[e["tid"]].append(e["ts"] + e["dur"])
    return lambda e: sum(1 for t in ends[e["tid"]] if t < e["ts"] + e["dur"])


def check_emulated(spans):
    step = step_of(spans)
    instances, seen = defaultdict(list), defaultdict(int)
    # in the order recorded (the buckets' one order), not by start
    for e in sorted((e for e in spans if e["cat"] == "all-reduce"), key=lambda e: e["tid"]):
        if e["args"].get("group", -1) < 0 or "done" not in e["args"]:
            fail("all-reduce %s on rank %d names no group or completion" % (e["name"], e["tid"]))
        mine = (step(e), e["args"]["group"], e["tid"])
        instances[(step(e), e["args"]["group"], seen[mine])].append(e)
        seen[mine] += 1
    if not instances:
        fail("no gradient all-reduce in an emulated trace")
    for key, members in instances.items():
        done = [m["args"]["done"] for m in members]
        last = max(m["ts"] for m in members)
        if max(done) - min(done) > 2 or min(done) < last - 1:
            fail("step %d group %d: its members' completions %s, the last arrival %.3f: not one "
                 "completion after every member arrived" % (key[0], key[1], done, last))
    sends = {(e["tid"], e["args"]["peer"], e["args"]["micro_batch"], step(e)): e["ts"]
             for e in spans if e["cat"] == "send"}
    for e in (e for e in spans if e["cat"] == "recv"):
        sent = sends.get((e["args"]["peer"], e["tid"], e["args"]["micro_batch"], step(e)))
        if "done" not in e["args"] or sent is None or e["args"]["done"] < sent:
            fail("receive %s on rank %d: arrival %s before its send (%s) or unknown"
                 % (e["name"], e["tid"], e["args"].get("done"), sent))
    print("  emulated: %d all-reduces, each one completion over its members after the last "
          "arrival; every receive's arrival after its send" % len(instances))


COMPUTE = ("forward", "backward", "optimizer")


def check_emulated_compute(spans, out_path):
    """Every compute op carries "emulated" > 0, and the ops of one kind on a
    rank share one reference (the fewest CPU seconds any of them took so
    far), so their figures never grow through the run; with out_path, each
    rank's last step's ops, each at its kind's final figure, sum to the
    run's closing figure for that rank."""
    compute = [e for e in spans if e["cat"] in COMPUTE]
    missing = [e for e in compute if not e["args"].get("emulated", 0) > 0]
    if missing or not compute:
        fail("%d of %d compute ops carry no \"emulated\" seconds (%s)"
             % (len(missing), len(compute), missing[0]["name"] if missing else "none"))
    final = {}
    for e in sorted(compute, key=lambda e: e["ts"]):
        key = (e["tid"], e["cat"])
        v = e["args"]["emulated"]
        if key in final and v > final[key] * (1 + 1e-9) + 1e-3:
            fail("rank %d: %s at %.3f us carries %.3f us at the device's speed, more than an "
                 "earlier %s op's %.3f: the ops of a kind do not share one reference"
                 % (e["tid"], e["name"], e["ts"], v, e["cat"], final[key]))
        final[key] = min(v, final.get(key, v))
    if out_path is None:
        return
    line = [l for l in open(out_path) if "compute of one step at each device's speed" in l]
    if not line:
        fail("%s has no --emulate compute line" % out_path)
    printed = {int(r): float(s) for r, s in re.findall(r"rank (\d+) ([0-9.]+) s", line[-1])}
    step = step_of(spans)
    last = {}
    for e in compute:
        last[e["tid"]] = max(last.get(e["tid"], 0), step(e))
    sums = defaultdict(float)
    for e in compute:
        if step(e) == last[e["tid"]]:
            sums[e["tid"]] += final[(e["tid"], e["cat"])] * 1e-6
    for r, s in sorted(printed.items()):
        if abs(sums[r] - s) > 1e-4 + 1e-3 * s:
            fail("rank %d: its last step's ops are %.6f s at the device's speed, the run printed "
                 "%.4f s" % (r, sums[r], s))
    print("  emulated: %d compute ops at their devices' speeds, one reference a kind on each "
          "rank; each rank's last step sums to the run's figure (%s)"
          % (len(compute), ", ".join("%.4f" % sums[r] for r in sorted(printed))))


def main():
    emulated = "--emulated" in sys.argv
    outs = [a.split("=", 1)[1] for a in sys.argv if a.startswith("--compute-line=")]
    argv = [a for a in sys.argv if a != "--emulated" and not a.startswith("--compute-line=")]
    if len(argv) not in (4, 5):
        fail("usage: trace_check.py TRACE RANKS STEPS [SIMULATED_TRACE_JSON] [--emulated]")
    ranks, steps = int(argv[2]), int(argv[3])
    spans = check_format(load(argv[1]), ranks)
    if emulated:
        check_emulated(spans)
        check_emulated_compute(spans, outs[0] if outs else None)
    if len(argv) == 5:
        simulated = {e["cat"] for e in load(argv[4]) if e.get("ph") == "X"}
        extra = {e["cat"] for e in spans} - simulated
        if extra:
            fail("measured kinds %s are not among the simulator's %s" % (sorted(extra),
                                                                          sorted(simulated)))
    check_ahead(spans, steps)


main()
