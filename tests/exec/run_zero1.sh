#!/usr/bin/env bash
# ZeRO-1, sharded optimizer state (issue 16): plans whose gradient-sync groups
# carry uneven optimizer shards (reduce-scatter, AdamW on the own shard,
# all-gather of the weights) must train exactly as the same plan unsharded.
#   run_zero1.sh MODE WORKDIR SRCDIR HEXIC WEIGHTS_CMP
# MODE train: over pipelines of different TP degrees (TP 2 beside TP 1 + TP 1
#   with hand-written uneven shards, members owning nothing among them; TP 3 +
#   TP 2 beside TP 1 + TP 2 split evenly; a HexiSeq PP x TP x CP x HP plan),
#   10 steps' losses within 1e-5
#   relative of the unsharded run and --dump-weights within 1e-5; the same
#   with MPI's counts cut to 7 (every block travels by itself, chunked); the
#   rank programs carry the shares; the moments (HEXIC_STATE_BYTES) shrink to
#   the shards: over the world, m and v hold each of the model's floats once.
# MODE bytes: hexic's zero1 plan and the same plan unsharded: per rank, the
#   runtime's model-state bytes move by what the simulator's memory says
#   ZeRO-1 saves, within 1%.
# MODE asan: the sharded TP 2 plan's programs built with ASan + UBSan, trained
#   with checkpoints and small MPI counts, against the unsharded run.
# MODE ckpt: a sharded run's step-5 checkpoint resumed sharded and unsharded,
#   and the unsharded run's resumed sharded: steps 6-10 and the final weights
#   within 1e-5 of the uninterrupted run.
set -uo pipefail
mode=$1 work=$2 src=$3 hexic=$4 wcmp=$5
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
export HEXIC_TIMEOUT_S=${HEXIC_TIMEOUT_S:-20}
here=$src/tests/exec
tiny6=$here/models/tiny6.hx tiny8=$work/tiny8-clip.hx
steps=10
mkdir -p "$work"
cd "$work" || exit 1

fail() { echo "FAIL: $*" >&2; exit 1; }

# tiny8 with a gradient clip its norms exceed every step, so the norm over
# the shards (each element counted once) decides every update.
sed 's/seed = 1/seed = 1; grad_clip = 0.05/' "$here/models/tiny8.hx" >"$tiny8"
grep -q "grad_clip = 0.05" "$tiny8" || fail "could not set tiny8's grad_clip"

# build DIR: make, the runtime library built once and copied
. "$src/tests/exec/build_lib.sh"

# compile NAME ARGS...: hexic ARGS --target=cpu -o NAME, built.
compile() {
  local dir=$1
  shift
  rm -rf "$dir"
  "$hexic" "$@" --target=cpu -o "$dir" >"$dir.plan.txt" || fail "hexic $*"
  build "$dir"
}

# train NAME DIR ARGS...: DIR/launch.sh ARGS; "STEP LOSS" lines in NAME.losses.
train() {
  local name=$1 dir=$2
  shift 2
  HEXIC_STATE_BYTES=1 "$dir/launch.sh" --steps $steps "$@" >"$name.out" 2>&1 ||
    { cat "$name.out"; fail "$name did not train"; }
  sed -n 's/^step \([0-9]*\)\/[0-9]* | loss \([0-9.]*\) .*/\1 \2/p' "$name.out" >"$name.losses"
}

# same REF NAME N WHAT: N losses of NAME within 1e-5 relative of REF's, weights within 1e-5.
same() {
  local ref=$1 name=$2 n=$3 what=$4
  awk 'NR == FNR { a[$1] = $2; next } ($1 in a) { n++; r = (a[$1] - $2) / a[$1]; if (r < 0) r = -r
         if (r > 1e-5) bad++ } END { exit bad > 0 || n != '"$n"' }' "$ref.losses" "$name.losses" ||
    { paste "$ref.losses" "$name.losses"; fail "$what: losses differ from the unsharded run"; }
  local cmp
  cmp=$("$wcmp" "$ref.w" "$name.w" 1e-5) || { echo "$cmp"; fail "$what: weights differ"; }
  echo "  $what: $n losses within 1e-5; ${cmp#weights_cmp: }"
}

# moments NAME: the world's m floats (HEXIC_STATE_BYTES lines).
moments() {
  sed -n 's/.*m and v \([0-9]*\) floats each.*/\1/p' "$1.out" | awk '{ s += $1 } END { print s + 0 }'
}

# shards DIR: the rank programs must name shares (zero1) or none.
shards() {
  local dir=$1 want=$2 n
  n=$(cat "$dir"/rank_*.c | grep -c '_shards\[\] = {')
  if [ "$want" = yes ]; then
    [ "$n" -gt 0 ] || fail "$dir: the rank programs carry no optimizer shards"
  else
    [ "$n" -eq 0 ] || fail "$dir: an unsharded plan's programs carry shards"
  fi
}

