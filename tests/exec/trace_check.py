#!/usr/bin/env python3
"""Checks a runtime trace (HEXIC_TRACE=FILE, rtlib/rt_emulate.c) of a
pipeline plan:
  trace_check.py TRACE RANKS STEPS [SIMULATED_TRACE_JSON]
- it is trace.json's format (codegen/trace.c): Chrome trace events, one
  track (tid) per rank named by a thread_name event, complete events with
  the simulator's fields;
- with SIMULATED_TRACE_JSON (hexic's trace.json of the same plan), every
  measured event kind (cat) is one the simulator also writes;
- receives posted ahead (rtlib/rt_exec_ops.c): on every rank that receives,
  each receive event overlaps a compute event (forward or backward) of the
  same rank, i.e. it was posted before the compute before it ended, but for
  at most one receive per step (a step's first receive has no compute
  before it in its step). Prints one line per receiving rank."""
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


def main():
    if len(sys.argv) not in (4, 5):
        fail("usage: trace_check.py TRACE RANKS STEPS [SIMULATED_TRACE_JSON]")
    ranks, steps = int(sys.argv[2]), int(sys.argv[3])
    spans = check_format(load(sys.argv[1]), ranks)
    if len(sys.argv) == 5:
        simulated = {e["cat"] for e in load(sys.argv[4]) if e.get("ph") == "X"}
        extra = {e["cat"] for e in spans} - simulated
        if extra:
            fail("measured kinds %s are not among the simulator's %s" % (sorted(extra),
                                                                          sorted(simulated)))
    check_ahead(spans, steps)


main()
