#!/usr/bin/env bash
# Memory by kind (issue 25, item 1): every exec-suite plan shape (one rank,
# DP even and uneven, TP 2 and uneven TP 3 x TP 2 with sequence parallelism
# and without, PP with DP, full and no recompute, ZeRO-1) trains 2 steps with --memory-report;
# each rank's measured peak of each kind (rtlib/rt_backend.h) must be within
# 5% of what plan.json's memory_by_kind predicts (passes/cost/cost_memory.c),
# or within 256 bytes where the plan predicts (almost) nothing: the runtime
# allocates one float for an empty buffer. A miss names the plan, the rank
# and the kind, with both figures (memory_cmp.py, which
# tests/rtlib/emulate_backend.sh's memory part shares for the CUDA backend).
#   run_memory.sh WORKDIR SRCDIR HEXIC [NAME...]   (names: only those plans)
set -uo pipefail
work=$1 src=$2 hexic=$3
shift 3
only=" $* "
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
export HEXIC_TIMEOUT_S=${HEXIC_TIMEOUT_S:-20}
here=$src/tests/exec
tiny=$src/examples/models/tiny.hx tiny6=$here/models/tiny6.hx tiny8=$here/models/tiny8.hx
cpu1=$src/examples/clusters/cpu1.hx cpu8=$src/examples/clusters/cpu8.hx
mkdir -p "$work"
cd "$work" || exit 1

fail() { echo "FAIL: $*" >&2; exit 1; }

. "$src/tests/exec/build_lib.sh"

# check NAME MODEL CLUSTER [hexic flags]: compile, train 2 steps, compare.
check() {
  local name=$1
  shift
  [ "$only" = "  " ] || [[ $only == *" $name "* ]] || return 0
  rm -rf "$name" "$name.mem.json"
  "$hexic" "$@" --target=cpu -o "$name" >"$name.plan.txt" || fail "hexic $*"
  build "$name"
  "$name/launch.sh" --steps 2 --memory-report "$PWD/$name.mem.json" >"$name.out" 2>&1 ||
    { cat "$name.out"; fail "$name did not train"; }
  grep -q "^hexic: rank 0 peak MiB: weights" "$name.out" || fail "$name: no memory line for rank 0"
  python3 "$here/memory_cmp.py" "$name" "$name/plan.json" "$name.mem.json" ||
    fail "$name: measured memory differs from the plan's"
}

sed 's/seed = 1/seed = 1; optimizer_sharding = none/' "$tiny" >tiny-unsharded.hx
sed 's/"recompute": false/"recompute": true/' "$here/plans/tp2_dp_pp_groups.json" >recompute.json
grep -q '"recompute": true' recompute.json || fail "cannot turn recompute on in tp2_dp_pp_groups.json"
sed 's/seed = 1/seed = 1; recompute = full/' "$tiny8" >tiny8-recompute.hx
sed 's/seed = 1/seed = 1; sequence_parallel = false/' "$tiny6" >tiny6-nosp.hx
grep -q "recompute = full" tiny8-recompute.hx || fail "cannot turn tiny8's recompute on"

# one rank; DP over 8 (hexic's plan, ZeRO-1 as tiny asks); hexic's TP 2
# stage inside PP on mixed4 (unsharded); TP 3 and TP 2 with uneven ffn
# columns, full recompute on some stages and none on others; TP 2 beside a
# two-stage pipeline of another micro-batch size (uneven DP), without and
# with full recompute; the same under ZeRO-1 with uneven shards.
check one "$tiny" "$cpu1"
check dp8 "$tiny" "$cpu8" --strategy=symmetric
check tp2 "$PWD/tiny-unsharded.hx" "$here/clusters/mixed4.hx"
check tp3tp2 "$tiny6" "$cpu8" --plan="$here/plans/tp3_tp2_uneven.json"
check tp3tp2_nosp "$PWD/tiny6-nosp.hx" "$cpu8" --plan="$here/plans/tp3_tp2_uneven.json"
check pp "$tiny8" "$here/clusters/four.hx" --plan="$here/plans/tp2_dp_pp_groups.json"
check recompute "$PWD/tiny8-recompute.hx" "$here/clusters/four.hx" --plan="$PWD/recompute.json"
check zero1 "$tiny8" "$here/clusters/four.hx" --plan="$here/plans/zero1_tp2_dp_pp.json"
# HexiSeq (CP x HP) stages, as run_exec.sh's seq mode trains them: PP x TP
# x CP x HP with micro-batches of 2 sequences (a leader of TP rank 1), the
# same HexiSeq stage feeding a plain TP 2 stage, an HP-only stage with
# uneven heads and recompute beside a one-rank pipeline, and hexic's PP x
# CP plan whose two rings cut the sequence differently.
seqtiny=$here/models/seqtiny.hx
check seq_pa "$seqtiny" "$cpu8" --plan="$here/plans/seq_pp_tp_cp_hp.json"
check seq_pm "$seqtiny" "$cpu8" --plan="$here/plans/seq_pp_mixed.json"
check seq_pb "$seqtiny" "$here/clusters/four.hx" --plan="$here/plans/seq_dp_hp_uneven.json"
check seq_ppcp "$seqtiny" "$here/clusters/pp-cp.hx" --strategy=hexiseq
# The report never replaces a file, and an unwritable folder is said before
# step 1 (it was found only after the whole run, and a file was replaced).
if [ "$only" = "  " ] || [[ $only == *" one "* ]]; then
  cp one.mem.json kept.json
  one/launch.sh --steps 2 --memory-report "$PWD/one.mem.json" >again.out 2>&1 &&
    fail "--memory-report wrote over an existing file"
  grep -q "one.mem.json' exists: the report does not write over a file" again.out ||
    { cat again.out; fail "--memory-report over a file: wrong message"; }
  cmp -s kept.json one.mem.json || fail "--memory-report changed an existing file"
  one/launch.sh --steps 2 --memory-report "$PWD/no-such-folder/m.json" >nodir.out 2>&1 &&
    fail "--memory-report into a missing folder succeeded"
  grep -q "cannot write into $PWD/no-such-folder" nodir.out || { cat nodir.out; fail "missing folder: wrong message"; }
  ! grep -q "^step 1/" again.out nodir.out || fail "--memory-report was refused only after training"
fi
echo "exec.memory: ok"
