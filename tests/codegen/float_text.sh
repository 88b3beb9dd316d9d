#!/bin/bash
# Floats in generated files are the shortest decimal that reads back as the
# same double, and what the user wrote comes out as written: `lr = 2e-5` is
# `.lr = 2e-05` and `latency = 20 us` is `{2e-05, ...}` in rank_NNNN.c (20 *
# 1e-6 was 1.9999999999999998e-05), and no number in plan.json, trace.json or
# a rank file carries more significant digits than its shortest form.
# usage: float_text.sh HEXIC SOURCE_DIR WORK_DIR
set -u
hexic=$1; src=$2; work=$3
fail() { echo "FAIL: $*"; exit 1; }
rm -rf "$work"; mkdir -p "$work"; cd "$work" || exit 1
sed 's/lr = 1e-3/lr = 2e-5/' "$src/examples/models/tiny.hx" > tiny.hx
grep -q 'lr = 2e-5' tiny.hx || fail "examples/models/tiny.hx no longer says lr = 1e-3"
cat > two.hx <<'HX'
gpu "cpu" { tflops = 0.02; memory = 4 GiB; efficiency = 1; mem_bandwidth = 10 GB/s }
node "a" { gpu = "cpu"; gpus = 1 }
node "b" { gpu = "cpu"; gpus = 1 }
network { bandwidth = 1 GB/s; latency = 20 us }
HX
"$hexic" tiny.hx two.hx -o out > hexic.out 2>&1 || { cat hexic.out; fail "hexic failed"; }
grep -qx '    .lr = 2e-05,' out/rank_0000.c || { grep -n '\.lr' out/rank_0000.c; fail "rank_0000.c: lr is not 2e-05"; }
grep -qE '^    \{2e-05, 1000000000\.0\}, +// group 0$' out/rank_0000.c ||
  { grep -n -A2 'group_links\[\]' out/rank_0000.c; fail "rank_0000.c: the 20 us link is not {2e-05, 1000000000.0}"; }
# Every number with a fraction or an exponent, against Python's repr (the
# shortest round-trip form): the same count of significant digits.
python3 - out/plan.json out/trace.json out/rank_*.c <<'PY' || fail "a float is longer than its shortest form"
import re, sys
NUM = re.compile(r"(?<![\w.])-?(\d+\.\d*|\.\d+|\d+(?:\.\d*)?[eE][-+]?\d+)(?![\w.])")
def digits(text):
    mant = re.split(r"[eE]", text.lstrip("-"))[0].replace(".", "")
    return len(mant.strip("0")) or 1
bad, seen = [], 0
for path in sys.argv[1:]:
    for line in open(path):
        if line.lstrip().startswith(("//", "/*", "*")):
            continue  # comments print rounded figures on purpose
        for m in NUM.finditer(line):
            seen += 1
            if digits(m.group(1)) > digits(repr(float(m.group(1)))):
                bad.append(f"{path}: {m.group(1)} (shortest: {repr(float(m.group(1)))})")
print("\n".join(bad[:10]))
print(f"{seen} numbers, {len(bad)} longer than their shortest form")
sys.exit(1 if bad or seen < 20 else 0)
PY
echo "ok (2e-05 as written; every float in its shortest form)"
