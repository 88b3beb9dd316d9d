#!/usr/bin/env bash
# Evaluation and metrics of the generated rank programs (issue 27, items 3
# and 4; docs/evaluation.md).
#   run_eval.sh MODE WORKDIR SRCDIR HEXIC FIXTURE
# MODE loss: --eval-only of the initial weights on K = 1 batch prints the
#   first training step's loss, on TP + PP + uneven DP with recompute, with
#   and without sequence parallelism, under ZeRO-1, and on a HexiSeq plan
#   (PP x TP x CP x HP); K = 2
#   batches of --val-data equal one rank's; --val-every leaves the training
#   losses as they are and prints its lines after the right steps.
# MODE options: the last step's checkpoint with --checkpoint-dir alone, steps
#   4, 8 and 10 of --checkpoint-every 4 --steps 10, --resume from step 8
#   trains steps 9 and 10 as the whole run did, --eval-only after --resume
#   prints the resumed weights' loss (the run's last validation), writes no
#   checkpoint; --metrics' JSON lines, its refusal of an existing file and
#   --metrics-append; the plot script; bad values refused on every rank.
set -uo pipefail
mode=$1 work=$2 src=$3 hexic=$4 fixture=$5
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
export HEXIC_TIMEOUT_S=${HEXIC_TIMEOUT_S:-20}
here=$src/tests/exec
rm -rf "$work" && mkdir -p "$work" # a fresh folder: no checkpoint or metrics file of an earlier run
cd "$work" || exit 1

fail() { echo "FAIL: $*" >&2; exit 1; }
. "$here/build_lib.sh"

# An llm.c shard of 20000 tokens below 256 (the test models' vocab), the
# validation stream.
python3 -c 'import random, struct; r = random.Random(7); n = 20000
open("val.bin", "wb").write(struct.pack("<256i", 20240520, 1, n, *[0] * 253) +
                            struct.pack("<%dH" % n, *(r.randrange(256) for _ in range(n))))' ||
  fail "cannot write val.bin"

# launch NAME DIR ARGS...: DIR/launch.sh ARGS, which must exit 0; NAME.log.
launch() {
  local name=$1 dir=$2
  shift 2
  timeout 120 "$dir/launch.sh" "$@" >"$name.log" 2>&1
  local status=$?
  [ $status -eq 0 ] || { cat "$name.log"; fail "$name: exit $status"; }
}
# step_losses NAME: "STEP LOSS" of NAME.log's step lines.
step_losses() { sed -n 's/^step \([0-9]*\)\/[0-9]* | loss \([0-9.]*\) .*/\1 \2/p' "$1.log"; }
# val_lines NAME: "STEP LOSS" of NAME.log's validation lines.
val_lines() {
  sed -n 's/^val step \([0-9]*\)\/[0-9]* | loss \([0-9.e+-]*\) | batches [0-9]* | tokens [0-9]*$/\1 \2/p' "$1.log"
}
# near A B TOL: |A - B| <= TOL.
near() { awk -v a="$1" -v b="$2" -v t="$3" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d <= t) }'; }

# eval_matches_step1 DIR WHAT: --eval-only with K = 1 prints step 1's loss.
eval_matches_step1() {
  local dir=$1 what=$2 step1 val
  launch "$dir.train" "$dir" --steps 2
  step1=$(step_losses "$dir.train" | awk '$1 == 1 { print $2 }')
  launch "$dir.eval1" "$dir" --steps 2 --eval-only --val-batches 1
  [ "$(val_lines "$dir.eval1" | wc -l)" -eq 1 ] || { cat "$dir.eval1.log"; fail "$what: not one val line"; }
  grep -q "^val step 0/2 | loss [0-9.]* | batches 1 | tokens $3\$" "$dir.eval1.log" ||
    { cat "$dir.eval1.log"; fail "$what: the val line is not 'val step 0/2 | loss X | batches 1 | tokens $3'"; }
  ! grep -q "^step " "$dir.eval1.log" || fail "$what: --eval-only trained"
  val=$(val_lines "$dir.eval1" | awk '{ print $2 }')
  near "$val" "$step1" 1e-5 || fail "$what: --eval-only loss $val, step 1 printed $step1"
  echo "  $what: --eval-only $val, step 1 $step1"
}

