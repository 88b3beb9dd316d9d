#!/usr/bin/env python3
"""Per kind of event, one step's seconds over every rank: simulated (hexic's
trace.json) against measured (a program's HEXIC_TRACE file), for
bench/measured.sh (measure_lib.sh's kind_table says what each row holds).
  kind_table.py SIMULATED MEASURED SKIP
The measured figures are the mean over the steps after the first SKIP.
Under --emulate a compute op's trace event also carries its compute at the
device's speed from CPU seconds ("emulated": what it takes on an idle
machine); the last two columns compare the simulator with that, which a
loaded machine does not move."""
import bisect
import json
import sys
from collections import defaultdict

COMPUTE = ("forward", "backward")
COLLECTIVES = ("all-reduce", "all-gather")
HIDDEN = 0.05  # a hop is hidden when at most this share of it is exposed


def spans(path):
    return [e for e in json.load(open(path))["traceEvents"] if e.get("ph") == "X"]


def end(e):
    return e["ts"] + e["dur"]


def by_rank(events):
    ranks = defaultdict(list)
    for e in events:
        ranks[e["tid"]].append(e)
    return ranks


def uncovered(begin, finish, busy):
    """Microseconds of [begin, finish) outside the (start, end) intervals of busy."""
    left, at = 0.0, begin
    for b0, b1 in sorted(busy):
        if b1 <= at or b0 >= finish:
            continue
        left += max(0.0, b0 - at)
        at = max(at, b1)
    return left + max(0.0, finish - at)


def number_steps(events, skip):
    """Tags each event with its step (the rank's optimizer events ending
    before it); returns the kept events and how many steps every rank kept."""
    kept, steps = [], None
    for evs in by_rank(events).values():
        ends = sorted(end(e) for e in evs if e["cat"] == "optimizer")
        steps = len(ends) - skip if steps is None else min(steps, len(ends) - skip)
        for e in evs:
            e["step"] = bisect.bisect_left(ends, end(e))
            if skip <= e["step"] < len(ends):
                kept.append(e)
    return kept, max(steps or 0, 0)


def collectives(events, totals):
    """A collective instance's members: same kind, step, group and order on
    each member (the order its events were recorded in: the buckets' one
    order; their starts on the emulated clock need not follow it). It completed at the first member's end, or at its emulated
    completion ("done", --emulate) where the trace has it: a member may
    collect the result only once its own backward is done. From the last
    member's arrival to that is the kind's, on each member as the simulator
    counts it; before it, each member's waiting for its peers."""
    instances = defaultdict(list)
    seen = defaultdict(int)
    for e in sorted(events, key=lambda e: e["tid"]):
        group = e["args"].get("group", -1)
        mine = (e["cat"], e.get("step", 0), group, e["tid"])
        instances[(e["cat"], e.get("step", 0), group, seen[mine])].append(e)
        seen[mine] += 1
    waits = defaultdict(list)
    for (kind, *_), members in instances.items():
        # the last arrival; under --emulate ("began"), on the link, after
        # the member's earlier buckets queued on it as the simulator queues
        last = max(max(m["ts"], m["args"].get("began", 0.0)) for m in members)
        done = min(m["args"].get("done", end(m)) for m in members)
        for m in members:
            totals[kind] += max(0.0, done - last)
            waits[(kind, m["tid"])].append((m["ts"], min(done, last)))
    # a rank's waits for its buckets overlap: each second counted once
    for (kind, _), spans_ in waits.items():
        lo = min(s for s, _ in spans_)
        hi = max(e for _, e in spans_)
        totals[kind + ", waiting for peers"] += (hi - lo) - uncovered(lo, hi, spans_)


def hops(sends, recvs, compute):
    """(seconds of every hop, seconds exposed, hops, hops hidden): a hop from
    its send's start to its receive's end, exposed where the receiver
    computes nothing. sends/recvs: (start, end, sender, receiver, mb, step)."""
    start_of = {(s, r, mb, st): t0 for t0, _, s, r, mb, st in sends}
    total = exposed = 0.0
    n = hidden = 0
    for _, t1, s, r, mb, st in recvs:
        t0 = start_of.get((s, r, mb, st))
        if t0 is None or t1 < t0:
            continue
        out = uncovered(t0, t1, compute[r])
        total += t1 - t0
        exposed += out
        n += 1
        hidden += out <= HIDDEN * (t1 - t0)
    return total, exposed, n, hidden


