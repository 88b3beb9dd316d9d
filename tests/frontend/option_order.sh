#!/bin/bash
# Options before or after the arguments, in every tool (GNU getopt_long's
# permutation; argparse's intermixed parsing), `--` before an argument that
# starts with '-', and a bad option still a usage error (exit 2) that names it.
# usage: option_order.sh HEXIC HEXIC_CKPT HEXIC_SHARD SOURCE_DIR WORK_DIR
set -u
hexic=$1; ckpt=$2; shard=$3; src=$4; work=$5
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
# expect STATUS PATTERN COMMAND...: exit STATUS and PATTERN (grep -E) in the output
expect() {
  local status=$1 pattern=$2 rc=0
  shift 2
  "$@" > out.txt 2>&1 || rc=$?
  if [ $rc != "$status" ] || { [ -n "$pattern" ] && ! grep -qE -- "$pattern" out.txt; }; then
    fail "$* (exit $rc, wanted $status and /$pattern/):"; sed 's/^/  | /' out.txt
  fi
}
rm -rf "$work"; mkdir -p "$work"; cd "$work" || exit 1
tiny=$src/examples/models/tiny.hx; cpu1=$src/examples/clusters/cpu1.hx

# hexic-ckpt: the issue's command, options first. A folder without
# checkpoints: the export runs and says so (exit 1), no usage error.
mkdir empty
expect 1 "^hexic-ckpt: error: .*empty" "$ckpt" export --format safetensors empty -o out.safetensors
expect 1 "^hexic-ckpt: error: .*empty" "$ckpt" export -o out.safetensors --dtype bf16 empty --step 3
expect 1 "^hexic-ckpt: error: .*-dash" "$ckpt" info -- -dash
expect 2 "^hexic-ckpt: unknown option '--frob'" "$ckpt" export --frob empty -o out.safetensors
expect 2 "^hexic-ckpt: --format needs a value" "$ckpt" export empty -o out.safetensors --format
expect 2 "^hexic-ckpt: a subcommand takes one argument, not 'b' too" "$ckpt" info a b
expect 2 "^hexic-ckpt: a subcommand takes an argument" "$ckpt" export -o out.safetensors
[ -e out.safetensors ] && fail "hexic-ckpt wrote out.safetensors"

# hexic-shard: --help anywhere, -- before a file named -in, bad options named
printf 'hello' > -in
expect 2 "^usage: hexic-shard" "$shard" -- -in
expect 0 "^usage: hexic-shard" "$shard" a b --help
expect 0 "wrote 5 tokens" "$shard" -- -in in.bin
expect 2 "^hexic-shard: unknown option '-x'" "$shard" -x -in in.bin
expect 2 "^usage: hexic-shard" "$shard" only-one

# hexic and hexic simulate
expect 0 "" "$hexic" "$tiny" --check "$cpu1"
expect 0 "" "$hexic" "$tiny" "$cpu1" -o plan
expect 0 "^usage: hexic simulate" "$hexic" simulate plan/plan.json "$tiny" --help
expect 0 "iteration" "$hexic" simulate -- plan/plan.json "$tiny" "$cpu1"
expect 2 "^hexic: error: unknown option '--frob'" "$hexic" simulate plan/plan.json --frob "$tiny" "$cpu1"
expect 2 "^hexic: error: simulate takes a plan and the model and cluster files" "$hexic" simulate plan/plan.json

# hexic-tokenize: INPUTs before and after the options (argparse's intermixed parsing)
python3 - "$src/rtlib/tools/hexic-tokenize.py" <<'PY' || fail "hexic-tokenize: INPUTs around the options"
import importlib.util, sys
spec = importlib.util.spec_from_file_location("tok", sys.argv[1])
tok = importlib.util.module_from_spec(spec)
spec.loader.exec_module(tok)
a = tok.parse_args(["a.txt", "-t", "tok.json", "--jsonl", "-o", "out", "b.txt"])
assert (a.inputs, a.tokenizer, a.output, a.format) == (["a.txt", "b.txt"], "tok.json", "out", "jsonl"), a
PY
[ $fails = 0 ] && echo "ok (options before and after the arguments in hexic, hexic simulate, hexic-ckpt, hexic-shard, hexic-tokenize)"
exit $((fails > 0))
