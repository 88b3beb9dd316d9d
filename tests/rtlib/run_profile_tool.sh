#!/usr/bin/env bash
# hexic-profile end to end: usage and errors, then small measurements on one
# rank and under mpirun with 2 ranks whose cluster files hexic accepts
# (`hexic --check` with a model). The figures are the machine's: not asserted.
#   run_profile_tool.sh HEXIC_PROFILE HEXIC MPIEXEC MODEL.hx WORKDIR
set -u
profile=$1 hexic=$2 mpiexec=$3 model=$4 work=$5
rm -rf "$work" && mkdir -p "$work"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0}
fail() { echo "FAIL: $*"; exit 1; }
small=(--hidden 64 --ffn 176 --tokens 64 --vocab 256 --seconds 0.1 --stream-mib 4)

"$profile" --help | grep -q "usage: hexic-profile" || fail "--help"
"$profile" --bogus >/dev/null 2>"$work/err"; [ $? = 2 ] || fail "unknown option: not exit 2"
grep -q "bad option or value: '--bogus'" "$work/err" || fail "unknown option: $(cat "$work/err")"
"$profile" --hidden 0 >/dev/null 2>&1; [ $? = 2 ] || fail "--hidden 0 accepted"
"$profile" --hidden 64 --heads 3 >/dev/null 2>&1; [ $? = 2 ] || fail "--heads 3 of 64 accepted"
"$profile" --name 'a"b' >/dev/null 2>&1; [ $? = 2 ] || fail "a quote in --name accepted"
"$profile" "${small[@]}" -o "$work/no-such-dir/x.hx" 2>"$work/err" && fail "unwritable output accepted"
grep -q "cannot create" "$work/err" || fail "unwritable output: $(cat "$work/err")"

# One rank (no mpirun): a gpu block and a node of --gpus devices, no network.
"$profile" "${small[@]}" --gpus 3 --name cpu-one -o "$work/one.hx" 2>"$work/err" \
  || fail "one rank: $(cat "$work/err")"
grep -q '^gpu "cpu-one" { tflops = [0-9.]*; memory = [0-9]* MiB; efficiency = [0-9.]*; backward_efficiency = [0-9.]*; head_efficiency = [0-9.]*; mem_bandwidth = [0-9.]* MB/s; copy_bandwidth = [0-9.]* MB/s; tp_efficiency = \[1.000[0-9., ]*\] }$' \
  "$work/one.hx" || fail "one rank: gpu block: $(cat "$work/one.hx")"
grep -q 'gpus = 3;' "$work/one.hx" || fail "one rank: --gpus: $(cat "$work/one.hx")"
grep -q '^# Measured by hexic-profile (.* --layers 1, ' "$work/one.hx" || fail "one rank: header: $(cat "$work/one.hx")"
grep -q '^# mem_bandwidth: the optimizer step' "$work/one.hx" ||
  fail "one rank: no mem_bandwidth note"
# The backward's rate read back: a plan on one device of this type prices
# its layers' backward (2x the forward's FLOPs) at backward_efficiency, and
# the backward op holds nothing else (the head's backward is the last
# stage's forward op's, as the runtime runs it; tiny.hx: no layer_overhead,
# no TP, the embedding's backward counts no FLOPs). So the simulated
# iteration's backward at half the backward_efficiency takes twice as long,
# and its forward, which holds the head's backward, longer.
sed 's/ head_efficiency = [0-9.]*;//' "$work/one.hx" >"$work/one-nohead.hx"
"$hexic" "$model" "$work/one-nohead.hx" -o "$work/one-plan" >/dev/null 2>"$work/err" ||
  fail "one rank: no plan: $(cat "$work/err")"
python3 - "$work/one-nohead.hx" "$work/one-half.hx" <<'PY' || fail "one rank: cannot halve backward_efficiency"
import re, sys
hx = open(sys.argv[1]).read()
beff = float(re.search(r"backward_efficiency = ([0-9.]+);", hx).group(1))
open(sys.argv[2], "w").write(hx.replace("backward_efficiency = %s;" % re.search(
    r"backward_efficiency = ([0-9.]+);", hx).group(1), "backward_efficiency = %.6f;" % (beff / 2)))
PY
"$hexic" "$model" "$work/one-half.hx" -o "$work/one-half" >/dev/null 2>"$work/err" ||
  fail "one rank: no plan at half the backward_efficiency: $(cat "$work/err")"
python3 - "$work/one-plan/trace.json" "$work/one-half/trace.json" <<'PY' || fail "one rank: backward_efficiency not used"
import json, sys
def seconds(path, kind):
    ev = json.load(open(path))["traceEvents"]
    return sum(e["dur"] for e in ev if e.get("ph") == "X" and e.get("tid") == 0 and e["cat"] == kind)
bwd = [seconds(p, "backward") for p in sys.argv[1:]]
fwd = [seconds(p, "forward") for p in sys.argv[1:]]
print("simulated backward %.1f us, %.1f us at half the backward_efficiency (want 2x); forward %.1f, %.1f us"
      % (bwd[0], bwd[1], fwd[0], fwd[1]))
sys.exit(0 if bwd[0] > 0 and abs(bwd[1] / bwd[0] - 2) <= 2e-3 and fwd[1] > fwd[0] else 1)
PY
# head_efficiency read back: the head priced at it moves the simulated step
# the way it differs from the layers' rates
"$hexic" "$model" "$work/one.hx" -o "$work/one-head" >/dev/null 2>"$work/err" ||
  fail "one rank: no plan with head_efficiency: $(cat "$work/err")"