def hop_rows(events, compute):
    """The measured hops: a send on its sender, a receive on its receiver."""
    sends = [(e["ts"], end(e), e["tid"], e["args"]["peer"], e["args"]["micro_batch"], e["step"])
             for e in events if e["cat"] == "send"]
    # the data's arrival: at the emulated link's speed where the trace has
    # it, else the receive's end (which may be later: at the RECV op)
    recvs = [(e["ts"], e["args"].get("done", end(e)), e["args"]["peer"], e["tid"],
              e["args"]["micro_batch"], e["step"]) for e in events if e["cat"] == "recv"]
    return hops(sends, recvs, compute)


def sim_hop_rows(events, compute):
    """The simulator's hops: each send event is the link's transfer, and its
    receive event spans the same time on the receiver."""
    sends = [(e["ts"], end(e), e["tid"], e["args"]["peer"], e["args"]["micro_batch"], 0)
             for e in events if e["cat"] == "send"]
    recvs = [(s[0], s[1], s[2], s[3], s[4], 0) for s in sends]
    return hops(sends, recvs, compute)


def compute_of(events):
    busy = defaultdict(list)
    for e in events:
        if e["cat"] in COMPUTE:
            busy[e["tid"]].append((e["ts"], end(e)))
    return busy


def emulated_of(events):
    """Per compute kind, the ops' compute at the device's speed (--emulate)."""
    totals = defaultdict(float)
    for e in events:
        if "emulated" in e["args"]:
            totals[e["cat"]] += e["args"]["emulated"]
    return totals


def totals_of(events):
    """Seconds per kind; what an optimizer op waited for (the loss and norm
    all-reduce over every rank, --emulate's "waited") is a row of its own."""
    totals = defaultdict(float)
    for e in events:
        if e["cat"] in COLLECTIVES + ("send", "recv"):
            continue
        waited = e["args"].get("waited", 0.0) if e["cat"] == "optimizer" else 0.0
        totals[e["cat"]] += e["dur"] - waited
        if waited:
            totals["optimizer, norm all-reduce wait"] += waited
    return totals


def main():
    sim_events, skip = spans(sys.argv[1]), int(sys.argv[3])
    meas_events, steps = number_steps(spans(sys.argv[2]), skip)
    if not steps:
        print("          per kind: no step after the first %d in %s" % (skip, sys.argv[2]))
        return
    sim, meas = totals_of(sim_events), totals_of(meas_events)
    for e in sim_events:
        if e["cat"] in COLLECTIVES:  # one event per member, all over the same time
            sim[e["cat"]] += e["dur"]
    collectives([e for e in meas_events if e["cat"] in COLLECTIVES], meas)
    sim_hops = sim_hop_rows(sim_events, compute_of(sim_events))
    meas_hops = hop_rows(meas_events, compute_of(meas_events))
    hop, exposed = "pipeline hop (send start to arrival)", "pipeline hop, not under compute"
    if sim_hops[2] or meas_hops[2]:
        sim[hop], sim[exposed] = sim_hops[0], sim_hops[1]
        meas[hop], meas[exposed] = meas_hops[0], meas_hops[1]
    emulated = emulated_of(meas_events)
    head = "          per kind, one step over every rank:  simulated s   measured s   error"
    print(head + ("   emulated s   error" if emulated else ""))
    for kind in sorted(set(sim) | set(meas)):
        s = sim[kind] * 1e-6 if kind in sim else None
        m = meas.get(kind, 0.0) * 1e-6 / steps
        err = "%+6.1f%%" % (100 * (s - m) / m) if s is not None and m > 0 else "     -"
        shown = "%11.4f" % s if s is not None else "%11s" % "-"
        row = "          %-36s %s  %11.4f  %s" % (kind, shown, m, err)
        if kind in emulated:
            u = emulated[kind] * 1e-6 / steps
            row += "  %11.4f  %s" % (u, "%+6.1f%%" % (100 * (s - u) / u) if s is not None and u > 0
                                     else "     -")
        print(row)
    if sim_hops[2] or meas_hops[2]:
        print("          pipeline hops hidden under the receiver's compute: simulated %d of %d, "
              "measured %.1f of %.1f per step" % (sim_hops[3], sim_hops[2], meas_hops[3] / steps,
                                                  meas_hops[2] / steps))


main()
