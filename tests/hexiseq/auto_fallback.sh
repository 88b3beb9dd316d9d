#!/bin/sh
# `auto` falls back to HexiSeq when no symmetric shape is legal and the
# HexiScale search finds nothing that fits (tests/hexiseq/six-long.hx):
# it used to stop with "no plan fits" although --strategy=hexiseq plans it.
# usage: auto_fallback.sh HEXIC SOURCE_DIR WORK_DIR
set -eu
hexic=$1 src=$2 work=$3
rm -rf "$work" && mkdir -p "$work"
if ! "$hexic" "$src/examples/models/tiny-long.hx" "$src/tests/hexiseq/six-long.hx" \
    -o "$work/out" >"$work/log" 2>&1; then
  cat "$work/log"; echo "FAIL: auto found no plan"; exit 1
fi
grep -q '"kind": "cp_ring"' "$work/out/plan.json" ||
  { cat "$work/log"; echo "FAIL: the plan splits no sequence"; exit 1; }
ls "$work/out"/rank_0005.c >/dev/null
echo "ok: auto planned split sequences over 6 devices"
# ... and only then: a plan that fails for memory while symmetric shapes are
# legal says so once, without a HexiSeq layout message beside it
"$hexic" "$src/examples/models/llama2-70b.hx" "$src/examples/clusters/four-4090.hx" \
  >"$work/70b.log" 2>&1 && { echo "FAIL: 70B on four 4090s planned"; exit 1; }
if grep -q "context x head" "$work/70b.log"; then
  cat "$work/70b.log"; echo "FAIL: a HexiSeq message on a plan that keeps sequences whole"; exit 1
fi
echo "ok: 70B on four 4090s: $(grep -c error "$work/70b.log") error line"
# `auto` falls back to HexiSeq too when symmetric shapes are legal but none
# fits (issue 25 item 6): tiny-long in bf16 on cpu8-long stopped with "no plan
# fits in memory: needs at least 0.9 MiB more on mid:1" while
# --strategy=hexiseq plans and trains it
sed 's/precision = fp32/precision = bf16/' "$src/examples/models/tiny-long.hx" >"$work/bf16.hx"
grep -q 'precision = bf16' "$work/bf16.hx"
if ! "$hexic" "$work/bf16.hx" "$src/examples/clusters/cpu8-long.hx" -o "$work/bf16" \
    >"$work/bf16.log" 2>&1; then
  cat "$work/bf16.log"; echo "FAIL: auto found no plan for tiny-long in bf16 on cpu8-long"; exit 1
fi
grep -q '"kind": "cp_ring"' "$work/bf16/plan.json" ||
  { cat "$work/bf16.log"; echo "FAIL: the bf16 plan splits no sequence"; exit 1; }
echo "ok: auto planned tiny-long in bf16 on cpu8-long by splitting sequences"
# The HexiSeq plan carries one sequence per micro-batch: a micro_batch of 2
# used to be dropped without a word; now a warning points at it
sed 's/global_batch = 4/global_batch = 4; micro_batch = 2/' \
  "$src/examples/models/tiny-long.hx" >"$work/mb2.hx"
grep -q 'micro_batch = 2' "$work/mb2.hx"
"$hexic" "$work/mb2.hx" "$src/examples/clusters/cpu8-long.hx" >"$work/mb2.log" 2>&1 ||
  { cat "$work/mb2.log"; echo "FAIL: tiny-long with micro_batch = 2 not planned"; exit 1; }
grep -q "^$work/mb2.hx:12:35: warning: 'micro_batch' (2) is not used" "$work/mb2.log" ||
  { cat "$work/mb2.log"; echo "FAIL: no warning located at micro_batch = 2"; exit 1; }
# ... and none when the plan keeps sequences whole and honours it
sed 's/global_batch = \([0-9]*\)/global_batch = \1; micro_batch = 2/' \
  "$src/examples/models/tiny.hx" >"$work/tiny-mb2.hx"
grep -q 'micro_batch = 2' "$work/tiny-mb2.hx"
"$hexic" "$work/tiny-mb2.hx" "$src/examples/clusters/cpu8.hx" >"$work/tiny-mb2.log" 2>&1 ||
  { cat "$work/tiny-mb2.log"; echo "FAIL: tiny with micro_batch = 2 not planned"; exit 1; }
if grep -q "micro_batch" "$work/tiny-mb2.log"; then
  cat "$work/tiny-mb2.log"; echo "FAIL: a micro_batch warning on a plan that keeps sequences whole"; exit 1
fi
echo "ok: micro_batch = 2 on a HexiSeq plan warns at its place"
