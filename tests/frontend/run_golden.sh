#!/usr/bin/env bash
# Golden test of one .hx input against its expected output.
#   run_golden.sh HEXIC MODE FILE     (FILE relative to the repository root)
# MODE diag: `hexic --check FILE` must exit 1 and its stderr equal FILE.err.
# MODE ir:   `hexic --print-after=cluster-table FILE` must exit 0, its stdout
#            equal FILE.dump and its stderr (warnings) equal FILE.err.
# MODE ast:  as ir with --print-after=parse into FILE.ast.
# UPDATE=1 rewrites the expected files from the current output instead.
# FILE.args, when present, holds more options for hexic (e.g. --target=cuda).
set -u
hexic=$1 mode=$2 file=$3
cd "$(dirname "$0")/../.." || exit 2
base=${file%.hx}
out=$(mktemp) err=$(mktemp)
trap 'rm -f "$out" "$err"' EXIT

case $mode in
  diag) args=(--check) want_rc=1 stdout_file= ;;
  ir) args=(--print-after=cluster-table) want_rc=0 stdout_file=$base.dump ;;
  ast) args=(--print-after=parse) want_rc=0 stdout_file=$base.ast ;;
  *) echo "unknown mode $mode" >&2; exit 2 ;;
esac
[ -f "$base.args" ] && read -r -a extra <"$base.args" && args+=("${extra[@]}")
"$hexic" "${args[@]}" "$file" >"$out" 2>"$err"
rc=$?

if [ "${UPDATE:-0}" = 1 ]; then
  [ -n "$stdout_file" ] && cp "$out" "$stdout_file"
  if [ -s "$err" ] || [ "$mode" = diag ]; then cp "$err" "$base.err"; else rm -f "$base.err"; fi
fi

status=0
if [ "$rc" != "$want_rc" ]; then
  echo "FAIL: $file: exit code $rc, expected $want_rc"; cat "$err"; status=1
fi
if [ -n "$stdout_file" ] && ! diff -u "$stdout_file" "$out"; then
  echo "FAIL: $file: stdout differs from $stdout_file"; status=1
fi
expected_err=/dev/null
[ -f "$base.err" ] && expected_err=$base.err
if ! diff -u "$expected_err" "$err"; then
  echo "FAIL: $file: stderr differs from $expected_err"; status=1
fi
if [ "$mode" = diag ] && ! grep -qE '^[^ :]+:[0-9]+:[0-9]+: error: ' "$err"; then
  echo "FAIL: $file: no located 'file:line:col: error:' diagnostic"; status=1
fi
exit $status