python3 - "$work/one.hx" "$work/one-plan/plan.json" "$work/one-head/plan.json" <<'PY' ||
import json, re, sys
hx = open(sys.argv[1]).read()
eff = float(re.search(r"; efficiency = ([0-9.]+);", hx).group(1))
beff = float(re.search(r"backward_efficiency = ([0-9.]+);", hx).group(1))
heff = float(re.search(r"head_efficiency = ([0-9.]+);", hx).group(1))
step = [json.load(open(f))["simulated"]["iteration_s"] for f in sys.argv[2:]]
print("head_efficiency %.3f: simulated step %.6f s, %.6f s without it" % (heff, step[1], step[0]))
slower, faster = heff < min(eff, beff), heff > max(eff, beff)
sys.exit(0 if (slower and step[1] > step[0]) or (faster and step[1] < step[0])
         or not (slower or faster) else 1)
PY
  fail "one rank: head_efficiency not used"
# --layers: the efficiency of a stack (its own weights per layer), said in the header
"$profile" "${small[@]}" --layers 3 -o "$work/stack.hx" 2>"$work/err" || fail "--layers 3: $(cat "$work/err")"
grep -q '^# Measured by hexic-profile (.* --layers 3, ' "$work/stack.hx" || fail "--layers 3: $(cat "$work/stack.hx")"
"$hexic" --check "$model" "$work/stack.hx" || fail "--layers 3: hexic refused $(cat "$work/stack.hx")"
"$profile" --layers 0 >/dev/null 2>&1; [ $? = 2 ] || fail "--layers 0 accepted"
"$profile" --vocab 0 >/dev/null 2>&1; [ $? = 2 ] || fail "--vocab 0 accepted"
# a stack no machine holds (about 5 TiB) is refused before anything is measured
"$profile" --hidden 4096 --ffn 16384 --tokens 4096 --layers 1024 -o "$work/huge.hx" 2>"$work/err" &&
  fail "--layers 1024 of 4096-wide layers accepted"
grep -q "^hexic-profile: --layers 1024 of this shape needs [0-9.]* GiB, more than this machine's" \
  "$work/err" || fail "--layers 1024: $(cat "$work/err")"
[ -e "$work/huge.hx" ] && fail "--layers 1024: an output was written"
"$hexic" --check "$model" "$work/one.hx" || fail "one rank: hexic refused $(cat "$work/one.hx")"

# --profile (issue 18): a profile block per TP degree (1, 2 and 4 of 4 heads
# on 4 devices), each over the micro-batch sizes asked for, that hexic reads.
"$profile" "${small[@]}" --heads 4 --gpus 4 --profile --micro-batches 1,2 -o "$work/prof.hx" \
  2>"$work/err" || fail "--profile: $(cat "$work/err")"
[ "$(grep -c '^  micro_batch = \[1, 2\]$' "$work/prof.hx")" = 3 ] || fail "--profile: $(cat "$work/prof.hx")"
"$hexic" --check "$model" "$work/prof.hx" 2>"$work/err" || fail "--profile: hexic refused $(cat "$work/prof.hx")"
"$profile" --micro-batches 2,1 >/dev/null 2>&1; [ $? = 2 ] || fail "--micro-batches 2,1 accepted"
# --rounds: every figure the best of N rounds; the same blocks, which hexic reads
"$profile" "${small[@]}" --heads 4 --gpus 2 --profile --micro-batches 1,2 --rounds 2 --verbose \
  -o "$work/rounds.hx" 2>"$work/err" || fail "--rounds 2: $(cat "$work/err")"
# --verbose: a line per round, as the rounds go
for k in 1 2; do
  grep -q "^hexic-profile: round $k: sgemm [0-9.]* GFLOP/s, .*; tp 1 forward/backward: mbs 1 [0-9.]*/[0-9.]* ms, mbs 2 " \
    "$work/err" || fail "--rounds 2 --verbose: no line for round $k: $(cat "$work/err")"
done
[ "$(grep -c '^  micro_batch = \[1, 2\]$' "$work/rounds.hx")" = 2 ] || fail "--rounds 2: $(cat "$work/rounds.hx")"
grep -q '^  forward = \[[0-9.]* ms, [0-9.]* ms\]$' "$work/rounds.hx" || fail "--rounds 2: $(cat "$work/rounds.hx")"
grep -q 'inf\|nan' "$work/rounds.hx" && fail "--rounds 2: a figure never measured: $(cat "$work/rounds.hx")"
"$hexic" --check "$model" "$work/rounds.hx" 2>"$work/err" || fail "--rounds 2: hexic refused $(cat "$work/rounds.hx")"
"$profile" --rounds 0 >/dev/null 2>&1; [ $? = 2 ] || fail "--rounds 0 accepted"

# Two ranks: the ping-pong fills the node's link and the network.
"$mpiexec" --oversubscribe -np 2 "$profile" "${small[@]}" -o "$work/two.hx" >"$work/out" 2>&1 \
  || fail "two ranks: $(cat "$work/out")"
grep -q '^node "host" { gpu = "cpu"; gpus = 2; bandwidth = [0-9.]* MB/s; latency = [0-9.]* us }$' \
  "$work/two.hx" || fail "two ranks: node: $(cat "$work/two.hx")"
grep -q '^network { bandwidth = [0-9.]* MB/s; latency = [0-9.]* us }$' "$work/two.hx" \
  || fail "two ranks: network: $(cat "$work/two.hx")"
"$hexic" --check "$model" "$work/two.hx" || fail "two ranks: hexic refused $(cat "$work/two.hx")"
# and a plan over it compiles
"$hexic" "$model" "$work/two.hx" -o "$work/plan" >/dev/null || fail "two ranks: no plan"
echo "ok: $(grep -c . "$work/two.hx") lines; $(tail -1 "$work/out")"