# plans: the unsharded pair and their zero1 twins (the TP 3 one from the
# hand-written tp3_tp2_uneven.json with "train": zero1 added: even shares).
plans() {
  compile none8 "$tiny8" "$here/clusters/four.hx" --plan="$here/plans/tp2_dp_pp_groups.json"
  compile zero8 "$tiny8" "$here/clusters/four.hx" --plan="$here/plans/zero1_tp2_dp_pp.json"
  compile none6 "$tiny6" "$src/examples/clusters/cpu8.hx" --plan="$here/plans/tp3_tp2_uneven.json"
  sed 's/"schedule": "1f1b",/"schedule": "1f1b",\n  "train": {"optimizer_sharding": "zero1"},/' \
    "$here/plans/tp3_tp2_uneven.json" >zero1_tp3_tp2.json
  compile zero6 "$tiny6" "$src/examples/clusters/cpu8.hx" --plan="$PWD/zero1_tp3_tp2.json"
  shards none8 no
  shards zero8 yes
  shards zero6 yes
}

case "$mode" in
train)
  plans
  for pair in 8 6; do
    train "none$pair" "none$pair" --dump-weights "$PWD/none$pair.w"
    train "zero$pair" "zero$pair" --dump-weights "$PWD/zero$pair.w"
    same "none$pair" "zero$pair" $steps "zero$pair ($(sed -n 's/.*"description": "\(.\{0,60\}\).*/\1/p' \
      "zero$pair/plan.json" | head -n 1)...)"
    # Sharded, the world holds each element's moments exactly once: the
    # model's floats (the dump's size); unsharded, once per copy.
    full=$(moments "none$pair") part=$(moments "zero$pair")
    model=$(($(wc -c <"none$pair.w") / 4))
    [ "$part" -eq "$model" ] ||
      fail "zero$pair: m and v hold $part floats each over the world, not the model's $model once"
    echo "  zero$pair: m and v of $part floats each over the world (the model once), unsharded $full"
  done
  # HexiSeq (issue 14): PP x TP x CP x HP, its sync groups spanning the
  # units that replicate a stage's weights, sharded evenly.
  compile noneq "$here/models/seqtiny.hx" "$src/examples/clusters/cpu8.hx" \
    --plan="$here/plans/seq_pp_tp_cp_hp.json"
  sed 's/"schedule": "1f1b",/"schedule": "1f1b",\n  "train": {"optimizer_sharding": "zero1"},/' \
    "$here/plans/seq_pp_tp_cp_hp.json" >zero1_seq.json
  compile zeroq "$here/models/seqtiny.hx" "$src/examples/clusters/cpu8.hx" --plan="$PWD/zero1_seq.json"
  shards zeroq yes
  train noneq noneq --dump-weights "$PWD/noneq.w"
  train zeroq zeroq --dump-weights "$PWD/zeroq.w"
  same noneq zeroq $steps "zeroq (HexiSeq PP x TP x CP x HP, seq_pp_tp_cp_hp.json sharded)"
  [ "$(moments zeroq)" -eq $(($(wc -c <noneq.w) / 4)) ] ||
    fail "zeroq: m and v hold $(moments zeroq) floats each over the world, not the model's once"
  HEXIC_MPI_MAX_COUNT=7 train zero8c zero8 --dump-weights "$PWD/zero8c.w"
  same none8 zero8c $steps "zero8 with MPI counts of at most 7 (block by block, chunked)"
  ;;
ckpt)
  plans
  # The uninterrupted runs, with a checkpoint at step 5.
  for p in none8 zero8; do
    rm -rf "ck.$p"
    train "$p" "$p" --checkpoint-dir "ck.$p" --checkpoint-every 5 --dump-weights "$PWD/$p.w"
    rm -rf "ck.$p/step_00000010"
  done
  same none8 zero8 $steps "zero8 with checkpoints"
  # resume NAME DIR FROM WHAT: DIR resumes a copy of FROM's step-5 checkpoint.
  resume() {
    local name=$1 dir=$2 from=$3 what=$4
    rm -rf "ck.$name" && cp -r "ck.$from" "ck.$name"
    train "$name" "$dir" --checkpoint-dir "ck.$name" --resume --dump-weights "$PWD/$name.w"
    [ "$(cut -d' ' -f1 "$name.losses" | tr '\n' ' ')" = "6 7 8 9 10 " ] ||
      { cat "$name.out"; fail "$what: did not run steps 6-10 exactly"; }
    same none8 "$name" 5 "$what"
  }
  resume zz zero8 zero8 "sharded checkpoint -> the same sharded plan"
  resume zn none8 zero8 "sharded checkpoint -> the plan unsharded"
  resume nz zero8 none8 "unsharded checkpoint -> the sharded plan"
  ;;
