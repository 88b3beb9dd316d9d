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
