#!/bin/sh
# Command-line checks of issue 3: outputs, round trip through --plan and
# `hexic simulate`, the infeasible case, deterministic dumps.
# usage: cli.sh HEXIC SOURCE_DIR WORK_DIR
set -u
hexic=$1; src=$2; work=$3
fail=0
check() { if ! eval "$1"; then echo "FAIL: $2"; fail=1; fi; }
rm -rf "$work"; mkdir -p "$work"
model=$src/examples/models/llama2-7b.hx cluster=$src/examples/clusters/case-study.hx

"$hexic" "$model" "$cluster" -o "$work/out" > "$work/summary.txt"
check '[ $? -eq 0 ]' "case study 7B compiles"
check 'grep -q "^plan: " "$work/summary.txt" && grep -q "tokens/s" "$work/summary.txt"' "summary lines"
check 'python3 -m json.tool "$work/out/trace.json" > /dev/null' "trace.json is valid JSON"
check 'python3 -m json.tool "$work/out/plan.json" > /dev/null' "plan.json is valid JSON"
check '[ "$(python3 -c "import json,sys; t=json.load(open(sys.argv[1]))[\"traceEvents\"]; print(len({e[\"tid\"] for e in t if e.get(\"name\")==\"thread_name\"}))" "$work/out/trace.json")" = 8 ]' "one named track per device"
check 'python3 -c "import json,sys; p=json.load(open(sys.argv[1])); assert p[\"model\"][\"parameters\"]==6738415616; assert p[\"baseline\"][\"config\"].startswith(\"dp=\"); assert len(p[\"devices\"])==8" "$work/out/plan.json"' "plan.json fields and the baseline's configuration"
check 'grep -q "^Speed-up over the stronger baseline (symmetric on a subset of the devices): \*\*[0-9.]*x\*\*$" "$work/out/report.md" && grep -q "^## Best symmetric plan on a subset of the devices: " "$work/out/report.md"' "report.md: both baselines, the speed-up over the stronger one and which it is"
# Issue 15: the subset baseline. On the case study the 3 A800s admit no
# symmetric shape of the 7B model (3 divides neither 32 layers, 32 heads nor
# the batch of 64) but 2 do: the best subset is faster than every device
# (the 3090s set Megatron's pace) and uses part of the cluster.
check 'python3 -c "
import json, sys
p = json.load(open(sys.argv[1]))
b, s = p[\"baseline\"], p[\"baseline_subset\"]
assert s[\"config\"].startswith(\"dp=\"), s
assert 0 < len(s[\"devices\"]) < len(p[\"devices\"]), s[\"devices\"]
assert all(p[\"devices\"][r][\"gpu\"] == \"A800\" for r in s[\"devices\"]), s[\"devices\"]
assert s[\"iteration_s\"] < b[\"iteration_s\"], (s, b)
assert p[\"simulated\"][\"iteration_s\"] <= s[\"iteration_s\"]
" "$work/out/plan.json"' "plan.json baseline_subset: A800s only, faster than the all-device baseline"
check 'grep -q "^speed-up over the stronger baseline (symmetric on a subset of the devices): " "$work/summary.txt"' "summary line names the stronger baseline"
# --strategy=symmetric-subset makes that baseline the plan (bench/measured.sh
# trains it): the same devices and time as baseline_subset, and only those
# devices used.
"$hexic" "$model" "$cluster" --strategy=symmetric-subset -o "$work/subset" > /dev/null
check '[ $? -eq 0 ] && python3 -c "
import json, sys
a, p = (json.load(open(f)) for f in sys.argv[1:])
s = a[\"baseline_subset\"]
assert p[\"strategy\"] == \"symmetric-subset\", p[\"strategy\"]
assert abs(p[\"simulated\"][\"iteration_s\"] - s[\"iteration_s\"]) < 1e-9
used = [d[\"rank\"] for d in p[\"devices\"] if d[\"pipeline\"] >= 0]
assert used == s[\"devices\"], (used, s[\"devices\"])
" "$work/out/plan.json" "$work/subset/plan.json"' "--strategy=symmetric-subset plans the subset baseline"

# Round trip: the written plan re-simulates to the same figures.
"$hexic" simulate "$work/out/plan.json" "$model" "$cluster" > "$work/resim.txt"
check '[ $? -eq 0 ]' "hexic simulate accepts plan.json"
check '[ "$(sed -n 2p "$work/summary.txt")" = "$(sed -n 2p "$work/resim.txt")" ]' "same iteration figures after the round trip"
"$hexic" --plan="$work/out/plan.json" "$model" "$cluster" --print-after=simulate > "$work/plan-dump.txt"
check '[ $? -eq 0 ] && grep -q "plan file" "$work/plan-dump.txt"' "--plan=FILE"

# A broken plan gets a located error and exit 1-ish (not a crash).
sed 's/"micro_batches": \([0-9]*\)/"micro_batches": "x"/' "$work/out/plan.json" > "$work/bad.json"
"$hexic" simulate "$work/bad.json" "$model" "$cluster" 2> "$work/bad.err"
rc=$?
check '[ $rc -ne 0 ] && [ $rc -ne 70 ] && grep -q "bad.json:[0-9]*:[0-9]*: error:" "$work/bad.err"' "located error in plan.json"

# 70B on four 24 GiB GPUs: exit 3, a message about memory.
"$hexic" "$src/examples/models/llama2-70b.hx" "$src/examples/clusters/four-4090.hx" 2> "$work/70b.err"
check '[ $? -eq 3 ] && grep -q "memory" "$work/70b.err" && grep -q "GiB more on" "$work/70b.err"' "70B on 96 GiB exits 3"

# The plan dump is byte-identical across runs.
"$hexic" "$model" "$cluster" --print-after=simulate > "$work/d1.txt"
"$hexic" "$model" "$cluster" --print-after=simulate > "$work/d2.txt"
check 'cmp -s "$work/d1.txt" "$work/d2.txt" && grep -q "^baseline plan symmetric" "$work/d1.txt"' "deterministic plan dump"
exit $fail
