#!/usr/bin/env bash
# Pipeline hops as the simulator charges them, and the runtime trace (issue
# 25, item 4): PP 2, PP 3 with uneven stages and TP 2 on the first, and a
# HexiSeq pipeline (its stage leaders gather and scatter the hops), run
# with HEXIC_TRACE=FILE; each must print the single-rank run's losses within
# 1e-5 and end with its weights within 1e-5 (receives now land in buffers of
# their own, posted ahead), and its trace (trace_check.py) must be in
# trace.json's format with every receive but a step's first posted before
# the compute op before it ended. A hexic-compiled PP plan's trace holds only
# kinds of events its simulated trace.json holds, and under --emulate its
# all-reduces and receives record their completions at link speed and its
# compute ops their compute at the device's speed; a FILE
# that exists is refused before step 1 and left as it was.
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

# HexiSeq stages (seq_pp_tp_cp_hp.json: PP x TP x CP x HP, leaders of TP
# rank 1 and rank 6): their leaders post the hop's receive ahead too, into
# the whole activation they scatter to the units
rm -rf seq1 seqpp
"$hexic" "$here/models/seqtiny.hx" "$src/examples/clusters/cpu1.hx" --target=cpu -o seq1 >seq1.plan.txt ||
  fail "hexic seqtiny on cpu1"
build seq1
run seq1
"$hexic" "$here/models/seqtiny.hx" "$src/examples/clusters/cpu8.hx" --plan="$here/plans/seq_pp_tp_cp_hp.json" \
  --target=cpu -o seqpp >seqpp.plan.txt || fail "hexic --plan=seq_pp_tp_cp_hp.json"
build seqpp
run seqpp
same seq1 seqpp "HexiSeq PP x TP x CP x HP (seq_pp_tp_cp_hp.json)"
# (its scatter to the units is traced as a broadcast, which the simulator
# leaves inside the hop: no comparison of kinds)
python3 "$here/trace_check.py" seqpp.trace.json 8 $steps || fail "seqpp's trace"

# hexic's own PP plan: the measured kinds are the simulated trace.json's
rm -rf hx
"$hexic" "$here/models/tiny8.hx" "$here/clusters/four.hx" --plan="$here/plans/tp2_dp_pp_groups.json" \
  --target=cpu -o hx >hx.plan.txt || fail "hexic --plan=tp2_dp_pp_groups.json"
[ -s hx/trace.json ] || fail "hexic wrote no trace.json into hx"
build hx
run hx
python3 "$here/trace_check.py" hx.trace.json 4 $steps hx/trace.json || fail "hx's trace"
# under --emulate the ranks share one clock: a gradient all-reduce's members
# agree on one completion, after the last of them arrived, and a receive
# records its data's arrival (what bench/measured.sh compares with the
# simulator)
rm -f hx-emu.trace.json
HEXIC_TRACE=$PWD/hx-emu.trace.json hx/launch.sh --steps $steps --emulate >hx-emu.out 2>&1 ||
  { cat hx-emu.out; fail "hx did not train under --emulate"; }
python3 "$here/trace_check.py" hx-emu.trace.json 4 $steps --emulated --compute-line=hx-emu.out ||
  fail "hx's emulated trace"

# a FILE that exists is the user's: refused before step 1, left as it was
echo "mine" >taken.json
out=$(HEXIC_TRACE=$PWD/taken.json pp2/launch.sh --steps 1 2>&1) && fail "an existing HEXIC_TRACE file was accepted"
grep -q "HEXIC_TRACE='$PWD/taken.json' exists: the runtime trace does not write over a file" <<<"$out" ||
  fail "wrong message: $out"
grep -q "^step 1/" <<<"$out" && fail "the existing HEXIC_TRACE file was found only after step 1"
[ "$(cat taken.json)" = mine ] || fail "the existing HEXIC_TRACE file was changed"
echo "  an existing HEXIC_TRACE file: refused, left as it was"
