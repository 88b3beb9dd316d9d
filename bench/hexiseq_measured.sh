#!/usr/bin/env bash
# HexiSeq measured, not only simulated (issue 14, "Targets"): a context-
# parallel plan of examples/models/tiny-long.hx (2048-token sequences) on CPU
# ranks of this machine, compiled, built and trained as real programs. Prints
#   - the simulated step (plan.json) against the measured one (median of the
#     steps after the first two) on a cluster calibrated by hexic-profile;
#   - every rank's tokens of a sequence and its peak resident memory (VmHWM),
#     with a least-squares line through them: the memory a rank needs grows
#     with its tokens, not with the sequence (the one-rank run is printed too).
# Figures are printed, nothing is asserted.
#   1. calibration: hexic-profile under mpirun -np 2 at the model's shapes;
#   2. the cluster: RANKS (2) devices at the measured speed, links at the
#      measured MPI figures; --strategy=hexiseq splits each sequence over them;
#   3. the HexiSeq plan and the one-rank plan, STEPS (10) steps each.
#   usage: bench/hexiseq_measured.sh   env: STEPS, RANKS, BUILD (default
#          build-bench: a Release build of hexic and hexic-profile)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD:-$root/build-bench}
steps=${STEPS:-10} nranks=${RANKS:-2}
model=$root/examples/models/tiny-long.hx
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DHEXIC_TESTS=OFF >/dev/null
cmake --build "$build" -j2 --target hexic hexic-profile >/dev/null
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

field() { sed -n "s/.*\\b$1 = \\([0-9]*\\).*/\\1/p" "$model" | head -n 1; }
hidden=$(field hidden) ffn=$(field ffn) heads=$(field heads) seq=$(field seq_len)
mpirun -np 2 "$build/hexic-profile" --hidden "$hidden" --ffn "$ffn" --heads "$heads" \
  --tokens "$((seq / nranks))" --gpus 2 --name cpu -o "$work/profile.hx" 2>"$work/profile.log"
echo "== calibration (hexic-profile, mpirun -np 2, $((seq / nranks))-token GEMMs)"
cat "$work/profile.log"
. "$root/bench/measure_lib.sh"
profile_figures "$work/profile.hx"
cat >"$work/cluster.hx" <<HX
gpu "cpu" { tflops = $tflops; memory = 2 GiB; efficiency = $eff; mem_bandwidth = $membw MB/s }
node "host" { gpu = "cpu"; gpus = $nranks; bandwidth = $netbw MB/s; latency = $netlat us }
HX
cat >"$work/one.hx" <<HX
gpu "cpu" { tflops = $tflops; memory = 8 GiB; efficiency = $eff; mem_bandwidth = $membw MB/s }
node "host" { gpu = "cpu"; gpus = 1; bandwidth = $netbw MB/s; latency = $netlat us }
HX

# peak NAME: while NAME's ranks run, keep each one's VmHWM (KiB) in NAME.hwm.RANK
peak() {
  local dir=$work/$1 any p e v
  for _ in $(seq 36000); do
    any=
    for p in $(pgrep -f "rank_" || true); do
      e=$(readlink "/proc/$p/exe" 2>/dev/null || true)
      case "$e" in "$dir"/rank_*)
        any=1
        v=$(awk '/VmHWM/ { print $2 }' "/proc/$p/status" 2>/dev/null || true)
        [ -n "$v" ] && echo "$v" >"$dir.hwm.$(basename "$e")" ;;
      esac
    done
    [ -z "$any" ] && [ -e "$dir.done" ] && return
    sleep 0.1
  done
}

# run NAME CLUSTER [hexic options]: compile, build, train; prints "simulated measured" seconds
run() {
  local name=$1 cluster=$2 dir=$work/$1
  shift 2
  "$build/hexic" "$model" "$cluster" "$@" -o "$dir" >"$dir.plan.txt"
  build_plan "$dir"
  peak "$name" &
  local poller=$!
  "$dir/launch.sh" --steps "$steps" >"$dir.out" 2>&1 || { cat "$dir.out"; exit 1; }
  touch "$dir.done"
  wait "$poller"
  sim_and_median "$dir" "$dir.out"
}


# memory NAME: per rank its tokens of a sequence and peak memory, then the line
memory() {
  python3 - "$work/$1" <<'PY'
import glob, json, sys
base = sys.argv[1]
plan = json.load(open(base + "/plan.json"))
xs, ys = [], []
for d in plan["devices"]:
    if d["pipeline"] < 0:
        continue
    tokens = sum(e - b for b, e in d["seq"]) if d["seq"] else plan["model"]["seq_len"]
    try:
        kib = int(open("%s.hwm.rank_%04d" % (base, d["rank"])).read())
    except OSError:
        continue
    xs.append(tokens), ys.append(kib / 1024)
    print("  rank %d: %5d tokens of each sequence, peak memory %6.1f MiB" % (d["rank"], tokens, kib / 1024))
if len(set(xs)) > 1:
    n = len(xs); mx = sum(xs) / n; my = sum(ys) / n
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)
    print("  line: %.1f MiB + %.1f KiB per token" % (my - slope * mx, slope * 1024))
PY
}

s=$(run hexiseq "$work/cluster.hx" --strategy=hexiseq)
report hexiseq "$s" "$(head -n 1 "$work/hexiseq.plan.txt")"
memory hexiseq
o=$(run one "$work/one.hx")
report one "$o" "$(head -n 1 "$work/one.plan.txt")"
memory one
