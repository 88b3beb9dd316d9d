#!/usr/bin/env python3
"""Measured device memory against the plan (issue 25, item 1).

    memory_cmp.py NAME PLAN_JSON MEMORY_REPORT_JSON [TOLERANCE]

Each rank's measured peak of each kind (a run's --memory-report) must be
within TOLERANCE (default 0.05: issue 25's 5%) of plan.json's memory_by_kind, or within 256 bytes where the plan
predicts (almost) nothing: the runtime allocates one float for an empty
buffer. A miss names the plan, the rank and the kind, with both figures;
exit 1 then. Used by tests/exec/run_memory.sh (the CPU backend) and
tests/rtlib/emulate_backend.sh's memory part (the CUDA backend)."""
import json
import sys


def main():
    name, plan_path, report_path = sys.argv[1:4]
    tolerance = float(sys.argv[4]) if len(sys.argv) > 4 else 0.05
    want = json.load(open(plan_path))["memory_by_kind"]
    report = json.load(open(report_path))
    got = {r["rank"]: r["peak"] for r in report["ranks"]}
    bad, worst = [], (0.0, "")
    for rank, kinds in sorted(got.items()):
        for kind, m in kinds.items():
            p = want[rank][kind]
            err = abs(m - p) / max(p, 1)
            if abs(m - p) > 256 and err > tolerance:
                bad.append(f"rank {rank} {kind}: measured {m} bytes, plan {p:.0f} ({100 * err:+.1f}%)")
            elif abs(m - p) > 256 and err > worst[0]:
                worst = (err, f"rank {rank} {kind} {100 * err:.2f}%")
    for b in bad:
        print(f"  {name}: {b}")
    if not bad:
        largest = f" (largest: {worst[1]})" if worst[1] else " (all exact)"
        print(f"  {name} ({report['backend']}): {len(got)} ranks x 7 kinds within {100 * tolerance:g}%{largest}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
