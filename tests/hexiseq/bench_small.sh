#!/bin/sh
# The bench driver on its quick settings (13B on 32 and 64 heterogeneous
# GPUs): it runs, every setting fits a plan, prints every baseline, and
# hexic is never slower than the best of them.
# usage: bench_small.sh HEXISEQ_BENCH SOURCE_DIR WORK_DIR
set -u
bench=$1; src=$2; work=$3
rm -rf "$work"; mkdir -p "$work"
"$src/bench/hexiseq_bench.sh" "$(dirname "$bench")" quick > "$work/out.txt" 2>&1
cat "$work/out.txt"
grep -q "speed-up over the best baseline: average" "$work/out.txt" || { echo "FAIL: no summary"; exit 1; }
awk '/^settings that fit a plan: / { fit = ($6 == $8) } END { exit !fit }' "$work/out.txt" ||
  { echo "FAIL: a quick setting fits no plan"; exit 1; }
awk '/speed-up [0-9.]+x/ { for (i = 1; i <= NF; i++) if ($i == "speed-up") { x = $(i+1); sub("x", "", x); if (x + 0 < 0.9999) bad = 1 } }
     END { exit bad }' "$work/out.txt" || { echo "FAIL: hexic slower than a baseline"; exit 1; }
