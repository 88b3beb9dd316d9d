#!/usr/bin/env bash
# The worked example of docs/data.md, run as it is (examples/hf/run.sh) with
# 8 training steps on the tree's docs/*.md: a tokenizer trained, shards, a
# model trained with validation, exported, loaded by transformers, whose loss
# on hexic's validation batches is hexic's within 1e-5 relative, and which
# generates. A WORK folder that exists is refused and left as it was.
# Exit 77 (skipped) without Python's tokenizers, torch or transformers.
#   run_example.sh WORK SRC HEXIC
set -u
work=$1 src=$2 hexic=$3
fail() { echo "FAIL: $*"; exit 1; }
rm -rf "$work" && mkdir -p "$work/text" && cd "$work" || fail "cannot use $work"
cp "$src"/docs/*.md text/

HEXIC_BIN=$(dirname "$hexic") bash "$src/examples/hf/run.sh" text run 8 >run.log 2>&1
status=$?
[ $status = 77 ] && { cat run.log; exit 77; }
[ $status = 0 ] || { cat run.log; fail "examples/hf/run.sh: exit $status"; }
[ "$(grep -c '^step [0-9]*/8 | loss' run.log)" = 8 ] || { cat run.log; fail "not 8 training steps"; }
# --val-every 2 with 8 steps: after steps 2, 4, 6 and 8
[ "$(grep -c '^val step [2468]/8 | loss [0-9.]* | batches 2 | tokens 4096$' run.log)" = 4 ] ||
  { cat run.log; fail "not 4 validation lines"; }
for f in config.json model.safetensors tokenizer.json tokenizer_config.json; do
  [ -f "run/hf/$f" ] || fail "the Hugging Face folder has no $f"
done
line=$(grep '^validation loss: transformers' run.log) || { cat run.log; fail "no transformers validation loss"; }
echo "$line" | awk '{ t = $4 + 0; h = $6 + 0; r = (t - h) / h; if (r < 0) r = -r
                      exit !(t > 0 && h > 0 && r <= 1e-5) }' ||
  { cat run.log; fail "transformers' validation loss is not hexic's: $line"; }
grep -q "^continued:  '..*'$" run.log || { cat run.log; fail "transformers generated nothing"; }

# an existing WORK folder is refused, its files kept
sum=$(cksum <run/hf/model.safetensors)
HEXIC_BIN=$(dirname "$hexic") bash "$src/examples/hf/run.sh" text run 8 >again.log 2>&1 &&
  fail "run.sh wrote into an existing folder"
grep -qx "run.sh: run exists: refusing to write into it (pick a new folder)" again.log ||
  { cat again.log; fail "an existing folder: wrong message"; }
[ "$(cksum <run/hf/model.safetensors)" = "$sum" ] || fail "an existing folder was changed"
echo "  $line"
echo "  $(grep '^continued:' run.log)"
rm -rf "$work"
echo "ok (examples/hf/run.sh: text -> shards -> training -> export -> transformers)"
