#!/usr/bin/env bash
# Pipeline hops as the simulator charges them, and the runtime trace (issue
# 25, item 4): PP 2, and PP 3 with uneven stages and TP 2 on the first, run
# with HEXIC_TRACE=FILE; each must print the single-rank run's losses within
# 1e-5 and end with its weights within 1e-5 (receives now land in buffers of
# their own, posted ahead), and its trace (trace_check.py) must be in
# trace.json's format with every receive but a step's first posted before
# the compute op before it ended. A hexic-compiled PP plan's trace holds only
# kinds of events its simulated trace.json holds; a FILE that exists is
# refused before step 1 and left as it was.
#   run_trace.sh WORKDIR SRCDIR HEXIC FIXTURE WEIGHTS_CMP
set -uo pipefail
work=$1 src=$2 hexic=$3 fixture=$4 wcmp=$5
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
export HEXIC_TIMEOUT_S=${HEXIC_TIMEOUT_S:-20}
here=$src/tests/exec
steps=3
mkdir -p "$work"
cd "$work" || exit 1

fail() { echo "FAIL: $*" >&2; exit 1; }

# build DIR: make, the runtime library built once and copied
. "$here/build_lib.sh"

# run DIR: $steps steps traced into DIR.trace.json; "STEP LOSS" lines into
# DIR.losses, weights into DIR.w.
run() {
  local dir=$1
  rm -f "$dir.trace.json"
  HEXIC_TRACE=$PWD/$dir.trace.json "$dir/launch.sh" --steps $steps --dump-weights "$PWD/$dir.w" \
    >"$dir.out" 2>&1 || { cat "$dir.out"; fail "$dir did not train"; }
  sed -n 's/^step \([0-9]*\)\/[0-9]* | loss \([0-9.]*\) .*/\1 \2/p' "$dir.out" >"$dir.losses"
  [ "$(wc -l <"$dir.losses")" -eq $steps ] || fail "$dir printed $(wc -l <"$dir.losses") step lines"
  [ -s "$dir.trace.json" ] || fail "$dir wrote no trace to HEXIC_TRACE=$PWD/$dir.trace.json"
}

fixture one "8x1@4"
fixture pp2 "2x4@2,4"
same one pp2 "PP 2 (2x4@2,4)"
python3 "$here/trace_check.py" pp2.trace.json 2 $steps || fail "pp2's trace"
fixture pp3 "2x4@1:2,2,4"
same one pp3 "PP 3, uneven, TP 2 on the first stage (2x4@1:2,2,4)"
python3 "$here/trace_check.py" pp3.trace.json 4 $steps || fail "pp3's trace"

# hexic's own PP plan: the measured kinds are the simulated trace.json's
rm -rf hx
"$hexic" "$here/models/tiny8.hx" "$here/clusters/four.hx" --plan="$here/plans/tp2_dp_pp_groups.json" \
  --target=cpu -o hx >hx.plan.txt || fail "hexic --plan=tp2_dp_pp_groups.json"
[ -s hx/trace.json ] || fail "hexic wrote no trace.json into hx"
build hx
run hx
python3 "$here/trace_check.py" hx.trace.json 4 $steps hx/trace.json || fail "hx's trace"

# a FILE that exists is the user's: refused before step 1, left as it was
echo "mine" >taken.json
out=$(HEXIC_TRACE=$PWD/taken.json pp2/launch.sh --steps 1 2>&1) && fail "an existing HEXIC_TRACE file was accepted"
grep -q "HEXIC_TRACE='$PWD/taken.json' exists: the runtime trace does not write over a file" <<<"$out" ||
  fail "wrong message: $out"
grep -q "^step 1/" <<<"$out" && fail "the existing HEXIC_TRACE file was found only after step 1"
[ "$(cat taken.json)" = mine ] || fail "the existing HEXIC_TRACE file was changed"
echo "  an existing HEXIC_TRACE file: refused, left as it was"
