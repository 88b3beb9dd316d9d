#!/bin/sh
# optimizer_sharding = none reproduces the plans of hexic before ZeRO-1 (issue
# 16): each golden zero1_off.MODEL.CLUSTER.json is the plan.json hexic wrote
# before the sharding existed (commit bc3a906), with the line plan.json gained
# since, "train": {"optimizer_sharding": "none", "sequence_parallel": false}.
# Sequence parallelism is off here because hexic then ran none: the same
# plans, and only the TP ranks' peak_memory_bytes higher, as those plans
# priced TP activations divided by the degree although the runtime kept
# x, a, x1 and m whole. Since issue 25 every peak_memory_bytes is the rank's
# memory_by_kind plus the reserve, and plans the old, cruder fit check
# accepted but the runtime's buffers do not fit changed: hetero-32's dp=2
# plan (1.6 GiB short on g4090-3:3) became dp=1 over 24 devices, the case
# study's subset baseline tp=1 pp=2 became tp=2 pp=1, and tiny-long's token
# split follows the per-kind capacity on cpu8-long's 1546 MiB. UPDATE=1
# rewrites them from the current hexic (check the diff: only what a change
# of the cost model explains may differ from the old ones).
# usage: zero1_off.sh HEXIC SOURCE_DIR WORK_DIR
set -u
hexic=$1; src=$2; work=$3
here=$(cd "$(dirname "$0")" && pwd)
fail=0
rm -rf "$work"; mkdir -p "$work"
for golden in "$here"/zero1_off.*.json; do
  name=${golden#"$here"/zero1_off.}; name=${name%.json}
  model=${name%%.*}; cluster=${name#*.}
  sed 's/^train {/train {\n  optimizer_sharding = none\n  sequence_parallel = false/' \
    "$src/examples/models/$model.hx" > "$work/$model.hx"
  if ! "$hexic" "$work/$model.hx" "$src/examples/clusters/$cluster.hx" -o "$work/$name" \
       > /dev/null 2> "$work/$name.err"; then
    echo "FAIL: $name: hexic failed:"; cat "$work/$name.err"; fail=1; continue
  fi
  if [ "${UPDATE:-0}" = 1 ]; then cp "$work/$name/plan.json" "$golden"; fi
  if ! diff -u "$golden" "$work/$name/plan.json"; then
    echo "FAIL: $name: optimizer_sharding = none does not reproduce the plan before ZeRO-1"; fail=1
  fi
done
[ $fail -eq 0 ] && echo "ok (zero1 off: the plans before ZeRO-1, byte for byte)"
exit $fail
