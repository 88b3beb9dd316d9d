#!/bin/sh
# Issue 24 item 9: the same inputs give the same plan on any machine, and
# what -o writes is bounded.
#  1. hexic_slow_clock is hexic whose clock runs 1000 s per reading (a
#     machine far slower or more loaded than any deadline). Without
#     --search-budget it must write byte for byte what hexic writes, with no
#     warning: the default limits are counted work, never the clock. (A
#     default clock limit of 30 s cut its searches short: another plan.)
#     With --search-budget=5 it must warn that the search was cut short: the
#     opt-in safety net still works, and the slow clock is really in use.
#  2. A global batch of 2^18 sequences in micro-batches of 1 on 4 devices:
#     trace.json stops at its event limit, saying so in the file and on
#     stderr; everything written stays under 300 MB.
#  3. A one-layer model on 2048 devices at DP 2048 (every rank lists its
#     gradient groups' 2048 members): the rank programs are refused with the
#     limit and what to change, exit 2, no rank_*.c written.
#   clock.sh HEXIC HEXIC_SLOW_CLOCK SOURCE_DIR WORK_DIR
set -u
hexic=$1 slow=$2 src=$3 work=$4
rm -rf "$work"
mkdir -p "$work"
fail=0
bad() { echo "FAIL: $*"; fail=1; }

cat >"$work/c4.hx" <<'HX'
gpu "fast" { tflops = 0.02;  memory = 4 GiB; efficiency = 1; mem_bandwidth = 10 GB/s }
gpu "slow" { tflops = 0.007; memory = 4 GiB; efficiency = 1; mem_bandwidth = 10 GB/s }
node "f" { gpu = "fast"; gpus = 2; bandwidth = 5 GB/s; latency = 2 us }
node "s" { gpu = "slow"; gpus = 2; bandwidth = 5 GB/s; latency = 2 us }
network { bandwidth = 1 GB/s; latency = 20 us }
HX
model=$src/examples/models/tiny.hx

# 1. the clock does not steer the plan
"$hexic" "$model" "$work/c4.hx" -o "$work/real" >"$work/real.out" 2>"$work/real.err" ||
  bad "hexic: exit $?: $(cat "$work/real.err")"
"$slow" "$model" "$work/c4.hx" -o "$work/slow" >"$work/slow.out" 2>"$work/slow.err" ||
  bad "hexic_slow_clock: exit $?: $(cat "$work/slow.err")"
if ! diff -r "$work/real" "$work/slow" >"$work/diff" || ! cmp -s "$work/real.out" "$work/slow.out"; then
  bad "a slow clock changed what hexic writes: $(head -c 600 "$work/diff")"
  cat "$work/slow.err"
fi
grep -q "cut short" "$work/slow.err" && bad "the default search was cut by the clock: $(cat "$work/slow.err")"
"$slow" "$model" "$work/c4.hx" --search-budget=5 >/dev/null 2>"$work/budget.err"
grep -q "warning: the plan search was cut short by --search-budget=5s" "$work/budget.err" ||
  bad "--search-budget=5 on the slow clock did not warn: $(cat "$work/budget.err")"

# 2. a huge batch: trace cut at its limit
sed 's/global_batch = 32/global_batch = 262144; micro_batch = 1/' "$model" >"$work/big.hx"
"$hexic" "$work/big.hx" "$work/c4.hx" -o "$work/big" >/dev/null 2>"$work/big.err" ||
  bad "batch 2^18: exit $?: $(cat "$work/big.err")"
grep -q 'note: trace.json holds the first .* of its [0-9]* simulated events (the most it holds is 200000)' \
  "$work/big.err" || bad "no note that trace.json was cut: $(cat "$work/big.err")"
grep -q '"name": "trace cut at .* s: [0-9]* of [0-9]* events (the limit is 200000)"' "$work/big/trace.json" ||
  bad "trace.json does not say it was cut"
events=$(grep -c '"ph": "X"' "$work/big/trace.json")
[ "$events" -le 200000 ] || bad "trace.json holds $events events, more than 200000"
size=$(cat "$work/big"/* | wc -c)
[ "$size" -le 300000000 ] || bad "batch 2^18 wrote $size bytes"

# 3. rank programs over the row limit are refused
{
  printf 'gpu "g" { tflops = 10; memory = 80 GiB }\n'
  printf 'node "n" { gpu = "g"; gpus = 1; bandwidth = 10 GB/s; replicas = 2048 }\n'
  printf 'network { bandwidth = 10 GB/s; latency = 5 us }\n'
} >"$work/c2048.hx"
sed -e 's/global_batch = 32/global_batch = 2048/' -e 's/layers = 4/layers = 1/' "$model" >"$work/b2048.hx"
"$hexic" "$work/b2048.hx" "$work/c2048.hx" --strategy=symmetric -o "$work/wide" >/dev/null 2>"$work/wide.err"
rc=$?
[ "$rc" = 2 ] || bad "2048 ranks listing 2048-member groups: exit $rc, expected 2"
grep -q 'error: the 2048 rank programs would hold more than 8388608 table rows (about 240 MB of C), the most hexic writes: .*so use fewer devices' \
  "$work/wide.err" || bad "no refusal naming the limit: $(cat "$work/wide.err")"
ls "$work/wide"/rank_*.c >/dev/null 2>&1 && bad "rank programs were written past the limit"

[ $fail = 0 ] && echo "clock: same bytes under a 1000 s/reading clock; --search-budget warns; trace cut at 200000 events; 2048-rank programs refused"
exit $fail
