#!/bin/sh
# Planning time against the global batch (issue 25 item 5): per row the
# cluster, its devices, the model, the global batch, the planner's CPU time
# on one core (taskset -c 0; user + system by /usr/bin/time; the least of
# three runs) of `hexic MODEL CLUSTER` without -o (every pass from parsing to the chosen plan's
# simulation: the planning, nothing written), the CPU time of the same run
# with -o (plan.json, report.md, trace.json, plan.svg and the rank programs
# written too: at the largest batches their tables, some 180 MB, take longer
# than the planning), the simulated iteration time of its plan, and whether
# a second run wrote a byte-identical plan.json. Then the targets, on the
# planning time: <= 1 s on every cluster of up to 64 GPUs at any batch, and
# at global batch 2048 <= 1.5 x at 64 on the same cluster, each printed as
# met or not met. Figures are measured, nothing is asserted. About 3
# minutes on one core.
#   usage: bench/plan_time.sh [HEXIC]   (default: build-bench/hexic, built Release)
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
. "$root/bench/release_hexic.sh"
ex=$root/examples
one_core=""
command -v taskset >/dev/null 2>&1 && one_core="taskset -c 0"
[ -x /usr/bin/time ] || { echo "plan_time.sh: /usr/bin/time is needed (apt-get install time)" >&2; exit 1; }

# row MODEL CLUSTER BATCH: plans without -o, then twice with it; prints the
# row, appends "cluster devices batch plan_s" to $tmp/rows
row() {
  model=$1 cluster=$2 gb=$3
  sed "s/global_batch = [0-9]*/global_batch = $gb/" "$ex/models/$model.hx" > "$tmp/m.hx"
  devices=$(awk '/gpus *=/{ n = $0; sub(/.*gpus *= */, "", n); sub(/[^0-9].*/, "", n);
                 r = 1; if ($0 ~ /replicas *=/) { r = $0; sub(/.*replicas *= */, "", r); sub(/[^0-9].*/, "", r) }
                 s += n * r } END { print s }' "$ex/clusters/$cluster.hx")
  rm -rf "$tmp/a" "$tmp/b"
  # the least of three runs: on a shared virtual machine one run's CPU time
  # moved by up to 20% from run to run (the work is the same: plans are
  # deterministic), and the least is the one others disturbed least
  for run in 1 2 3; do
    /usr/bin/time -f %U+%S -o "$tmp/cpu" $one_core "$hexic" "$tmp/m.hx" "$ex/clusters/$cluster.hx" \
      >/dev/null 2>&1 || true
    tail -1 "$tmp/cpu" | awk -F+ '{ printf "%.2f\n", $1 + $2 }'
  done > "$tmp/runs"
  cpu=$(sort -g "$tmp/runs" | head -1)
  # plan.json is written even where the rank programs are refused (more
  # than 8M table rows at the largest batches)
  /usr/bin/time -f %U+%S -o "$tmp/cpu" $one_core "$hexic" "$tmp/m.hx" "$ex/clusters/$cluster.hx" \
    -o "$tmp/a" >/dev/null 2>&1 || true
  files=$(tail -1 "$tmp/cpu" | awk -F+ '{ printf "%.2f", $1 + $2 }')
  it=- same=-
  if [ -f "$tmp/a/plan.json" ]; then
    it=$(sed -n 's/.*"iteration_s": *\([0-9.eE+-]*\).*/\1/p' "$tmp/a/plan.json" | head -1)
    it=$(awk -v t="$it" 'BEGIN { printf "%.6g", t }')
    "$hexic" "$tmp/m.hx" "$ex/clusters/$cluster.hx" -o "$tmp/b" >/dev/null 2>&1 || true
    same=no
    cmp -s "$tmp/a/plan.json" "$tmp/b/plan.json" && same=yes
  fi
  printf "%-16s %7s %-12s %9s %9s %9s %14s %6s\n" "$cluster" "$devices" "$model" "$gb" "$cpu" "$files" \
    "$it" "$same"
  echo "$cluster $devices $gb $cpu" >> "$tmp/rows"
}

: > "$tmp/rows"
printf "%-16s %7s %-12s %9s %9s %9s %14s %6s\n" cluster devices model batch "plan s" "-o s" \
  "iteration s" same
for gb in 64 128 2048; do row gpt-neo-2.7b gh200-a100-v100 "$gb"; done
for cl in case-study:llama2-13b hetero-64:llama2-13b large-1024:llama2-70b; do
  for gb in 64 2048 65536 2097152; do row "${cl#*:}" "${cl%%:*}" "$gb"; done
done

awk '
  { key = $1; dev[key] = $2; cpu[key, $3] = $4
    if ($2 <= 64 && $4 > worst) { worst = $4; where = $1 " at batch " $3 } }
  END {
    printf "\ntarget: planning <= 1 s up to 64 GPUs: worst %.2f s (%s): %s\n",
           worst, where, worst <= 1 ? "met" : "not met"
    ok = 1
    for (k in dev) if (dev[k] <= 64 && cpu[k, 64] > 0) {
      r = cpu[k, 2048] / cpu[k, 64]
      printf "target: batch 2048 / batch 64 on %s (%d GPUs): %.2f / %.2f s = %.2fx: %s\n",
             k, dev[k], cpu[k, 2048], cpu[k, 64], r, r <= 1.5 ? "met" : "not met"
      if (r > 1.5) ok = 0
    }
    printf "target: ratio <= 1.5 on every cluster up to 64 GPUs: %s\n", ok ? "met" : "not met"
  }' "$tmp/rows"