bytes)
  # hexic's own zero1 plan of tiny8 on mixed4.hx with an optimizer that
  # streams 5 GB/s (mixed4's gpu blocks give none: their optimizer, priced
  # by FLOP/s, then weighs so much that a one-pipeline plan wins, with no
  # data parallelism to shard over), and the same plan with
  # optimizer_sharding none (its plan.json edited, read back with --plan):
  # the bytes of model state the runtime allocated (HEXIC_STATE_BYTES) are
  # plan.json's memory_by_kind weights + gradients + optimizer within 1% per
  # rank, sharded and unsharded, and ZeRO-1 saves some on every plan.
  steps=1
  sed 's/efficiency = 1 }/efficiency = 1; mem_bandwidth = 5 GB\/s }/' "$here/clusters/mixed4.hx" >mixed4-bw.hx
  [ "$(grep -c 'mem_bandwidth = 5 GB/s' mixed4-bw.hx)" = 2 ] || fail "could not set mixed4's mem_bandwidth"
  "$hexic" "$tiny8" mixed4-bw.hx --target=cpu -o zb >zb.plan.txt || fail "hexic zb"
  grep -q '"optimizer_shards"' zb/plan.json || fail "hexic's plan of tiny8 on mixed4-bw.hx is not sharded"
  python3 - zb/plan.json >none.json <<'PY' || fail "cannot write the unsharded plan"
import json, sys
p = json.load(open(sys.argv[1]))
p["strategy"] = "file"
p["train"] = {"optimizer_sharding": "none"}
for g in p["groups"]:
    g.pop("optimizer_shards", None)
json.dump({k: p[k] for k in ("strategy", "schedule", "train", "pipelines", "groups")}, sys.stdout)
PY
  build zb
  sed 's/optimizer_sharding = zero1/optimizer_sharding = none/; s/seed = 1/seed = 1; optimizer_sharding = none/' \
    "$tiny8" >tiny8-none.hx
  compile nb "$PWD/tiny8-none.hx" "$PWD/mixed4-bw.hx" --plan="$PWD/none.json"
  train zb zb
  train nb nb
  python3 - zb nb <<'PY' || fail "the runtime's model-state bytes disagree with the simulator's"
import json, re, sys
# model state = weights + gradients + optimizer of plan.json's memory_by_kind
# (ZeRO-1's receive blocks are communication buffers, priced under comm)
def run(d):
    kinds = json.load(open(d + "/plan.json"))["memory_by_kind"]
    state = [k["weights"] + k["gradients"] + k["optimizer"] for k in kinds]
    got = {int(r): int(b) for r, b in re.findall(r"rank (\d+): model state (\d+) bytes", open(d + ".out").read())}
    return state, got
zstate, zgot = run(sys.argv[1])
nstate, ngot = run(sys.argv[2])
bad = 0
saved_any = False
for r in sorted(zgot):
    saved_any |= zstate[r] < nstate[r]
    for name, got, want in (("zero1", zgot[r], zstate[r]), ("none", ngot[r], nstate[r])):
        err = abs(got - want) / want
        print(f"  rank {r} {name}: runtime {got} bytes, model {want:.0f}, {100 * err:.3f}%")
        bad += err > 0.01
sys.exit(1 if bad or not saved_any or len(zgot) != len(zstate) else 0)
PY
  ;;
asan)
  # The runtime's ZeRO-1 paths under AddressSanitizer and UBSan (leaks off:
  # MPI keeps its own allocations), with a checkpoint (the moment gather)
  # and the block-by-block collectives.
  plans
  train none8 none8 --dump-weights "$PWD/none8.w"
  rm -rf asan && cp -r zero8 asan && rm -rf asan/obj asan/libhexic.a asan/rank_0???
  make -s -C asan -j2 CFLAGS="-O1 -g -fsanitize=address,undefined -fno-sanitize-recover=undefined" \
    >asan.make.log 2>&1 || { cat asan.make.log; fail "make with sanitizers"; }
  rm -rf ck.asan
  ASAN_OPTIONS=detect_leaks=0 HEXIC_MPI_MAX_COUNT=1000 train asan asan --checkpoint-dir ck.asan \
    --checkpoint-every 5 --dump-weights "$PWD/asan.w"
  same none8 asan $steps "zero8 under ASan+UBSan, MPI counts of at most 1000, checkpoints"
  ;;
*)
  fail "unknown mode $mode"
  ;;
esac
echo "OK"
