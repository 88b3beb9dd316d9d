#!/bin/sh
# The planner's fit check is plan.json's memory_by_kind (issue 25): every
# used rank's peak_memory_bytes is its memory_by_kind total plus the reserve
# (1.5 GiB), on the exec-suite plans (the shapes tests/exec/run_memory.sh
# measures) for --target=cpu and --target=cuda; and a plan the old, cruder
# check accepted (llama2-7b on the case study with 64 GiB A800s: 57.6 GiB on
# a800:0 by it, 71.7 GiB by memory_by_kind) is refused with the shortfall,
# while the planner picks one that fits.
# usage: fit_check.sh HEXIC SOURCE_DIR WORK_DIR
set -u
hexic=$1 src=$2 work=$3
here=$src/tests/exec
rm -rf "$work" && mkdir -p "$work" || exit 1
fail() { echo "FAIL: $*"; exit 1; }

# same_as_kinds NAME: peak == sum(memory_by_kind) + reserve on every used
# rank, and (unless a --plan was given) within the device's memory
same_as_kinds() {
  python3 - "$work/$1/plan.json" "$2" <<'PY' || fail "$1: the fit check differs from memory_by_kind"
import json, sys
p = json.load(open(sys.argv[1]))
must_fit = sys.argv[2] == "fit"
peak, kinds = p["simulated"]["peak_memory_bytes"], p["memory_by_kind"]
reserve = 1.5 * 2**30
bad = 0
for r, (need, k) in enumerate(zip(peak, kinds)):
    total = sum(k.values())
    if total == 0:
        continue
    if abs(need - (total + reserve)) > 1:
        print(f"  rank {r}: fit check {need} bytes, memory_by_kind {total:.0f} + reserve")
        bad = 1
    if must_fit and need > p["devices"][r]["memory_bytes"]:
        print(f"  rank {r}: needs {need} bytes, has {p['devices'][r]['memory_bytes']}")
        bad = 1
sys.exit(bad)
PY
}

# plan NAME TARGET MODEL CLUSTER [flags]; for cuda a copy of the cluster
# whose GPU types say an architecture (the CPU clusters name none)
plan() {
  name=$1 target=$2 model=$3 cluster=$4
  shift 4
  if [ "$target" = cuda ]; then
    sed 's/^gpu \("[^"]*"\) *{/gpu \1 { cuda_arch = 80;/' "$cluster" >"$work/$name.hx"
    cluster=$work/$name.hx
  fi
  "$hexic" "$model" "$cluster" --target="$target" "$@" -o "$work/$name" >"$work/$name.txt" 2>&1 ||
    { cat "$work/$name.txt"; fail "hexic $name"; }
}

tiny=$src/examples/models/tiny.hx tiny6=$here/models/tiny6.hx tiny8=$here/models/tiny8.hx
seqtiny=$here/models/seqtiny.hx cpu8=$src/examples/clusters/cpu8.hx
sed 's/seed = 1/seed = 1; optimizer_sharding = none/' "$tiny" >"$work/tiny-unsharded.hx"
sed 's/seed = 1/seed = 1; sequence_parallel = false/' "$tiny6" >"$work/tiny6-nosp.hx"
for target in cpu cuda; do
  plan one-$target $target "$tiny" "$src/examples/clusters/cpu1.hx"
  plan dp8-$target $target "$tiny" "$cpu8" --strategy=symmetric
  plan tp2-$target $target "$work/tiny-unsharded.hx" "$here/clusters/mixed4.hx"
  plan tp3tp2-$target $target "$tiny6" "$cpu8" --plan="$here/plans/tp3_tp2_uneven.json"
  plan tp3tp2_nosp-$target $target "$work/tiny6-nosp.hx" "$cpu8" --plan="$here/plans/tp3_tp2_uneven.json"
  plan pp-$target $target "$tiny8" "$here/clusters/four.hx" --plan="$here/plans/tp2_dp_pp_groups.json"
  plan zero1-$target $target "$tiny8" "$here/clusters/four.hx" --plan="$here/plans/zero1_tp2_dp_pp.json"
  plan seq_pa-$target $target "$seqtiny" "$cpu8" --plan="$here/plans/seq_pp_tp_cp_hp.json"
  plan seq_pb-$target $target "$seqtiny" "$here/clusters/four.hx" --plan="$here/plans/seq_dp_hp_uneven.json"
  plan seq_ppcp-$target $target "$seqtiny" "$here/clusters/pp-cp.hx" --strategy=hexiseq
  for n in one dp8 tp2 tp3tp2 tp3tp2_nosp pp zero1 seq_pa seq_pb seq_ppcp; do
    same_as_kinds $n-$target fit
  done
done

# The case study with 64 GiB A800s: the planner's plan fits by memory_by_kind
sed 's/memory = 80 GiB/memory = 64 GiB/' "$src/examples/clusters/case-study.hx" >"$work/cs64.hx"
grep -q "memory = 64 GiB" "$work/cs64.hx" || fail "cannot make the 64 GiB case study"
model=$src/examples/models/llama2-7b.hx
plan cs64 cpu "$model" "$work/cs64.hx"
same_as_kinds cs64 fit
# ... and the plan the old check chose there is refused, naming the device
"$hexic" "$model" "$work/cs64.hx" --plan="$src/tests/cost/plans/llama2-7b-a800-64.json" \
  -o "$work/old" >"$work/old.txt" 2>&1 && fail "the old plan was accepted on 64 GiB A800s"
grep -q "does not fit in memory: needs 7.7 GiB more on a800:0" "$work/old.txt" ||
  { cat "$work/old.txt"; fail "the old plan: wrong message"; }
echo "cost.fit_check: ok"
