#!/usr/bin/env bash
# hexic-ckpt and hexic-shard facing hostile files (issue 24, items 7 and 12):
#   hostile_files.sh HEXIC_CKPT HEXIC_SHARD HEXIC SRCDIR WORKDIR
# - a FIFO or /dev/zero as the safetensors file, a shard of an index, the
#   index, config.json, or hexic-shard's input is refused by its kind (a FIFO
#   blocked open() forever: `timeout` turns a hang into a failure);
# - info shows a tensor name's control characters escaped;
# - import-hf: a config path with a newline stays inside the .hx's comment,
#   rope_theta 123456789012.5 is written exactly, and hexic reads the .hx;
#   attention_bias "yes" is refused.
set -uo pipefail
ck=$1 shard=$2 hexic=$3 src=$4 work=$5
rm -rf "$work" && mkdir -p "$work" && cd "$work" || exit 1
fail() { echo "FAIL: $*" >&2; exit 1; }
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0}

# expect_refused WHAT KIND CMD...: exits 1 within 20 s, naming KIND.
expect_refused() {
  local what=$1 kind=$2
  shift 2
  timeout 20 "$@" >out.txt 2>&1
  local rc=$?
  [ $rc = 124 ] && fail "$what: hung (killed after 20 s)"
  [ $rc = 1 ] && grep -q "$kind, not a regular file: refusing to read it" out.txt ||
    { cat out.txt; fail "$what: exit $rc, not refused as $kind"; }
}

cp "$src/tests/ckpt/tiny6-config.json" config.json
mkfifo pipe.safetensors pipe.json shard-pipe.safetensors
printf '{"weight_map": {"model.embed_tokens.weight": "shard-pipe.safetensors"}}' >model.safetensors.index.json
ln -s /dev/zero zero.safetensors
for special in pipe.safetensors zero.safetensors; do
  kind="is a FIFO" && [ "$special" = zero.safetensors ] && kind="is a character device"
  expect_refused "info $special" "$kind" "$ck" info "$special"
  expect_refused "hexic-shard $special" "$kind" "$shard" "$special" out.bin
done
expect_refused "import of a FIFO" "is a FIFO" "$ck" import pipe.safetensors -o a.safetensors
expect_refused "import of a FIFO shard" "is a FIFO" "$ck" import model.safetensors.index.json -o b.safetensors
mkfifo fifo.index.json
expect_refused "import of a FIFO index" "is a FIFO" "$ck" import fifo.index.json -o c.safetensors
expect_refused "import-hf of a FIFO" "is a FIFO" "$ck" import-hf pipe.json
expect_refused "import-hf of /dev/zero" "is a character device" "$ck" import-hf /dev/zero
expect_refused "hexic-shard /dev/zero" "is a character device" "$shard" /dev/zero out.bin
expect_refused "import --config FIFO" "is a FIFO" "$ck" import x.safetensors --config pipe.json -o d.safetensors
ls ./*.safetensors.tmp a.safetensors b.safetensors 2>/dev/null && fail "a refused import wrote a file"

# info: a name holding ESC [ 2 J and a newline is shown escaped
python3 - <<'PY' || fail "python3 could not write the file"
import json, struct
h = json.dumps({"\u001b[2Jevil\n": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}}).encode()
open("esc.safetensors", "wb").write(struct.pack("<Q", len(h)) + h + bytes(4))
PY
"$ck" info esc.safetensors >info.txt 2>&1 || { cat info.txt; fail "info esc.safetensors"; }
LC_ALL=C grep -q $'\x1b' info.txt && fail "info printed a raw escape character"
grep -qF '  \x1b[2Jevil\x0a F32 [1]' info.txt || { cat info.txt; fail "info: the name not shown escaped"; }
# import's own messages show it escaped too (they printed it raw)
"$ck" import esc.safetensors --config config.json -o esc-out.safetensors >imp.txt 2>&1 &&
  fail "import took a tensor that is no parameter"
LC_ALL=C grep -q $'\x1b' imp.txt && { cat -v imp.txt; fail "import printed a raw escape character"; }
grep -qF "unexpected tensor '\x1b[2Jevil\x0a'" imp.txt || { cat imp.txt; fail "import: the name not shown escaped"; }

# import-hf: a path with a newline, an exact rope_theta, hexic reads the result
dir=$'conf\nmodel "x" {'
mkdir -p "$dir"
sed 's/"rope_theta": 10000.0/"rope_theta": 123456789012.5/' config.json >"$dir/config.json"
"$ck" import-hf "$dir/config.json" --name hostile -o hostile.hx >import.txt 2>&1 || { cat import.txt; fail "import-hf"; }
[ "$(grep -c '^model ' hostile.hx)" = 1 ] || { cat hostile.hx; fail "the config path's newline started a line of the .hx"; }
grep -qF '# Written by hexic-ckpt import-hf from conf\x0amodel "x" {/config.json.' hostile.hx ||
  { cat hostile.hx; fail "the path not escaped in the comment"; }
grep -q 'rope_theta = 123456789012.5;' hostile.hx || { cat hostile.hx; fail "rope_theta not exact"; }
# an integer rope_theta is written as one (it was 1e+04)
"$ck" import-hf config.json -o plain.hx >plain.txt 2>&1 || { cat plain.txt; fail "import-hf config.json"; }
grep -q 'rope_theta = 10000;' plain.hx || { cat plain.hx; fail "rope_theta 10000 not written as 10000"; }
cat hostile.hx "$src/tests/ckpt/train-block.hx" "$src/examples/clusters/case-study.hx" >all.hx
"$hexic" all.hx --print-after=model-stats >stats.txt 2>&1 || { cat stats.txt; fail "hexic refused the .hx import-hf wrote"; }
sed 's/"attention_bias": false/"attention_bias": "yes"/' config.json >yes.json
"$ck" import-hf yes.json >yes.txt 2>&1 && fail "attention_bias \"yes\" was read as no bias"
grep -q "attention_bias is not true, false or null" yes.txt || { cat yes.txt; fail "attention_bias: wrong message"; }
echo "  FIFOs and /dev/zero refused; names escaped; import-hf's .hx: $(grep rope_theta hostile.hx)"
