#!/usr/bin/env bash
# The front end on large inputs (issue 10, item 8): duplicates thousands of
# lines apart are still found and pointed at with the previous definition,
# and repeated warnings of one kind stop at 20 with one summary line.
# (The time sema takes is measured by bench/frontend_bench.sh, not here.)
#   test_scale.sh HEXIC
set -u
hexic=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
bad() { echo "FAIL: $*"; cat "$tmp/err"; fail=1; }

model() {
  printf 'model "m" { layers = 2; hidden = 64; ffn = 128; heads = 4; vocab = 100; seq_len = 32 }\n'
  printf 'train { global_batch = 8 }\n'
}

# Line 3: gpu "X"; 5000 other GPU types; gpu "X" again on line 5004. Nodes
# "a", "b" and 2000 replicas of "c"; link "a" "b" on line 5008, 2000 links
# from "b" to the replicas, then the same pair again as "b" "a" on line 7009.
{
  model
  printf 'gpu "X" { tflops = 10; memory = 8 GiB }\n'
  for i in $(seq 5000); do printf 'gpu "G%d" { tflops = 10; memory = 8 GiB }\n' "$i"; done
  printf 'gpu "X" { tflops = 20; memory = 8 GiB }\n'
  printf 'node "a" { gpu = "X"; gpus = 1 }\n'
  printf 'node "b" { gpu = "X"; gpus = 1 }\n'
  printf 'node "c" { gpu = "X"; gpus = 1; replicas = 2000 }\n'
  printf 'link "a" "b" { bandwidth = 1 GB/s }\n'
  for i in $(seq 0 1999); do printf 'link "b" "c-%d" { bandwidth = 1 GB/s }\n' "$i"; done
  printf 'link "b" "a" { bandwidth = 2 GB/s }\n'
} >"$tmp/far.hx"
"$hexic" --check "$tmp/far.hx" >/dev/null 2>"$tmp/err"
rc=$?
[ "$rc" = 1 ] || bad "far-apart duplicates: exit $rc, expected 1"
grep -qx "$tmp/far.hx:5004:5: error: duplicate GPU type \"X\"" "$tmp/err" || bad "no duplicate GPU error at line 5004"
grep -qx "$tmp/far.hx:3:1: note: previous definition is here" "$tmp/err" || bad "no note at line 3"
grep -qx "$tmp/far.hx:7009:1: error: a second link between \"b\" and \"a\"" "$tmp/err" ||
  bad "no duplicate link error at line 7009"
grep -qx "$tmp/far.hx:5008:1: note: previous definition is here" "$tmp/err" || bad "no note at line 5008"
[ "$(grep -c ': error: ' "$tmp/err")" = 2 ] || bad "expected exactly two errors"

# 25 unused GPU types: 20 warnings, then one line for the other 5.
{
  model
  for i in $(seq 25); do printf 'gpu "U%d" { tflops = 10; memory = 8 GiB }\n' "$i"; done
  printf 'gpu "X" { tflops = 10; memory = 8 GiB }\n'
  printf 'node "n" { gpu = "X"; gpus = 2; bandwidth = 10 GB/s }\n'
} >"$tmp/unused.hx"
"$hexic" --check "$tmp/unused.hx" >/dev/null 2>"$tmp/err"
rc=$?
[ "$rc" = 0 ] || bad "unused GPU types: exit $rc, expected 0"
[ "$(grep -c 'warning: GPU type "U[0-9]*" is not used by any node' "$tmp/err")" = 20 ] ||
  bad "expected 20 unused-GPU warnings"
grep -qx "$tmp/unused.hx:22:1: warning: GPU type \"U20\" is not used by any node" "$tmp/err" ||
  bad "the 20th warning is not U20's"
grep -qx 'hexic: warning: 5 more warnings like this suppressed (GPU types no node uses)' "$tmp/err" ||
  bad "no summary line for the suppressed warnings"
[ "$(tail -n 1 "$tmp/err")" = 'hexic: warning: 5 more warnings like this suppressed (GPU types no node uses)' ] ||
  bad "the summary is not the last line"

[ $fail = 0 ] && echo "scale: far-apart duplicates found with their notes; warnings capped at 20 per kind"
exit $fail
