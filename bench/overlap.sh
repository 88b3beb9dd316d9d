#!/usr/bin/env bash
# Gradient sync overlapped with the backward (issue 13), measured on CPU
# ranks: a data-parallel plan of two one-rank pipelines whose gradient sync
# crosses an emulated slow link (launch.sh --emulate: every all-reduce takes
# at least a ring all-reduce's time over the link), trained STEPS steps with
# the overlapped sync (the default) and with HEXIC_SYNC_OVERLAP=0 (every
# bucket at GRAD_SYNC), once for each link of LINKS (MB/s; latency 50 us).
# Prints per link the median step of each (steps 4 to STEPS) and their
# ratio. Figures are printed, nothing is asserted.
#   usage: bench/overlap.sh    env: STEPS (default 10), LINKS (default
#          "10000 200 50": fast, close to the backward's time, slow),
#          BUILD (default build-bench: a Release build of hexic)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD:-$root/build-bench}
steps=${STEPS:-10} links=${LINKS:-10000 200 50}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
export OPENBLAS_NUM_THREADS=1
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DHEXIC_TESTS=OFF >/dev/null
cmake --build "$build" -j2 --target hexic >/dev/null
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# bench/measured.sh's model with a batch of 16: the gradient sync's bytes
# against a backward short enough for the links below to matter
model=$work/model.hx
sed 's/global_batch = [0-9]*/global_batch = 16/' "$root/bench/measured-model.hx" >"$model"
grep -q 'global_batch = 16' "$model"

# DP 2: each pipeline all 8 layers of the model on one rank, 8 sequences
cat >"$work/dp2.json" <<'EOF'
{"strategy": "file", "description": "DP 2 over one link", "schedule": "1f1b", "pipelines": [
  {"micro_batches": 4, "micro_batch_size": 2, "stages": [
    {"ranks": [0], "tp": 1, "layers": [0, 8], "leader": 0, "recompute": false}]},
  {"micro_batches": 4, "micro_batch_size": 2, "stages": [
    {"ranks": [1], "tp": 1, "layers": [0, 8], "leader": 1, "recompute": false}]}]}
EOF

# median_ms FILE: the median step time of steps 4.. in a launch.sh log (the
# first 3 of an --emulate run calibrate: rtlib/rt_emulate.c)
median_ms() {
  sed -n 's/^step \([0-9]*\)\/[0-9]* | .* | \([0-9.]*\) ms .*/\1 \2/p' "$1" |
    awk '$1 >= 4 { print $2 }' | sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'
}

lib=
printf '%-12s %-14s %-14s %s\n' "link MB/s" "overlapped ms" "blocking ms" "blocking / overlapped"
for bw in $links; do
  cat >"$work/two-$bw.hx" <<HX
gpu "cpu" { tflops = 0.05; memory = 2 GiB; efficiency = 1 }
node "a" { gpu = "cpu"; gpus = 1 }
node "b" { gpu = "cpu"; gpus = 1 }
network { bandwidth = $bw MB/s; latency = 50 us }
HX
  dir=$work/p$bw
  "$build/hexic" "$model" "$work/two-$bw.hx" --plan="$work/dp2.json" -o "$dir" >/dev/null
  [ -z "$lib" ] || cp -rp "$lib"/obj "$lib"/libhexic.a "$dir"/
  make -s -C "$dir" -j2 >/dev/null
  lib=${lib:-$dir}
  "$dir/launch.sh" --emulate --steps "$steps" >"$dir.overlap.log" 2>&1
  HEXIC_SYNC_OVERLAP=0 "$dir/launch.sh" --emulate --steps "$steps" >"$dir.blocking.log" 2>&1
  on=$(median_ms "$dir.overlap.log") off=$(median_ms "$dir.blocking.log")
  printf '%-12s %-14s %-14s %s\n' "$bw" "$on" "$off" "$(awk -v a="$off" -v b="$on" 'BEGIN { printf "%.2f", a / b }')"
done
