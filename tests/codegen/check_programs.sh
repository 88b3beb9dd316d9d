#!/usr/bin/env bash
# Tests of the generated per-rank programs. One mode per ctest entry:
#   check_programs.sh MODE WORKDIR FIXTURE SHARD_TOOL PARSE_CHECK SRCDIR HEXIC
# MODE: static | train | resume | equiv | refuse | fault | hexic
# (TP plans and their equivalence with one rank: tests/exec/run_exec.sh.)
# FIXTURE is tests/codegen/emit_fixture (hand-built plans; see its header).
set -uo pipefail
mode=$1 work=$2 fixture=$3 shard_tool=$4 parse_check=$5 src=$6 hexic=${7:-}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
export HEXIC_TIMEOUT_S=${HEXIC_TIMEOUT_S:-20}
mkdir -p "$work"
cd "$work" || exit 1

fail() { echo "FAIL: $*" >&2; exit 1; }

# pair A B: "STEP LOSS_A LOSS_B" for every step both files print.
pair() { awk 'NR == FNR { a[$1] = $2; next } ($1 in a) { print $1, a[$1], $2 }' "$1" "$2"; }

# Real text as a byte-level shard: the system's licence texts, else our docs.
make_shard() {
  [ -s text.bin ] && return
  if ls /usr/share/common-licenses/* >/dev/null 2>&1; then
    cat /usr/share/common-licenses/* >text.txt
  else
    cat "$src"/docs/*.md "$src"/README.md >text.txt
  fi
  "$shard_tool" text.txt text.bin >/dev/null || fail "hexic-shard"
}

# emit DIR PLAN [flags]: generate and build.
emit() {
  local dir=$1
  shift
  rm -rf "$dir"
  "$fixture" "$dir" "$@" || fail "emit_fixture $*"
  make -s -C "$dir" -j2 >"$dir.make.log" 2>&1 || { cat "$dir.make.log"; fail "make in $dir"; }
}

# losses DIR ARGS...: the printed loss of every step, one per line "STEP LOSS".
losses() {
  local dir=$1
  shift
  "$dir/launch.sh" "$@" | sed -n 's/^step \([0-9]*\)\/[0-9]* | loss \([0-9.]*\) .*/\1 \2/p'
}