# same_val REF DIR WHAT: --eval-only on 2 batches of val.bin within 1e-5.
same_val() {
  local ref=$1 dir=$2 what=$3 a b
  launch "$ref.eval2" "$ref" --steps 2 --eval-only --val-data val.bin --val-batches 2
  launch "$dir.eval2" "$dir" --steps 2 --eval-only --val-data val.bin --val-batches 2
  a=$(val_lines "$ref.eval2" | awk '{ print $2 }')
  b=$(val_lines "$dir.eval2" | awk '{ print $2 }')
  [ -n "$a" ] && [ -n "$b" ] || fail "$what: no val line"
  near "$a" "$b" 1e-5 || fail "$what: validation loss $b, one rank's $a"
  echo "  $what: 2 batches of val.bin $b, one rank $a"
}

# val_every DIR STEPS EVERY WANT WHAT: --val-every EVERY prints its lines
# after the steps WANT and leaves the step losses as without it.
val_every() {
  local dir=$1 steps=$2 every=$3 want=$4 what=$5 got
  launch "$dir.plain" "$dir" --steps "$steps"
  launch "$dir.val" "$dir" --steps "$steps" --val-data val.bin --val-every "$every" --val-batches 2
  step_losses "$dir.plain" >"$dir.plain.losses"
  step_losses "$dir.val" >"$dir.val.losses"
  [ "$(wc -l <"$dir.plain.losses")" -eq "$steps" ] || fail "$what: not $steps step lines"
  cmp -s "$dir.plain.losses" "$dir.val.losses" ||
    { paste "$dir.plain.losses" "$dir.val.losses"; fail "$what: --val-every changed the training losses"; }
  got=$(val_lines "$dir.val" | awk '{ printf "%s%s", sep, $1; sep = " " }')
  [ "$got" = "$want" ] || { cat "$dir.val.log"; fail "$what: val lines after steps '$got', want '$want'"; }
  # each after its step's line, before the next
  awk -v every="$every" '/^step / { split($2, s, "/"); last = s[1] }
       /^val step / { split($3, v, "/"); if (v[1] != last) bad = 1 }
       END { exit bad }' "$dir.val.log" || { cat "$dir.val.log"; fail "$what: a val line out of place"; }
  echo "  $what: $steps step losses unchanged by --val-every $every; val after steps $got"
}

case "$mode" in
loss)
  # One rank of tiny (global batch 8 x 64), and 8 ranks: a pipeline of 6
  # sequences (stages TP 2 with recompute, 1 rank, TP 3 led by its last
  # rank) beside one of 2 sequences on a TP 2 stage; sequence parallel.
  "$fixture" one "8x1@4" >/dev/null || fail "emit_fixture one"
  build one
  "$fixture" t "3x2@2:2r,3,4:3l;2x1@4:2" >/dev/null || fail "emit_fixture t"
  build t
  grep -q "^    .sequence_parallel = true," t/rank_0000.c || fail "t: sequence parallelism is off"
  eval_matches_step1 one "one rank" 512
  eval_matches_step1 t "TP + PP + uneven DP" 512
  same_val one t "TP + PP + uneven DP"
  val_every t 5 2 "2 4 5" "TP + PP + uneven DP"
  # the same shape without sequence parallelism (the TP all-reduces)
  "$fixture" tnosp "3x2@2:2r,3,4:3l;2x1@4:2" --no-sp >/dev/null || fail "emit_fixture tnosp"
  build tnosp
  eval_matches_step1 tnosp "TP + PP + uneven DP without SP" 512
  # ZeRO-1 with uneven shards, SP over 31 uneven rows (weights all-gathered
  # after each step: the validation reads them)
  "$hexic" "$here/models/tiny12odd.hx" "$src/examples/clusters/cpu8.hx" \
    --plan="$here/plans/sp_tp4_tp3_zero1.json" --target=cpu -o spz >/dev/null || fail "hexic spz"
  build spz
  eval_matches_step1 spz "ZeRO-1 + SP TP 4 / TP 3" 155
  val_every spz 3 1 "1 2 3" "ZeRO-1 + SP TP 4 / TP 3"
  # HexiSeq: PP x TP x CP x HP with uneven tokens and heads, against one rank
  "$hexic" "$here/models/seqtiny.hx" "$src/examples/clusters/cpu1.hx" --target=cpu -o sone \
    >/dev/null || fail "hexic sone"
  build sone
  "$hexic" "$here/models/seqtiny.hx" "$src/examples/clusters/cpu8.hx" \
    --plan="$here/plans/seq_pp_tp_cp_hp.json" --target=cpu -o seq >/dev/null || fail "hexic seq"
  build seq
  eval_matches_step1 seq "HexiSeq PP x TP x CP x HP" 512
  same_val sone seq "HexiSeq PP x TP x CP x HP"
  val_every seq 3 2 "2 3" "HexiSeq PP x TP x CP x HP"
  ;;
