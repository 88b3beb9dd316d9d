#!/usr/bin/env bash
# hexic trains on hexic-tokenize's shards (issue 27, item 2): a byte-level
# BPE's uint16 shard and a 70000-word vocabulary's uint32 (version 7) shard,
# each named by the train block's `data`, two steps on one CPU rank; the
# first loss is ln(vocab) within 0.3 (freshly initialised weights guess
# uniformly), and a model whose vocab is smaller than the shard's largest
# token is refused naming the shard. Exit 77 without Python's `tokenizers`.
#   run_train.sh WORK SRC HEXIC
set -u
work=$1 src=$2 hexic=$3
fail() { echo "FAIL: $*"; exit 1; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
rm -rf "$work" && mkdir -p "$work" && cd "$work" || fail "cannot use $work"

python3 "$src/tests/tokenize/tokenize_check.py" shards "$src/rtlib/tools/hexic-tokenize.py" \
  "$work/shards" >shards.log 2>&1
status=$?
[ $status = 77 ] && { cat shards.log; exit 77; }
[ $status = 0 ] || { cat shards.log; fail "tokenizing the shards"; }

# plan NAME VOCAB SHARD: the tiny model's shape, two layers, on one CPU rank.
plan() {
  cat >"$1.hx" <<EOF
model "$1" {
  layers = 2; hidden = 64; ffn = 176; heads = 4; kv_heads = 2
  vocab = $2; seq_len = 32
}
train {
  global_batch = 4
  precision = fp32
  lr = 1e-3; steps = 2; seed = 1
  data = "$3"
}
EOF
  "$hexic" "$1.hx" "$src/examples/clusters/cpu1.hx" --target=cpu -o "$1" >"$1.plan.log" 2>&1 ||
    { cat "$1.plan.log"; fail "hexic $1.hx"; }
  # the runtime library is the same for every plan: built once, copied
  if [ -f lib/libhexic.a ]; then cp -rp lib/obj lib/libhexic.a "$1"/; fi
  make -s -C "$1" -j2 >"$1.make.log" 2>&1 || { cat "$1.make.log"; fail "make in $1"; }
  [ -f lib/libhexic.a ] || { mkdir -p lib && cp -rp "$1"/obj "$1"/libhexic.a lib/; }
}

# trains NAME VOCAB WIDTH: two finite steps, the first loss near ln(VOCAB).
trains() {
  "$1/launch.sh" --steps 2 --checkpoint-dir "$work/$1.ck" >"$1.log" 2>&1 ||
    { cat "$1.log"; fail "$1: training failed"; }
  grep -q "hexic: data: llm.c shard (uint$3 tokens) $work/shards/$1.train.bin" "$1.log" ||
    { cat "$1.log"; fail "$1: the shard was not read as uint$3"; }
  awk -v v="$2" '/^step [0-9]+\/2 \| loss/ { n++; l = $5; if (n == 1) first = l }
       END { d = first - log(v); if (d < 0) d = -d
             exit !(n == 2 && l == l + 0 && d < 0.3) }' "$1.log" ||
    { cat "$1.log"; fail "$1: not two steps with a first loss near ln($2)"; }
  echo "  $1: vocab $2, uint$3 shard: $(grep -m1 '^step 1/2' "$1.log" | cut -d'|' -f2) (ln $2 = $(awk -v v="$2" 'BEGIN { printf "%.3f", log(v) }'))"
}

plan bpe 300 "$work/shards/bpe.train.bin"
trains bpe 300 16
plan wide 70000 "$work/shards/wide.train.bin"
trains wide 70000 32

# A vocab below the shard's tokens (ids up to 69999) is refused before step 1.
plan narrow 65536 "$work/shards/wide.train.bin"
narrow/launch.sh --steps 2 --checkpoint-dir "$work/narrow.ck" >narrow.log 2>&1 &&
  fail "a model of vocab 65536 trained on tokens up to 69999"
grep -q "error: $work/shards/wide.train.bin: token 6[5-9][0-9]* at position [0-9]* is >= vocab 65536" narrow.log ||
  { cat narrow.log; fail "vocab 65536: no message naming the shard and a token past 65535"; }
echo "  vocab 65536 on the uint32 shard: refused, $(grep -m1 -o 'wide.train.bin: token.*' narrow.log)"
rm -rf "$work"
echo "ok (hexic trains on hexic-tokenize's shards)"
