#!/usr/bin/env bash
# hexic-shard end to end: usage, errors, a round trip through the reader,
# and byte-identical output for the same input.
#   run_shard_tool.sh HEXIC_SHARD RT_SHARD_CHECK WORKDIR
set -u
shard=$1 check=$2 work=$3
rm -rf "$work" && mkdir -p "$work"
fail() { echo "FAIL: $*"; exit 1; }

"$shard" >"$work/out" 2>&1 && fail "no arguments accepted"
grep -q "usage: hexic-shard INPUT OUTPUT" "$work/out" || fail "no usage text"
"$shard" --help | grep -q "vocab 256" || fail "--help"

"$shard" "$work/missing.txt" "$work/x.bin" 2>"$work/err" && fail "missing input accepted"
grep -q "missing.txt: cannot open" "$work/err" || fail "missing input: $(cat "$work/err")"
: >"$work/empty.txt"
"$shard" "$work/empty.txt" "$work/x.bin" 2>"$work/err" && fail "empty input accepted"
grep -q "is empty" "$work/err" || fail "empty input: $(cat "$work/err")"

# Text with every kind of byte: ASCII, UTF-8, a NUL, 0xff.
{ printf 'The quick brown fox jumps over the lazy dog.\n'; printf 'caf\xc3\xa9 \x00 \xff end\n'
  for i in $(seq 1 200); do echo "line $i of the tiny corpus"; done; } >"$work/text.txt"
"$shard" "$work/text.txt" "$work/a.bin" >"$work/out" || fail "shard failed"
grep -q "wrote $(wc -c <"$work/text.txt") tokens" "$work/out" || fail "summary: $(cat "$work/out")"
"$check" "$work/text.txt" "$work/a.bin" || fail "round trip"
"$shard" - "$work/b.bin" <"$work/text.txt" >/dev/null || fail "stdin input"
cmp -s "$work/a.bin" "$work/b.bin" || fail "output differs between runs"

"$shard" "$work/text.txt" "$work/no-such-dir/x.bin" 2>"$work/err" && fail "unwritable output accepted"
grep -q "cannot create" "$work/err" || fail "unwritable output: $(cat "$work/err")"
rm -rf "$work"
echo "ok (hexic-shard)"
