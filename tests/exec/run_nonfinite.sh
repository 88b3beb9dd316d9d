#!/usr/bin/env bash
# A run that goes non-finite stops (issue 24, item 6): the tiny model with the
# largest learning rate a .hx allows and no warm-up grows its weights until
# the forward overflows and the loss is NaN (step 6 here: it trained on to
# "loss nan" with exit 0). Every plan must stop at that step, before its
# update: one line names the step, the rank and the tensor (lm_head: the loss
# is NaN, so the first gradient the backward makes is), every rank exits 1 by
# itself (no hang in a collective: mpirun is told not to end the others when
# one exits non-zero), and neither that step's checkpoint nor the weight dump
# is written, the step before's checkpoint is there. Plans: one rank, DP 2,
# TP 2, PP 2 (the first stage never sees the loss), DP 2 with ZeRO-1, and a
# HexiSeq CP ring of 3; launch.sh exits 1.
#   run_nonfinite.sh WORKDIR SRCDIR HEXIC
set -uo pipefail
work=$1 src=$2 hexic=$3
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
export HEXIC_TIMEOUT_S=10
plans=$src/tests/codegen/plans
mkdir -p "$work"
cd "$work" || exit 1
rm -rf ./*

fail() { echo "FAIL: $*" >&2; exit 1; }

. "$src/tests/exec/build_lib.sh"

# blow NAME MODEL: MODEL with lr = 1e3 (sema's bound) and no warm-up.
blow() {
  sed -e 's/lr = 1e-3; warmup_steps = [0-9]*/lr = 1e3; warmup_steps = 0/' "$2" >"$1.hx"
  grep -q "lr = 1e3; warmup_steps = 0" "$1.hx" || fail "cannot raise $2's learning rate"
}
blow tiny "$src/examples/models/tiny.hx"
blow seqtiny "$src/tests/exec/models/seqtiny.hx"

# compile DIR MODEL CLUSTER [ARGS]: hexic --target=cpu -o DIR, built.
compile() {
  local dir=$1
  shift
  "$hexic" "$@" --target=cpu -o "$dir" >"$dir.plan.txt" || fail "hexic $*"
  build "$dir"
}

# stop DIR: 8 steps with a checkpoint every step and a weight dump, every
# rank started as launch.sh does but through a wrapper that records its own
# exit status. Sets step, rank and tensor from the one error line.
stop() {
  local dir=$1 app=() p r line status
  mkdir -p "$dir.status"
  for p in "$dir"/rank_[0-9]*[0-9]; do
    app+=(${app[@]:+:} -np 1 bash -c '"$0" "$@"; echo $? >"$STATUS/${0##*/}"' "$PWD/$p"
      --steps 8 --checkpoint-dir "$dir.ck" --checkpoint-every 1 --dump-weights "$dir.w")
  done
  STATUS=$PWD/$dir.status OMPI_MCA_orte_abort_on_non_zero_status=0 timeout 120 \
    mpirun -x STATUS "${app[@]}" >"$dir.log" 2>&1
  [ $? -ne 124 ] || { cat "$dir.log"; fail "$dir: the job still ran after 120 s"; }
  for p in "$dir"/rank_[0-9]*[0-9]; do
    status=$(cat "$dir.status/${p##*/}" 2>/dev/null)
    [ "$status" = 1 ] || { cat "$dir.log"; fail "$dir: ${p##*/} exited with '$status', not 1"; }
  done
  grep -q "does not answer" "$dir.log" && { cat "$dir.log"; fail "$dir: a rank waited on another"; }
  line=$(grep "error: step [0-9]*: the gradient of .* is not finite" "$dir.log")
  [ "$(grep -c . <<<"$line")" = 1 ] || { cat "$dir.log"; fail "$dir: want one error line"; }
  read -r rank step tensor < <(sed 's/^hexic-rt: rank \([0-9]*\): error: step \([0-9]*\): the gradient of \([^ ]*\) is not finite (.*); the loss is [-a-z]* and the gradient norm [-a-z0-9.e+]*: training stops before the step.s update, and no checkpoint of step \2 is written$/\1 \2 \3/' <<<"$line")
  [[ $rank =~ ^[0-9]+$ && $step =~ ^[0-9]+$ && $step -ge 2 ]] ||
    fail "$dir: unexpected error line: $line"
  grep -q "^step $((step - 1))/8 " "$dir.log" && ! grep -q "^step $step/8 " "$dir.log" ||
    { cat "$dir.log"; fail "$dir: the step lines do not end at step $((step - 1))"; }
  [ -f "$dir.ck/$(printf 'step_%08d' $((step - 1)))/MANIFEST" ] ||
    { ls -R "$dir.ck"; fail "$dir: no checkpoint of step $((step - 1))"; }
  [ -z "$(find "$dir.ck" -name "$(printf 'step_%08d*' "$step")")" ] ||
    { ls -R "$dir.ck"; fail "$dir: a checkpoint of the non-finite step $step was written"; }
  [ ! -e "$dir.w" ] || fail "$dir: weights were dumped after a non-finite step"
}

# expect DIR RANK WHAT: stopped at the one-rank run's step and tensor, named by RANK.
expect() {
  local dir=$1 want=$2
  stop "$dir"
  [ "$step $tensor" = "$step1 $tensor1" ] && [ "$rank" = "$want" ] ||
    fail "$dir: stopped at step $step naming $tensor on rank $rank; want step $step1, $tensor1, rank $want"
  echo "  $3: every rank exits 1 at step $step, rank $rank names $tensor, no step-$step checkpoint"
}

compile one tiny.hx "$src/examples/clusters/cpu1.hx"
stop one
step1=$step tensor1=$tensor
[ "$tensor" = lm_head ] && [ "$rank" = 0 ] || fail "one rank named $tensor on rank $rank, not lm_head on 0"
echo "  one rank: exit 1 at step $step naming $tensor, no step-$step checkpoint"
for p in dp2 tp2 pp2 dp2z; do
  compile $p tiny.hx "$src/examples/clusters/cpu8.hx" --plan="$plans/tiny_$p.json"
done
expect dp2 0 "DP 2"
expect tp2 0 "TP 2"
expect pp2 1 "PP 2 (lm_head on the last stage)"
expect dp2z 0 "DP 2, ZeRO-1"
grep -q '_shards\[\] = {' dp2z/rank_0000.c || fail "the ZeRO-1 plan has no shards"

# launch.sh itself (mpirun ends the job at the first exit 1): status 1.
pp2/launch.sh --steps 8 >launch.log 2>&1
status=$?
[ $status = 1 ] && grep -q "rank 1: error: step $step1: the gradient of lm_head" launch.log ||
  { cat launch.log; fail "pp2/launch.sh exited $status"; }
echo "  launch.sh: exit 1"

# HexiSeq: a CP ring of 3 against its own one-rank run.
compile sone seqtiny.hx "$src/examples/clusters/cpu1.hx"
stop sone
step1=$step tensor1=$tensor
compile tri seqtiny.hx "$src/tests/exec/clusters/tri.hx" --strategy=hexiseq
grep -q '"cp": 3' tri/plan.json || fail "tri.hx should give a CP ring of 3"
expect tri 0 "HexiSeq CP 3"

echo "exec.nonfinite: ok"