options)
  "$fixture" t "3x2@2:2r,3,4:3l;2x1@4:2" >/dev/null || fail "emit_fixture t"
  build t
  steps_in() { (cd "$1" && ls -d step_* 2>/dev/null | tr '\n' ' '); }
  # --checkpoint-dir alone: the last step's checkpoint
  launch alone t --steps 3 --checkpoint-dir ck_alone
  [ "$(steps_in ck_alone)" = "step_00000003 " ] ||
    fail "--checkpoint-dir alone wrote '$(steps_in ck_alone)', want step_00000003"
  # every 4 of 10: 4, 8 and the last (a save keeps the last two: 8 and 10
  # stay); every 4 of 6: 4 and the last. The 10-step run's last validation
  # is for below.
  launch every t --steps 10 --checkpoint-dir ck --checkpoint-every 4 --val-data val.bin --val-batches 2
  [ "$(steps_in ck)" = "step_00000008 step_00000010 " ] ||
    fail "--checkpoint-every 4 --steps 10 left '$(steps_in ck)'"
  grep -q "^hexic: checkpoint of step 4 written to ck" every.log ||
    { cat every.log; fail "--checkpoint-every 4 --steps 10 did not write step 4"; }
  launch every6 t --steps 6 --checkpoint-dir ck6 --checkpoint-every 4
  [ "$(steps_in ck6)" = "step_00000004 step_00000006 " ] ||
    fail "--checkpoint-every 4 --steps 6 left '$(steps_in ck6)'"
  [ "$(val_lines every | awk '{ print $1 }')" = 10 ] ||
    { cat every.log; fail "--val-data without --val-every: want one val line, after step 10"; }
  echo "  checkpoints: --checkpoint-dir alone: $(steps_in ck_alone); every 4 of 10: $(steps_in ck)(4 written); every 4 of 6: $(steps_in ck6)"
  # --resume from step 8 trains steps 9 and 10 as the whole run did
  mkdir ck8 && cp -r ck/step_00000008 ck8/ || fail "copy ck"
  launch resume8 t --steps 10 --checkpoint-dir ck8 --resume
  step_losses every | awk '$1 > 8' >every.tail
  step_losses resume8 >resume8.losses
  cmp -s every.tail resume8.losses ||
    { paste every.tail resume8.losses; cat resume8.log; fail "--resume from step 8: steps 9 and 10 differ"; }
  [ -d ck8/step_00000010 ] || fail "the resumed run wrote no checkpoint of its last step"
  # --eval-only after --resume: the resumed weights' loss, no checkpoint
  launch evalres t --steps 10 --checkpoint-dir ck --resume --eval-only --val-data val.bin --val-batches 2
  want=$(val_lines every) got=$(val_lines evalres)
  [ -n "$got" ] && [ "$got" = "$want" ] ||
    { cat evalres.log; fail "--eval-only after --resume printed '$got', the run's step 10 validation '$want'"; }
  [ "$(steps_in ck)" = "step_00000008 step_00000010 " ] || fail "--eval-only wrote a checkpoint"
  launch evalfresh t --steps 2 --eval-only --checkpoint-dir ck_eval --checkpoint-every 1
  [ ! -e ck_eval ] || fail "--eval-only created its --checkpoint-dir"
  echo "  --resume from 8: steps 9, 10 as the whole run; --eval-only after --resume: $got"
  # --metrics: one JSON object per step, on a plan of hexic's for a cluster
  # with speeds (the fixture's has none: no peak, no mfu): TP 2 + PP 2 beside
  # a pipeline of one rank
  "$hexic" "$here/models/tiny8.hx" "$here/clusters/four.hx" \
    --plan="$here/plans/tp2_dp_pp_groups.json" --target=cpu -o pb >/dev/null || fail "hexic pb"
  build pb
  grep -q "^    .plan_peak_flops = [1-9]" pb/rank_0000.c || fail "pb: no plan_peak_flops"
  launch metrics pb --steps 4 --val-data val.bin --val-every 2 --val-batches 1 --metrics m.jsonl
  python3 - m.jsonl <<'EOF' || fail "--metrics: m.jsonl is not what it should be"
import json, math, sys
rows = [json.loads(line) for line in open(sys.argv[1])]
assert [r["step"] for r in rows] == [1, 2, 3, 4], [r["step"] for r in rows]
need = ("loss", "lr", "grad_norm", "tokens_per_s", "mfu", "step_s", "peak_memory_bytes", "peak_memory_rank")
for r in rows:
    for k in need:
        assert k in r and math.isfinite(r[k]), (r, k)
    assert ("val_loss" in r) == (r["step"] % 2 == 0), r
    assert r["loss"] > 0 and r["grad_norm"] > 0 and r["step_s"] > 0 and 0 < r["mfu"] < 1, r
    assert r["peak_memory_bytes"] > 0 and 0 <= r["peak_memory_rank"] < 4, r