case "$mode" in
static)
  plans=("8x1@4" "3x2@4;2x1@4" "2x4@1,4" "1x4@1,4;2x2@3,4" "2x2@2:2l,4:3r;4x1@4:2")
  i=0
  for plan in "${plans[@]}"; do
    emit "plan$i" "$plan"
    "$fixture" "again$i" "$plan" || fail "second emit"
    # byte-identical except for what make added to plan$i
    diff -r -x obj -x '*.a' -x 'rank_[0-9][0-9][0-9][0-9]' "plan$i" "again$i" ||
      fail "two compilations of $plan differ"
    for f in "plan$i"/*.c; do
      clang-format --style=file "$f" | cmp -s - "$f" || fail "clang-format changes $f"
    done
    cmp "plan$i/.clang-format" "$src/.clang-format" || fail ".clang-format copy differs"
    "$parse_check" -I "$src/rtlib" "plan$i"/*.c || fail "libclang diagnostics in plan$i"
    bash -n "plan$i/launch.sh" || fail "launch.sh syntax"
    i=$((i + 1))
  done
  echo "static: ${#plans[@]} plans generated, built with -Werror, formatted, parsed, deterministic"
  ;;
train)
  make_shard
  emit one "8x1@4"
  losses one --data text.bin --steps 100 >losses.txt
  [ "$(wc -l <losses.txt)" -eq 100 ] || fail "expected 100 step lines"
  awk 'NR<=10 {a += $2} NR>90 {b += $2} END {
         printf "train: mean loss of steps 1-10 %.4f, steps 91-100 %.4f\n", a/10, b/10
         exit !(b/10 < a/10 - 1.0) }' losses.txt || fail "loss did not fall by 1 nat"
  ;;
resume)
  make_shard
  emit ck "2x2@2,4;4x1@4" # pipeline parallel + uneven data parallel, 3 ranks
  steps=250 k=50
  losses ck --data text.bin --steps $steps >full.txt
  rm -rf ckpts
  # Checkpoint every k steps; kill -9 the whole job once step k+2 is printed.
  set -m
  ck/launch.sh --data text.bin --steps $steps --checkpoint-dir ckpts --checkpoint-every $k \
    >killed.log 2>&1 &
  job=$!
  set +m
  for _ in $(seq 600); do
    grep -q "^step $((k + 2))/" killed.log && break
    sleep 0.05
  done
  grep -q "^step $((k + 2))/" killed.log || fail "run never reached step $((k + 2))"
  kill -9 -- -"$job" 2>/dev/null
  wait "$job" 2>/dev/null
  grep -q "^step $steps/" killed.log && fail "run ended before the kill (make steps slower)"
  losses ck --data text.bin --steps $steps --checkpoint-dir ckpts --resume >resumed.txt
  first=$(head -n 1 resumed.txt | cut -d' ' -f1)
  [ -n "$first" ] && [ "$first" -gt 1 ] || fail "the resumed run did not resume (first step '$first')"
  pair full.txt resumed.txt | awk '$2 != $3 {bad++} END {exit bad > 0}' ||
    fail "resumed losses differ from the uninterrupted run"
  [ "$(wc -l <resumed.txt)" -eq $((steps - first + 1)) ] || fail "resumed run missed steps"
  echo "resume: killed after step $((k + 2)), resumed at step $first, $(wc -l <resumed.txt) losses identical"
  ;;
equiv)
  make_shard
  emit single "8x1@4"
  losses single --data text.bin --steps 5 >single.txt
  i=0
  for plan in "3x2@4;2x1@4" "2x4@2,4" "1x4@1,4;2x2@3,4" "1x2@1,2,3,4;3x2@4"; do
    emit "p$i" "$plan"
    losses "p$i" --data text.bin --steps 5 >"p$i.txt"
    [ "$(wc -l <"p$i.txt")" -eq 5 ] || fail "plan $plan printed $(wc -l <"p$i.txt") steps"
    pair single.txt "p$i.txt" | awk -v plan="$plan" '
      { r = ($2 - $3) / $2; if (r < 0) r = -r; if (r > 1e-5) bad++ }
      END { if (bad) print "plan " plan ": " bad " losses off by more than 1e-5"; exit bad > 0 }' ||
      fail "plan $plan differs from one rank"
    i=$((i + 1))
  done
  emit tied1 "8x1@4" --tied
  emit tied2 "1x4@1,4;2x2@3,4" --tied
  losses tied1 --data text.bin --steps 5 >tied1.txt
  losses tied2 --data text.bin --steps 5 >tied2.txt
  pair tied1.txt tied2.txt | awk '{ r = ($2 - $3) / $2; if (r < 0) r = -r; if (r > 1e-5) bad++ }
                                  END { exit bad > 0 || NR != 5 }' || fail "tied embeddings over PP"
  echo "equiv: 5 plans (DP uneven, PP uneven, DP x PP, tied over PP) match one rank within 1e-5"
  ;;
refuse)
  # The fixture's "cpu" GPU type has no CUDA architecture (sema refuses it
  # for .hx inputs; the emitter checks again for plans built otherwise).
  out=$("$fixture" cuda "8x1@4" --cuda 2>&1)
  [ $? -eq 2 ] || fail "--target=cuda without a CUDA architecture should exit 2"
  grep -q "rank 0: its GPU type has no known CUDA architecture (cuda_arch = NN in its gpu block)" \
    <<<"$out" || fail "wrong cuda message: $out"
  out=$("$fixture" cp "8x1@4" --cp 2>&1)
  [ $? -eq 2 ] || fail "a context-parallel plan should be refused with exit 2"
  grep -q "pipeline 0 stage 0 has cp=2 hp=1 but no HexiSeq layout (token ranges and heads" \
    <<<"$out" || fail "wrong cp message: $out"
  out=$("$fixture" tp5 "8x1@4:5" 2>&1)
  [ $? -eq 2 ] || fail "tp 5 over 4 heads should be refused with exit 2"
  grep -q "tp=5 over 5 devices cannot split 4 heads" <<<"$out" || fail "wrong tp message: $out"
  echo "refuse: cuda without an architecture, cp without a HexiSeq layout, tp > heads: exit 2"
  ;;
fault)
  emit f "1x4@1,4;2x2@4"
  "f/launch.sh" --steps 3 --data /nonexistent/tokens.bin >fault.log 2>&1 && fail "a bad run succeeded"
  grep -q "launch.sh: rank [0-9]* (rank_[0-9]*) failed" fault.log || { cat fault.log; fail "launch.sh did not name the failed rank"; }
  echo "fault: $(grep 'launch.sh: rank' fault.log)"
  ;;
hexic)
  # The real compiler on the example inputs: one rank, then the CUDA refusal.
  make_shard
  rm -rf h1 h1b
  "$hexic" "$src/examples/models/tiny.hx" "$src/examples/clusters/cpu1.hx" --target=cpu -o h1 \
    >/dev/null || fail "hexic tiny.hx cpu1.hx"
  "$hexic" "$src/examples/models/tiny.hx" "$src/examples/clusters/cpu1.hx" --target=cpu -o h1b \
    >/dev/null || fail "second hexic run"
  diff -r h1 h1b || fail "two hexic compilations differ"
  for f in h1/*.c; do
    clang-format --style=file "$f" | cmp -s - "$f" || fail "clang-format changes $f"
  done
  "$parse_check" -I "$src/rtlib" h1/*.c || fail "libclang diagnostics"
  make -s -C h1 -j2 >h1.make.log 2>&1 || { cat h1.make.log; fail "make in h1"; }
  losses h1 --data text.bin --steps 60 >h1.txt
  awk 'NR<=10 {a += $2} NR>50 {b += $2} END {
         printf "hexic: tiny on cpu1, mean loss of steps 1-10 %.4f, steps 51-60 %.4f\n", a/10, b/10
         exit !(NR == 60 && b/10 < a/10 - 0.5) }' h1.txt || fail "loss did not fall"
  # cpu8.hx: whatever DP x PP plan hexic picks must print the one-rank losses.
  rm -rf h8
  "$hexic" "$src/examples/models/tiny.hx" "$src/examples/clusters/cpu8.hx" --target=cpu -o h8 \
    >h8.plan.txt || fail "hexic tiny.hx cpu8.hx"
  make -s -C h8 -j2 >h8.make.log 2>&1 || { cat h8.make.log; fail "make in h8"; }
  "$parse_check" -I "$src/rtlib" h8/*.c || fail "libclang diagnostics in h8"
  # the demo's set, ZeRO-1 shards of 8 members included, as clang-format has it
  for f in h8/*.c; do
    clang-format --style=file "$f" | cmp -s - "$f" || fail "clang-format changes $f"
  done
  losses h8 --data text.bin --steps 5 >h8.txt
  pair h1.txt h8.txt | awk '{ r = ($2 - $3) / $2; if (r < 0) r = -r; if (r > 1e-5) bad++ }
                           END { exit bad > 0 || NR != 5 }' ||
    fail "cpu8 plan ($(head -n 1 h8.plan.txt)) differs from one rank"
  echo "hexic: cpu8 $(head -n 1 h8.plan.txt) matches one rank within 1e-5 for 5 steps"
  # A CPU "GPU" type has no CUDA architecture: --target=cuda is a located
  # error in the cluster file, and no program is written.
  out=$("$hexic" "$src/examples/models/tiny.hx" "$src/examples/clusters/cpu1.hx" --target=cuda \
    -o hc 2>&1)
  [ $? -eq 1 ] || fail "hexic --target=cuda on a CPU cluster should exit 1"
  grep -q 'cpu1.hx:2:1: error: --target=cuda needs the CUDA architecture of GPU type "cpu"' \
    <<<"$out" || fail "wrong cuda message: $out"
  [ ! -e hc/rank_0000.c ] || fail "--target=cuda wrote programs for a cluster it refused"
  ;;
*)
  fail "unknown mode $mode"
  ;;
esac
