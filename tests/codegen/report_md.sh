#!/bin/bash
# report.md says what its memory column holds and leaves out what says
# nothing. tiny on cpu8 (the demo): every stage's cell is "tensors + reserve
# of device", and tensors + reserve is plan.json's peak_memory_bytes; a
# footnote says what the reserve is; the ZeRO-1 table gives sizes in MiB,
# not rows of "0.00" GiB. tiny on two plain nodes (no TP, no ZeRO-1): no
# optimizer table, no SP footnote, and no "-0.0%".
# usage: report_md.sh HEXIC SOURCE_DIR WORK_DIR
set -u
hexic=$1; src=$2; work=$3
fail() { echo "FAIL: $*"; exit 1; }
rm -rf "$work"; mkdir -p "$work"; cd "$work" || exit 1
"$hexic" "$src/examples/models/tiny.hx" "$src/examples/clusters/cpu8.hx" -o cpu8 > cpu8.out 2>&1 ||
  { cat cpu8.out; fail "hexic tiny cpu8 failed"; }
python3 - cpu8/report.md cpu8/plan.json <<'PY' || fail "cpu8/report.md"
import json, re, sys
text, plan = open(sys.argv[1]).read(), json.load(open(sys.argv[2]))
assert "| memory: tensors + reserve of device |" in text, "memory column header"
assert re.search(r"^Memory: the planned peak .* a fixed 1\.5 GiB reserve \(CUDA context", text, re.M), \
    "no footnote on the memory column"
unit = {"MiB": 2**20, "GiB": 2**30}
peaks = plan["simulated"]["peak_memory_bytes"]
rows = re.findall(r"^\| (\d+) \| (\d+) \| [^|]* \| .* \| ([\d.]+) (MiB|GiB) \+ 1\.5 GiB of 4\.0 GiB \|$",
                  text, re.M)
assert len(rows) == 8, f"{len(rows)} stage rows with a 'tensors + reserve of device' cell"
for pipeline, _, amount, u in rows:
    rank = plan["pipelines"][int(pipeline)]["stages"][0]["ranks"][0]
    tensors = peaks[rank] - 1.5 * 2**30
    assert abs(float(amount) * unit[u] - tensors) <= 0.05 * unit[u], (pipeline, amount, u, tensors)
opt = text.split("## Optimizer state per rank (ZeRO-1)")[1].split("\n## ")[0]
sizes = re.findall(r"^\| \d+ \| [^|]* \| \d+ \| ([^|]*) \|", opt, re.M)
assert len(sizes) == 8 and all(s.strip() == "0.2 MiB" for s in sizes), sizes
assert "0.00 |" not in text, "a 0.00 cell"
assert "-0.0%" not in text, "-0.0%"
PY
cat > two.hx <<'HX'
gpu "cpu" { tflops = 0.02; memory = 4 GiB; efficiency = 1; mem_bandwidth = 10 GB/s }
node "a" { gpu = "cpu"; gpus = 1 }
node "b" { gpu = "cpu"; gpus = 1 }
network { bandwidth = 1 GB/s; latency = 20 us }
HX
"$hexic" "$src/examples/models/tiny.hx" two.hx -o two > two.out 2>&1 || { cat two.out; fail "hexic tiny two failed"; }
grep -q '"optimizer_sharding": "none"' two/plan.json || fail "two/plan.json: expected a plan without ZeRO-1"
! grep -n 'Optimizer state per rank' two/report.md || fail "two/report.md: an optimizer table without ZeRO-1"
! grep -n 'TP `SP`' two/report.md || fail "two/report.md: the SP footnote where no stage is SP"
! grep -n -- '-0\.0%' two/report.md || fail "two/report.md: -0.0%"
echo "ok (report.md: memory as tensors + reserve of device, plan.json's peaks; no empty tables or notes)"