print("  --metrics: 4 lines, fields " + ", ".join(rows[1]))
EOF
  # the step lines' losses and the val lines' are the file's
  awk '{ printf "%s %.6f\n", $1, $2 }' <(step_losses metrics) >metrics.printed
  python3 -c 'import json, sys
for l in open("m.jsonl"): r = json.loads(l); print(r["step"], "%.6f" % r["loss"])' >metrics.json.losses
  cmp -s metrics.printed metrics.json.losses || fail "--metrics' losses are not the printed ones"
  before=$(md5sum <m.jsonl)
  pb/launch.sh --steps 1 --metrics m.jsonl >exists.log 2>&1 && fail "--metrics over an existing file exited 0"
  grep -q "rank 0: error: --metrics 'm.jsonl' exists: the metrics do not write over a file" exists.log ||
    { cat exists.log; fail "--metrics over an existing file: wrong message"; }
  [ "$(md5sum <m.jsonl)" = "$before" ] || fail "--metrics changed an existing file it refused"
  launch append pb --steps 2 --metrics m.jsonl --metrics-append
  [ "$(wc -l <m.jsonl)" -eq 6 ] || fail "--metrics-append: want 6 lines, not $(wc -l <m.jsonl)"
  echo "  --metrics: an existing file refused, unchanged; --metrics-append adds 2 lines"
  # the plot script: a PNG with matplotlib, a clear message without
  plot=$src/rtlib/tools/hexic-plot-metrics.py
  py_with=
  for py in python3 /usr/bin/python3; do
    if "$py" -c 'import matplotlib' 2>/dev/null; then py_with=$py; break; fi
  done
  if [ -n "$py_with" ]; then
    "$py_with" "$plot" m.jsonl m.png >plot.log 2>&1 || { cat plot.log; fail "the plot script failed"; }
    [ "$(head -c 8 m.png | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a ] || fail "m.png is not a PNG"
    "$py_with" "$plot" m.jsonl m.png >again.log 2>&1 && fail "the plot script wrote over m.png"
    grep -q "m.png exists" again.log || { cat again.log; fail "plot over a file: wrong message"; }
    echo "  plot: m.png, $(stat -c %s m.png) bytes ($py_with)"
  else
    echo "  plot: no python with matplotlib here; the PNG is not drawn"
  fi
  # without matplotlib (a module of that name that cannot import): exit 3
  mkdir -p nompl/matplotlib && echo 'raise ImportError("hidden by the test")' >nompl/matplotlib/__init__.py
  PYTHONPATH=$PWD/nompl python3 "$plot" m.jsonl none.png >nompl.log 2>&1
  [ $? -eq 3 ] && grep -q "matplotlib is not installed" nompl.log && [ ! -e none.png ] ||
    { cat nompl.log; fail "the plot script without matplotlib: want exit 3 and a message"; }
  # Bad values: every rank exits non-zero with the message, no hang
  bad() { # NAME MESSAGE ARGS...
    local name=$1 msg=$2 status
    shift 2
    timeout 60 t/launch.sh --steps 2 "$@" >"$name.log" 2>&1
    status=$?
    [ $status -ne 0 ] && [ $status -ne 124 ] || { cat "$name.log"; fail "$name: exit $status"; }
    grep -qF -- "$msg" "$name.log" || { cat "$name.log"; fail "$name: missing '$msg'"; }
    ! grep -q "^step " "$name.log" || fail "$name: trained"
    echo "  $name: exit $status, '$msg'"
  }
  bad batches0 "--val-batches wants at least 1 batch, not 0" --val-data val.bin --val-batches 0
  bad every_neg "--val-every wants a non-negative integer, not '-1'" --val-data val.bin --val-every -1
  bad missing "error: --val-data: missing.bin: cannot open: No such file or directory" --val-data missing.bin
  bad novaldata "--val-every 2 needs --val-data FILE" --val-every 2
  bad evalevery "--eval-only trains nothing: --val-every has no step to act on" --eval-only \
    --val-data val.bin --val-every 2
  bad appendonly "--metrics-append needs --metrics FILE.jsonl" --metrics-append
  ;;
*)
  fail "unknown mode $mode"
  ;;
esac
echo "exec.eval_$mode: ok"
