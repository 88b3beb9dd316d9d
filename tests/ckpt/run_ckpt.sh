#!/usr/bin/env bash
# Checkpoints that move between plans (issue 17). One mode per ctest entry:
#   run_ckpt.sh MODE WORKDIR SRCDIR HEXIC WEIGHTS_CMP FIXTURE
# reshard: tiny6 trains 12 steps on plan A (4 ranks, TP 2 + PP 2) with a
#   checkpoint at step 6; the step-12 checkpoint is removed, and plans B (3
#   ranks: PP 3+1 beside a whole pipeline), C (3 ranks, TP 3) and one rank
#   each resume from step 6, and so does hexic's HexiSeq plan for cpu8 (CP 2
#   x HP 2, 8 ranks): steps 7-12 print the uninterrupted run's losses
#   within 1e-5 and end with its weights within 1e-5. Another model's program
#   and a corrupt rank file are refused before training, by name.
# elastic: hexic plans tiny6 for two machines, trains with checkpoints; a
#   machine is lost, hexic plans again for the one left, and --resume
#   continues with the uninterrupted run's losses.
# replicated: emit_fixture's plan whose TP 3 and TP 4 stages replicate kv
#   heads (6 heads over 2) and one rank resume each other's checkpoints.
# hf: hexic-ckpt info, export (read by Python's safetensors; -o refusals),
#   import (one file, shards, F16/BF16 sources, hostile and damaged files)
#   and --init-from. gqa: the same round trips with GQA and tied embeddings.
# import_hf: a Llama-2-7B config.json, 6.74B parameters; refusals.
# owner: a folder of another run's checkpoints is refused before training.
# skipped: checkpoints --resume skips are never trained over or pruned; a
#   CRLF MANIFEST is read.
# integrity: every read path verifies what it reads (export --step N, a
#   damaged newest checkpoint named, an index re-signed after an edit refused
#   by tensor); the model line's rope_theta and norm_eps compared, an older
#   hexic's line without them resumed.
# export_many: export of a checkpoint of 1029 tensors completes.
set -uo pipefail
mode=$1 work=$2 src=$3 hexic=$4 wcmp=$5 fixture=$6
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
export HEXIC_TIMEOUT_S=${HEXIC_TIMEOUT_S:-20}
here=$src/tests/ckpt
tiny6=$src/tests/exec/models/tiny6.hx
# a clean folder: hexic-ckpt -o does not replace the files of an earlier run
rm -rf "$work" && mkdir -p "$work"
cd "$work" || exit 1
steps=12 every=6

fail() { echo "FAIL: $*" >&2; exit 1; }

# build DIR: make, the runtime library built once and copied
. "$src/tests/exec/build_lib.sh"
compile() { # NAME HEXIC-ARGS...
  local dir=$1
  shift
  rm -rf "$dir"
  "$hexic" "$@" --target=cpu -o "$dir" >"$dir.plan.txt" || fail "hexic $*"
  build "$dir"
}

# fixture NAME PLAN [flags]: emit_fixture's hand-built plan (tests/codegen/emit_fixture.c).
fixture() {
  local dir=$1
  shift
  rm -rf "$dir"
  "$fixture" "$dir" "$@" >/dev/null || fail "emit_fixture $*"
  build "$dir"
}


# train NAME DIR ARGS...: DIR/launch.sh ARGS, output in NAME.out, "STEP LOSS" in NAME.losses.
train() {
  local name=$1 dir=$2
  shift 2
  "$dir/launch.sh" --steps $steps "$@" >"$name.out" 2>&1 || { cat "$name.out"; fail "$name did not train"; }
  sed -n 's/^step \([0-9]*\)\/[0-9]* | loss \([0-9.]*\) .*/\1 \2/p' "$name.out" >"$name.losses"
}

# full DIR: the uninterrupted run with checkpoints at 6 and 12; then the
# step-12 one is removed so that resuming starts at step 6.
full() {
  rm -rf ck
  train full "$1" --checkpoint-dir ck --checkpoint-every $every --dump-weights "$PWD/full.w"
  [ "$(wc -l <full.losses)" -eq $steps ] || fail "the full run printed $(wc -l <full.losses) steps"
  [ -f ck/step_00000006/MANIFEST ] && [ -f ck/step_00000012/MANIFEST ] || fail "no checkpoints"
  rm -rf ck/step_00000012
}

# resume NAME DIR WHAT: DIR resumes a copy of ck; steps 7-12 only, the full
# run's losses and weights within 1e-5, read across plans.
resume() {
  local name=$1 dir=$2 what=$3
  rm -rf "ck.$name" && cp -r ck "ck.$name"
  train "$name" "$dir" --checkpoint-dir "ck.$name" --resume --dump-weights "$PWD/$name.w"
  grep -q "read its ranges of every tensor" "$name.out" ||
    { cat "$name.out"; fail "$what: not resumed across plans"; }
  [ "$(cut -d' ' -f1 "$name.losses" | tr '\n' ' ')" = "7 8 9 10 11 12 " ] ||
    { cat "$name.out"; fail "$what: did not run steps 7-12 exactly"; }
  awk 'NR == FNR { a[$1] = $2; next } { n++; r = (a[$1] - $2) / a[$1]; if (r < 0) r = -r
         if (r > 1e-5) bad++ } END { exit bad > 0 || n != 6 }' full.losses "$name.losses" ||
    { paste full.losses "$name.losses"; fail "$what: losses differ from the uninterrupted run"; }
  local cmp
  cmp=$("$wcmp" full.w "$name.w" 1e-5) || { echo "$cmp"; fail "$what: weights differ"; }
  echo "  $what: steps 7-12 within 1e-5 of the uninterrupted run; ${cmp#weights_cmp: }"
}

case "$mode" in
reshard)
  compile a "$tiny6" "$src/tests/exec/clusters/four.hx" --plan="$here/plans/a_tp2_pp2.json"
  compile b "$tiny6" "$here/clusters/three.hx" --plan="$here/plans/b_dp_pp.json"
  compile c "$tiny6" "$here/clusters/three.hx" --plan="$here/plans/c_tp3.json"
  compile one "$tiny6" "$src/examples/clusters/cpu1.hx"
  full a
  resume b b "plan A (TP 2 + PP 2, 4 ranks) -> plan B (PP 3+1 beside DP, 3 ranks)"
  resume c c "plan A -> plan C (TP 3, 3 ranks)"
  resume one one "plan A -> one rank"
  # HexiSeq: hexic's context/head-parallel plan of tiny6 for cpu8 (8 ranks,
  # CP 2 x HP 2 stages: every unit holds whole weights)
  compile seq "$tiny6" "$src/examples/clusters/cpu8.hx" --strategy=hexiseq
  grep -q '"cp": 2' seq/plan.json || fail "the hexiseq plan has no CP 2 stage: pick a cluster that does"
  resume seq seq "plan A -> HexiSeq ($(head -n 1 seq.plan.txt | cut -c7-60)..., CP 2 x HP 2, 8 ranks)"
  # Another model: tiny8 (hidden 64) refuses tiny6's checkpoint before step 1.
  compile other "$src/tests/exec/models/tiny8.hx" "$src/examples/clusters/cpu1.hx"
  rm -rf ck.other && cp -r ck ck.other
  other/launch.sh --steps $steps --checkpoint-dir ck.other --resume >other.out 2>&1 &&
    { cat other.out; fail "another model's checkpoint was accepted"; }
  grep -q "the checkpoint is of another model (layers 4 hidden 96 ffn 176 heads 6 kv_heads 6 vocab 256 tie_embeddings 0 rope_theta 10000 norm_eps 1e-05); this program trains layers 4 hidden 64" other.out ||
    { cat other.out; fail "another model: wrong message"; }
  grep -q "^step " other.out && fail "another model: training started"
  echo "  tiny8 refuses tiny6's checkpoint: $(grep -m1 'another model' other.out)"
  # A corrupt rank file of another plan: skipped, named, before step 1.
  rm -rf ck.bad && cp -r ck ck.bad
  printf 'X' | dd of=ck.bad/step_00000006/rank_0002.ckpt bs=1 seek=300 conv=notrunc 2>/dev/null
  b/launch.sh --steps $steps --checkpoint-dir ck.bad --resume >bad.out 2>&1
  grep -q "skipping checkpoint ck.bad/step_00000006: rank_0002.ckpt is corrupt" bad.out ||
    { cat bad.out; fail "a corrupt rank file was not named"; }
  grep -q "read its ranges" bad.out && fail "a corrupt checkpoint was loaded"
  echo "  a corrupt rank file is skipped by name"
  ;;
elastic)
  # Two machines; machine m1 is lost after the checkpoint at step 6.
  compile two "$tiny6" "$here/clusters/two-machines.hx"
  compile left "$tiny6" "$here/clusters/one-machine.hx"
  full two
  resume left left "$(head -n 1 two.plan.txt | cut -c1-60)... -> after losing m1: $(head -n 1 left.plan.txt | cut -c1-60)"
  ;;
hf)
  # hexic-ckpt and the Hugging Face formats on tiny6 (config tiny6-config.json).
  ck_tool=$(dirname "$hexic")/hexic-ckpt
  steps=6
  compile a "$tiny6" "$src/tests/exec/clusters/four.hx" --plan="$here/plans/a_tp2_pp2.json"
  compile one "$tiny6" "$src/examples/clusters/cpu1.hx"
  rm -rf ck
  train full a --checkpoint-dir ck --checkpoint-every 6 --dump-weights "$PWD/full.w"
  "$ck_tool" info ck >info.txt || fail "hexic-ckpt info"
  grep -q "step 6 of 6" info.txt && grep -q "rank_0003.ckpt: 20 tensors" info.txt &&
    grep -q "layers.3.wq \[96, 96\] rows \[48, 96) cols \[0, 96)" info.txt ||
    { cat info.txt; fail "hexic-ckpt info: wrong summary"; }
  "$ck_tool" export ck -o model.safetensors >export.txt || fail "hexic-ckpt export"
  # -o: an existing file only with --force; never a link, FIFO or directory,
  # nor into a checkpoint folder
  "$ck_tool" export ck -o model.safetensors >again.out 2>&1 && fail "export replaced a file without --force"
  grep -qx "hexic-ckpt: error: -o model.safetensors exists: refusing to replace it (add --force to, or pick another name)" again.out ||
    { cat again.out; fail "export over a file: wrong message"; }
  "$ck_tool" export ck -o model.safetensors --force >/dev/null || fail "export --force"
  rm -rf out.* && echo keep >out.target && ln -s out.target out.link && mkfifo out.fifo && mkdir out.dir
  for case in "link:a symbolic link" "fifo:a FIFO" "dir:a directory"; do
    name=${case%%:*}
    "$ck_tool" export ck -o "out.$name" --force >"out.$name.log" 2>&1
    status=$?
    [ $status -eq 1 ] && grep -qx "hexic-ckpt: error: -o out.$name is ${case#*:}, not a regular file: refusing to replace it" "out.$name.log" ||
      { cat "out.$name.log"; fail "export -o over $name: exit $status"; }
  done
  [ -L out.link ] && [ -p out.fifo ] && [ -d out.dir ] && [ "$(cat out.target)" = keep ] || fail "-o replaced a link, FIFO or directory"
  sum=$(cksum <ck/step_00000006/rank_0000.ckpt)
  for target in ck/step_00000006/rank_0000.ckpt ck/model.safetensors; do
    "$ck_tool" export ck -o "$target" --force >out.ck.log 2>&1 && fail "export wrote $target"
    grep -q "^hexic-ckpt: error: -o $target is inside the checkpoint folder .*/ck.*: refusing to write there" out.ck.log ||
      { cat out.ck.log; fail "export into the checkpoint folder: wrong message"; }
  done
  [ "$(cksum <ck/step_00000006/rank_0000.ckpt)" = "$sum" ] && [ ! -e ck/model.safetensors ] || fail "export wrote into the checkpoint folder"
  "$ck_tool" info ck >/dev/null || fail "the checkpoint is damaged after export -o into it"
  echo "  export -o: an existing file only with --force; a link, FIFO, directory or checkpoint folder refused"
  # another dtype is another config.json (torch_dtype): its own folder
  mkdir -p bf16 && "$ck_tool" export ck --format safetensors --dtype bf16 -o bf16/model-bf16.safetensors >/dev/null ||
    fail "hexic-ckpt export --dtype bf16"
  grep -q '"torch_dtype": "bfloat16"' bf16/config.json && grep -q '"torch_dtype": "float32"' config.json ||
    fail "export's config.json: torch_dtype"
  # the options before the folder (GNU order): the same files
  mkdir -p first && "$ck_tool" export --format safetensors --dtype bf16 ck -o first/model-bf16.safetensors \
    >/dev/null || fail "hexic-ckpt export --format safetensors --dtype bf16 ck -o OUT"
  cmp bf16/model-bf16.safetensors first/model-bf16.safetensors && cmp bf16/config.json first/config.json ||
    fail "export with the options first wrote other files"
  python3 "$here/st_check.py" exported model.safetensors bf16/model-bf16.safetensors full.w \
    "$here/tiny6-config.json" || fail "the export read by Python's safetensors"
  # import: one file, and the same as two shards with an index
  mkdir -p hf sharded && cp model.safetensors hf/ && cp "$here/tiny6-config.json" hf/config.json
  "$ck_tool" import hf/model.safetensors -o init.safetensors >import.txt || fail "hexic-ckpt import"
  "$ck_tool" import hf/model.safetensors -o init.safetensors >again.out 2>&1 && fail "import replaced a file without --force"
  grep -q "init.safetensors exists: refusing to replace it" again.out || { cat again.out; fail "import over a file: wrong message"; }
  python3 "$here/st_check.py" imported init.safetensors full.w || fail "import round trip"
  # half-precision sources: BF16 (hexic's export) and F16 (numpy's), read as the rounded values
  "$ck_tool" import bf16/model-bf16.safetensors --config hf/config.json -o init-bf16.safetensors \
    >/dev/null || fail "import of BF16"
  python3 "$here/st_check.py" imported init-bf16.safetensors full.w bf16 || fail "BF16 import"
  python3 "$here/st_check.py" to_f16 model.safetensors model-f16.safetensors || fail "to F16"
  "$ck_tool" import model-f16.safetensors --config hf/config.json -o init-f16.safetensors \
    >/dev/null || fail "import of F16"
  python3 "$here/st_check.py" imported init-f16.safetensors full.w f16 || fail "F16 import"
  python3 "$here/st_check.py" shard model.safetensors sharded || fail "sharding the export"
  "$ck_tool" import sharded/model.safetensors.index.json --config hf/config.json \
    -o init2.safetensors >/dev/null || fail "hexic-ckpt import of an index"
  cmp init.safetensors init2.safetensors || fail "the sharded import differs from the single file's"
  # a parameter in two shards is refused, not read from the first file that has it
  rm -rf twice twice.safetensors twice.safetensors.tmp && mkdir twice && cp sharded/* twice/
  dup=$(python3 "$here/st_check.py" twice twice) || fail "st_check.py twice"
  "$ck_tool" import twice/model.safetensors.index.json --config hf/config.json \
    -o twice.safetensors >twice.log 2>&1 && fail "a tensor in two shards was imported"
  grep -q "tensor '$dup' is in .*model-00001-of-00002.safetensors too" twice.log ||
    { cat twice.log; fail "a tensor in two shards: wrong message"; }
  [ ! -e twice.safetensors ] || fail "a tensor in two shards: a file was written"
  # --init-from: the TP 2 + PP 2 plan starts from the imported weights, bit for bit
  a/launch.sh --steps 0 --init-from init.safetensors --dump-weights "$PWD/init.w" >init.out 2>&1 ||
    { cat init.out; fail "--init-from"; }
  cmp full.w init.w || fail "--init-from did not start from the imported weights"
  one/launch.sh --steps 2 --init-from init.safetensors >cont.out 2>&1 || { cat cont.out; fail "training from imported weights"; }
  echo "  export -> import -> --init-from: the step-6 weights bit for bit on TP 2 + PP 2; $(grep -c '^step ' cont.out) steps trained on from them"
  # hostile files: exit 1, the file and the tensor named, nothing written
  mkdir -p bad && python3 "$here/st_check.py" hostile model.safetensors bad || fail "hostile files"
  for case in "truncated:truncated: 5 bytes, less than the header length's 8" \
    "beyond:the header length [0-9]* goes beyond the file" \
    "overlap:tensors 'model.layers.1.mlp.gate_proj.weight' and 'model.layers.1.mlp.up_proj.weight' overlap" \
    "dtype:tensor 'model.layers.0.self_attn.v_proj.weight' has dtype I32; hexic reads F32, BF16 and F16" \
    "missing:missing tensor 'model.layers.2.mlp.up_proj.weight' (\[176, 96\] for this config)"; do
    name=${case%%:*} want=${case#*:}
    rm -f out.safetensors out.safetensors.tmp
    "$ck_tool" import "bad/$name.safetensors" --config hf/config.json -o out.safetensors >"bad.$name.log" 2>&1
    status=$?
    [ $status -eq 1 ] || { cat "bad.$name.log"; fail "$name: exit $status, not 1"; }
    grep -q "bad/$name.safetensors: $want" "bad.$name.log" || { cat "bad.$name.log"; fail "$name: wrong message"; }
    [ ! -e out.safetensors ] && [ ! -e out.safetensors.tmp ] || fail "$name: a file was written"
    echo "  $name: $(cat "bad.$name.log")"
  done
  # damaged headers: hexic-ckpt info and import answer 0 or 1, never crash
  mkdir -p mut && python3 "$here/st_check.py" mutate model.safetensors mut 200 || fail "mutate"
  refused=0
  for f in mut/*.safetensors; do
    "$ck_tool" info "$f" >/dev/null 2>&1
    status=$?
    [ $status -le 1 ] || fail "hexic-ckpt info $f: exit $status"
    refused=$((refused + status))
    "$ck_tool" import "$f" --config hf/config.json -o mut/out.safetensors >/dev/null 2>&1
    [ $? -eq 1 ] && [ ! -e mut/out.safetensors ] || fail "hexic-ckpt import $f: not refused"
  done
  echo "  200 damaged headers: $refused refused by info, every one by import, no crash"
  # non-finite weights: a NaN in a Hugging Face file is not imported, an
  # infinity in a file of initial weights not trained from (it trained to
  # 'loss nan' with exit 0); the file, the tensor and the element named
  python3 -c '
import sys
import numpy as np
from safetensors import safe_open
from safetensors.numpy import load_file, save_file
def poison(src, dst, name, r, c, value):
    t = load_file(src)
    w = t[name].copy()
    w[r, c] = value
    t[name] = w
    save_file(t, dst, metadata=safe_open(src, "np").metadata())
poison(sys.argv[1], "bad/nan.safetensors", "model.layers.2.mlp.up_proj.weight", 3, 5, np.nan)
poison(sys.argv[2], "bad/inf-init.safetensors", "layers.1.wk", 50, 7, -np.inf)' \
    model.safetensors init.safetensors || fail "writing non-finite weights"
  "$ck_tool" import bad/nan.safetensors --config hf/config.json -o nan.safetensors >nan.out 2>&1 &&
    fail "a NaN weight was imported"
  grep -qx "hexic-ckpt: error: bad/nan.safetensors: tensor 'model.layers.2.mlp.up_proj.weight' holds NaN at element 293 (row 3, column 5): non-finite weights are refused" nan.out ||
    { cat nan.out; fail "a NaN weight: wrong message"; }
  [ ! -e nan.safetensors ] && [ ! -e nan.safetensors.tmp ] || fail "a NaN weight: a file was written"
  for prog in one a; do # the infinity read by the one rank, or by the TP rank holding row 50
    $prog/launch.sh --steps 1 --init-from bad/inf-init.safetensors >inf.out 2>&1 &&
      { cat inf.out; fail "$prog: --init-from took an infinite weight"; }
    grep -q "error: --init-from: bad/inf-init.safetensors: tensor 'layers.1.wk' holds an infinity at element 4807 (row 50, column 7): non-finite weights are refused" inf.out ||
      { cat inf.out; fail "$prog: an infinite weight: wrong message"; }
    grep -q "^step " inf.out && fail "$prog: an infinite weight: training started"
  done
  echo "  $(cat nan.out)"
  # a full disk (writes fail with EFBIG past 64 KiB): the reason, no OUT, no OUT.tmp,
  # no success line (the messages go through a pipe, which the limit does not cover)
  for cmd in "export ck" "import hf/model.safetensors"; do
    rm -f full.safetensors full.safetensors.tmp
    (trap '' XFSZ; ulimit -f 64; "$ck_tool" $cmd -o full.safetensors) 2>&1 | cat >full.out
    grep -qx "hexic-ckpt: error: -o full.safetensors: cannot write tensor '.*': File too large; nothing was written" full.out ||
      { cat full.out; fail "$cmd on a full disk: wrong message"; }
    [ "$(wc -l <full.out)" = 1 ] || { cat full.out; fail "$cmd on a full disk: said more than why"; }
    [ ! -e full.safetensors ] && [ ! -e full.safetensors.tmp ] || fail "$cmd on a full disk left a file"
  done
  echo "  a full disk: $(cat full.out)"
  one/launch.sh --steps 1 --init-from bad/missing.safetensors >badinit.out 2>&1 && fail "--init-from took a bad file"
  grep -q "no tensor 'tok_emb'" badinit.out || { cat badinit.out; fail "--init-from of an HF file: wrong message"; }
  # another model's weights: every tensor of this one is there, plus a layer more
  python3 -c '
import sys
from safetensors.numpy import load_file, save_file
t = load_file(sys.argv[1])
t["layers.6.wq"] = t["layers.0.wq"]
save_file(t, sys.argv[2])' init.safetensors bad/deeper.safetensors || fail "writing a deeper model's weights"
  one/launch.sh --steps 1 --init-from bad/deeper.safetensors >deeper.out 2>&1 &&
    fail "--init-from took another model's weights"
  grep -q "deeper.safetensors holds [0-9]* tensors where this model has [0-9]*" deeper.out ||
    { cat deeper.out; fail "--init-from of another model: wrong message"; }
  # another model of the same shapes (heads 3 / kv_heads 3 where tiny6 has 6 / 6): the model line
  python3 -c '
import sys
from safetensors import safe_open
from safetensors.numpy import load_file, save_file
meta = safe_open(sys.argv[1], "np").metadata()
meta["hexic_model"] = meta["hexic_model"].replace("heads 6 kv_heads 6", "heads 3 kv_heads 3")
save_file(load_file(sys.argv[1]), sys.argv[2], metadata=meta)' init.safetensors bad/heads3.safetensors ||
    fail "writing another head count's weights"
  one/launch.sh --steps 1 --init-from bad/heads3.safetensors >heads3.out 2>&1 &&
    { cat heads3.out; fail "--init-from took the weights of another head count"; }
  grep -q "error: --init-from: bad/heads3.safetensors holds the weights of another model (layers 4 hidden 96 ffn 176 heads 3 kv_heads 3 vocab 256 tie_embeddings 0 rope_theta 10000 norm_eps 1e-05); this program trains layers 4 hidden 96 ffn 176 heads 6 kv_heads 6 vocab 256 tie_embeddings 0 rope_theta 10000 norm_eps 1e-05" heads3.out ||
    { cat heads3.out; fail "--init-from of another head count: wrong message"; }
  grep -q "^step " heads3.out && fail "--init-from of another head count: training started"
  echo "  --init-from refuses another model's line: $(grep -o 'holds the weights.*' heads3.out | cut -c1-90)..."
  ;;
replicated)
  # 6 heads over 2 kv heads (emit_fixture --heads6): TP 3 and TP 4 stages
  # replicate kv heads over TP ranks, each holding copies of the same rows.
  # Their checkpoint resumes on one rank, and one rank's on them.
  fixture rep "2x2@1:3,4:2lr;4x1@3,4:4" --heads6
  fixture one6 "8x1@4" --heads6
  full rep
  resume one one6 "replicated kv heads (TP 3 + TP 2 beside TP 1 + TP 4, 10 ranks) -> one rank"
  full one6
  resume rep rep "one rank -> replicated kv heads (TP 3 + TP 2 beside TP 1 + TP 4)"
  ;;
gqa)
  # The same round trips on a second model: grouped-query attention (4 heads
  # over 2 kv heads, k_proj permuted by kv head) and tied embeddings (tok_emb
  # held by the first and the last stage; no lm_head in the export).
  ck_tool=$(dirname "$hexic")/hexic-ckpt
  gqa=$here/models/gqa-tied.hx
  compile a "$gqa" "$src/tests/exec/clusters/four.hx" --plan="$here/plans/a_tp2_pp2.json"
  compile c "$gqa" "$here/clusters/three.hx" --plan="$here/plans/b_dp_pp.json"
  compile one "$gqa" "$src/examples/clusters/cpu1.hx"
  full a
  resume c c "GQA + tied: plan A (TP 2 + PP 2) -> plan B (PP 3+1 beside DP)"
  resume one one "GQA + tied: plan A -> one rank"
  steps=12
  "$ck_tool" export ck -o model.safetensors >/dev/null || fail "hexic-ckpt export"
  mkdir -p bf16 && "$ck_tool" export ck --dtype bf16 -o bf16/model-bf16.safetensors >/dev/null || fail "export bf16"
  # the weights of step 6, the checkpoint left: one rank's resumed run at --steps 6 dumps them
  one/launch.sh --steps 6 --reschedule --checkpoint-dir ck --resume --dump-weights "$PWD/w6" >w6.out 2>&1 ||
    { cat w6.out; fail "step-6 weights"; }
  python3 "$here/st_check.py" exported model.safetensors bf16/model-bf16.safetensors w6 \
    "$here/gqa-tied-config.json" || fail "the GQA + tied export read by Python's safetensors"
  mkdir -p hf && cp model.safetensors hf/ && cp "$here/gqa-tied-config.json" hf/config.json
  "$ck_tool" import hf/model.safetensors -o init.safetensors >/dev/null || fail "import"
  a/launch.sh --steps 0 --init-from init.safetensors --dump-weights "$PWD/init.w" >init.out 2>&1 ||
    { cat init.out; fail "--init-from"; }
  cmp w6 init.w || fail "GQA + tied: export -> import -> --init-from is not bit-exact"
  # the export's folder as it is: config.json says tied (no lm_head), k_proj by kv head
  mkdir -p hfx && "$ck_tool" export ck -o hfx/model.safetensors >/dev/null || fail "export into hfx"
  grep -q '"tie_word_embeddings": true' hfx/config.json && grep -q '"num_key_value_heads": 2' hfx/config.json ||
    { cat hfx/config.json; fail "GQA + tied: export's config.json"; }
  a/launch.sh --steps 0 --init-from hfx --dump-weights "$PWD/folder.w" >folder.out 2>&1 ||
    { cat folder.out; fail "--init-from the GQA + tied export folder"; }
  cmp w6 folder.w || fail "GQA + tied: --init-from the export folder is not bit-exact"
  echo "  GQA + tied: export read by Python's safetensors; export -> import -> --init-from and --init-from the export folder on TP 2 + PP 2 bit-exact"
  ;;
import_hf)
  # A public config.json (Llama-2-7B's) gives the paper's parameter count
  # (6.74B) through hexic's own model statistics; other architectures are
  # refused by name.
  ck_tool=$(dirname "$hexic")/hexic-ckpt
  "$ck_tool" import-hf "$here/llama2-7b-config.json" --name llama2-7b -o l7.hx >l7.txt ||
    fail "import-hf"
  cat l7.hx "$here/train-block.hx" "$src/examples/clusters/case-study.hx" >l7-all.hx
  "$hexic" l7-all.hx --print-after=model-stats >stats.txt 2>&1 || { cat stats.txt; fail "hexic on l7.hx"; }
  grep -q "params_total 6738415616$" stats.txt || { grep params stats.txt; fail "not 6.74B parameters"; }
  grep -q "model llama2-7b: 6738415616 parameters (6.74B)" l7.txt || { cat l7.txt; fail "import-hf summary"; }
  "$ck_tool" import-hf "$here/llama2-7b-config.json" -o l7.hx >again.out 2>&1 && fail "import-hf replaced a file without --force"
  grep -q "l7.hx exists: refusing to replace it" again.out || { cat again.out; fail "import-hf over a file: wrong message"; }
  "$ck_tool" import-hf "$here/llama2-7b-config.json" --name llama2-7b -o l7.hx --force >/dev/null || fail "import-hf --force"
  # a full disk: no success line before the failure, no l7-full.hx, no .tmp
  (trap '' XFSZ; ulimit -f 0; "$ck_tool" import-hf "$here/llama2-7b-config.json" -o l7-full.hx) 2>&1 | cat >full.out
  grep -qx "hexic-ckpt: error: -o l7-full.hx: cannot write the model block: File too large; nothing was written" full.out ||
    { cat full.out; fail "import-hf on a full disk: wrong message"; }
  [ ! -e l7-full.hx ] && [ ! -e l7-full.hx.tmp ] || fail "import-hf on a full disk left a file"
  # Llama 3.2 1B's config.json (transformers 4 layout, rope_type llama3): its 1.24B parameters
  # (tied) and the scaling in the model block, which hexic compiles
  "$ck_tool" import-hf "$here/llama3.2-1b-config.json" --name llama3.2-1b -o l32.hx >l32.txt || fail "import-hf of Llama 3.2"
  grep -q "model llama3.2-1b: 1235814400 parameters (1.24B)" l32.txt || { cat l32.txt; fail "Llama 3.2 1B: not 1235814400 parameters"; }
  grep -q "rope_scaling = llama3; rope_factor = 32; rope_low_freq_factor = 1" l32.hx &&
    grep -q "rope_high_freq_factor = 4; rope_original_max_len = 8192" l32.hx || { cat l32.hx; fail "Llama 3.2 1B: the scaling"; }
  cat l32.hx "$here/train-block.hx" "$src/examples/clusters/case-study.hx" >l32-all.hx
  "$hexic" l32-all.hx --print-after=model-stats >l32.stats 2>&1 || { cat l32.stats; fail "hexic on l32.hx"; }
  grep -q "rope_scaling llama3 factor 32 low_freq_factor 1 high_freq_factor 4 original_max_len 8192" l32.stats ||
    { grep rope l32.stats; fail "Llama 3.2 1B: the IR lacks the scaling"; }
  sed 's/LlamaForCausalLM/GPT2LMHeadModel/' "$here/llama2-7b-config.json" >gpt2.json
  "$ck_tool" import-hf gpt2.json >gpt2.out 2>&1 && fail "a GPT-2 config was accepted"
  grep -q "architecture 'GPT2LMHeadModel' is not supported" gpt2.out || { cat gpt2.out; fail "gpt2: wrong message"; }
  sed 's/"rope_scaling": null/"rope_scaling": {"rope_type": "llama3", "factor": 8.0}/' \
    "$here/llama2-7b-config.json" >scaled.json
  "$ck_tool" import-hf scaled.json >scaled.out 2>&1 && fail "llama3 scaling without its figures was accepted"
  grep -qx "hexic-ckpt: error: scaled.json: rope_scaling.\"low_freq_factor\" is missing" scaled.out ||
    { cat scaled.out; fail "llama3 scaling without its figures: wrong message"; }
  # The command line: --help is no error; a wrong subcommand, option or
  # --step value is named (it said 'a subcommand takes an argument' and
  # 'unknown or incomplete option').
  "$ck_tool" --help >help.out 2>&1 && grep -q "^usage: hexic-ckpt" help.out || fail "--help"
  for bad in "frob:unknown subcommand 'frob'" "info ck --stp 3:unknown option '--stp'" \
    "info ck --step abc:--step wants a step number (0 or more), not 'abc'" "export ck -o:-o needs a value"; do
    # shellcheck disable=SC2086
    "$ck_tool" ${bad%%:*} >bad.out 2>&1
    [ $? = 2 ] && grep -qxF "hexic-ckpt: ${bad#*:}" bad.out || { cat bad.out; fail "hexic-ckpt ${bad%%:*}"; }
  done
  echo "  Llama-2-7B config.json: $(cat l7.txt); Llama 3.2 1B's: $(cat l32.txt); GPT-2 and llama3 RoPE scaling without its figures refused by name"
  ;;
owner)
  # Two runs sharing one checkpoint folder: tiny8's program refuses, before
  # step 1, the folder holding tiny6's checkpoints (naming the folder, both
  # models and the ways out) and leaves them as they were; tiny6 itself
  # re-runs and resumes there; --checkpoint-overwrite and a fresh folder work.
  compile one "$tiny6" "$src/examples/clusters/cpu1.hx"
  compile other "$src/tests/exec/models/tiny8.hx" "$src/examples/clusters/cpu1.hx"
  rm -rf shared fresh
  train a one --checkpoint-dir shared --checkpoint-every 6
  sums=$(cat shared/step_*/MANIFEST | cksum)
  other/launch.sh --steps $steps --checkpoint-dir shared --checkpoint-every 6 >b.out 2>&1 &&
    { cat b.out; fail "another model's run wrote into a folder of tiny6's checkpoints"; }
  grep -q "error: --checkpoint-dir 'shared' holds the checkpoints of another run (step_00000012: the checkpoint is of another model (layers 4 hidden 96 .*); this program trains layers 4 hidden 64 .*fresh --checkpoint-dir, or add --checkpoint-overwrite" b.out ||
    { cat b.out; fail "another run's folder: wrong message"; }
  grep -q "^step " b.out && fail "another run's folder: training started"
  [ "$(grep -c error b.out)" = 1 ] || { cat b.out; fail "another run's folder: not one line"; }
  [ "$(cat shared/step_*/MANIFEST | cksum)" = "$sums" ] || fail "tiny6's checkpoints were changed"
  train a2 one --checkpoint-dir shared --checkpoint-every 6
  train a3 one --checkpoint-dir shared --checkpoint-every 6 --resume
  grep -q "training already complete" a3.out || { cat a3.out; fail "tiny6 did not resume its own"; }
  train b2 other --checkpoint-dir fresh --checkpoint-every 6
  train b3 other --checkpoint-dir shared --checkpoint-every 6 --checkpoint-overwrite
  train b4 other --checkpoint-dir shared --checkpoint-every 6 --resume
  grep -q "training already complete" b4.out || { cat b4.out; fail "--checkpoint-overwrite: not tiny8's now"; }
  echo "  $(grep -o "error: .*" b.out | cut -c1-140)..."
  ;;
skipped)
  # Checkpoints that resume skips are never trained over: a CRLF MANIFEST is
  # read (its checksum holds over the LF text); when none verifies --resume
  # exits 1 naming each; a damaged one is neither written over by the steps a
  # run resumed from an older one would write (unless --checkpoint-overwrite)
  # nor pruned.
  compile one "$tiny6" "$src/examples/clusters/cpu1.hx"
  full one
  # CRLF line ends: resumed at step 6, steps 7-12 as the uninterrupted run
  rm -rf ck.crlf && cp -r ck ck.crlf && sed -i 's/$/\r/' ck.crlf/step_00000006/MANIFEST
  train crlf one --checkpoint-dir ck.crlf --resume
  grep -q "resuming at step 6 from ck.crlf" crlf.out || { cat crlf.out; fail "a CRLF MANIFEST was not read"; }
  [ "$(cut -d' ' -f1 crlf.losses | tr '\n' ' ')" = "7 8 9 10 11 12 " ] || { cat crlf.out; fail "CRLF: not steps 7-12"; }
  # none verifies: exit 1, each named, nothing trained or written
  train again one --checkpoint-dir ck --checkpoint-every 6
  damage() { printf 'Z' | dd of="$1/MANIFEST" bs=1 seek=40 conv=notrunc 2>/dev/null; }
  rm -rf ck.bad && cp -r ck ck.bad && damage ck.bad/step_00000006 && damage ck.bad/step_00000012
  sums=$(cat ck.bad/step_*/* | cksum)
  one/launch.sh --steps $steps --checkpoint-dir ck.bad --checkpoint-every 6 --resume >bad.out 2>&1 &&
    { cat bad.out; fail "--resume over damaged checkpoints exited 0"; }
  for s in 6 12; do
    grep -q "skipping checkpoint ck.bad/step_0000000*$s: MANIFEST is damaged" bad.out ||
      { cat bad.out; fail "step $s not named"; }
  done
  grep -q "error: --resume: none of the 2 checkpoints in 'ck.bad' verifies" bad.out || { cat bad.out; fail "none verifies: wrong message"; }
  grep -q "^step " bad.out && fail "none verifies: training started"
  [ "$(cat ck.bad/step_*/* | cksum)" = "$sums" ] || fail "none verifies: the checkpoints were changed"
  # the newer one damaged: resuming from step 6 would write step 12 over it
  rm -rf ck.mix && cp -r ck ck.mix && damage ck.mix/step_00000012
  sums=$(cat ck.mix/step_00000012/* | cksum)
  one/launch.sh --steps $steps --checkpoint-dir ck.mix --checkpoint-every 6 --resume >mix.out 2>&1 &&
    { cat mix.out; fail "a damaged step-12 checkpoint was trained over"; }
  grep -q "error: --checkpoint-dir 'ck.mix': checkpoint step_00000012 does not verify (MANIFEST is damaged (checksum or syntax)), and this run would write its step 12 checkpoint over it. Repair it or move it away, or add --checkpoint-overwrite" mix.out ||
    { cat mix.out; fail "a damaged newer checkpoint: wrong message"; }
  grep -q "^step " mix.out && fail "a damaged newer checkpoint: training started"
  [ "$(cat ck.mix/step_00000012/* | cksum)" = "$sums" ] || fail "the damaged step-12 checkpoint was changed"
  # --checkpoint-dir without --checkpoint-every writes the last step's (12)
  # checkpoint: refused alike
  one/launch.sh --steps $steps --checkpoint-dir ck.mix --resume >mix2.out 2>&1 &&
    { cat mix2.out; fail "the last step's checkpoint was written over a damaged one"; }
  grep -q "error: --checkpoint-dir 'ck.mix': checkpoint step_00000012 does not verify" mix2.out ||
    { cat mix2.out; fail "a damaged last-step checkpoint: wrong message"; }
  [ "$(cat ck.mix/step_00000012/* | cksum)" = "$sums" ] || fail "the damaged checkpoint was changed"
  train mix3 one --checkpoint-dir ck.mix --checkpoint-every 6 --resume --checkpoint-overwrite
  "$(dirname "$hexic")/hexic-ckpt" info ck.mix --step 12 >/dev/null || fail "--checkpoint-overwrite did not write step 12"
  # nor pruned by the checkpoints of steps 10 and 15 after it
  rm -rf ck.old && cp -r ck ck.old && damage ck.old/step_00000012
  sums=$(cat ck.old/step_00000012/* | cksum)
  train old one --checkpoint-dir ck.old --checkpoint-every 5 --resume --steps 15 --reschedule
  [ -f ck.old/step_00000015/MANIFEST ] || fail "no step-15 checkpoint"
  [ "$(cat ck.old/step_00000012/* 2>/dev/null | cksum)" = "$sums" ] || fail "the damaged step-12 checkpoint was pruned"
  echo "  $(grep -o "error: --resume: .*" bad.out | cut -c1-100)..."
  ;;
integrity)
  # What a read path takes is what was written (issue 24). export --step N
  # verifies the rank files' checksums; a plain export names a newest
  # checkpoint that does not verify (and the --step of the one that does)
  # instead of exporting an older one; a MANIFEST re-signed after its index
  # was edited (wq's and wo's offsets swapped, an offset shifted) is refused
  # by resume under another plan and this one, export and info, naming the
  # tensor: the rank files' own identities are compared with the index. The
  # model line carries rope_theta and norm_eps: a checkpoint or imported
  # weights of another value is refused with both lines; an older hexic's
  # line (without them) still resumes across plans, with a note.
  ck_tool=$(dirname "$hexic")/hexic-ckpt
  edit() { python3 "$here/manifest_edit.py" "$@" || fail "manifest_edit.py $*"; }
  flip() { # FILE OFFSET: one bit of one byte
    python3 -c 'import sys
p, o = sys.argv[1], int(sys.argv[2])
b = bytearray(open(p, "rb").read()); b[o] ^= 1; open(p, "wb").write(b)' "$1" "$2" || fail "flip $1"
  }
  compile one "$tiny6" "$src/examples/clusters/cpu1.hx"
  compile c "$tiny6" "$here/clusters/three.hx" --plan="$here/plans/c_tp3.json"
  rm -rf ck ck.both
  train full one --checkpoint-dir ck.both --checkpoint-every 6 --dump-weights "$PWD/full.w"
  grep -qx "model layers 4 hidden 96 ffn 176 heads 6 kv_heads 6 vocab 256 tie_embeddings 0 rope_theta 10000 norm_eps 1e-05" \
    ck.both/step_00000006/MANIFEST || { cat ck.both/step_00000006/MANIFEST; fail "the model line lacks rope_theta or norm_eps"; }
  cp -r ck.both ck && rm -rf ck/step_00000012 # resume() resumes ck: step 6
  # export --step N: one flipped bit of a parameter
  rm -rf ck.bit && cp -r ck.both ck.bit && flip ck.bit/step_00000006/rank_0000.ckpt 5000
  "$ck_tool" export ck.bit --step 6 -o bit.safetensors >bit.out 2>&1 &&
    { cat bit.out; fail "export --step 6 exported a flipped bit"; }
  grep -q "^hexic-ckpt: error: ck.bit/step_00000006 does not verify: rank_0000.ckpt is corrupt" bit.out ||
    { cat bit.out; fail "export --step 6 of a flipped bit: wrong message"; }
  [ ! -e bit.safetensors ] && [ ! -e bit.safetensors.tmp ] || fail "export --step 6 of a flipped bit wrote a file"
  "$ck_tool" info ck.bit --step 6 >bit.info 2>&1 && { cat bit.info; fail "info --step 6 showed a flipped bit's checkpoint"; }
  echo "  $(cut -c1-110 bit.out)..."
  # a plain export: the newest damaged is named, with why and the --step that verifies
  rm -rf ck.new && cp -r ck.both ck.new && flip ck.new/step_00000012/rank_0000.ckpt 5000
  "$ck_tool" export ck.new -o new.safetensors >new.out 2>&1 &&
    { cat new.out; fail "export took an older checkpoint for the damaged newest"; }
  grep -q "^hexic-ckpt: error: ck.new: the newest checkpoint, step_00000012, does not verify (rank_0000.ckpt is corrupt .*); not taking an older one in its place unasked: the newest that verifies is step_00000006 (--step 6)$" new.out ||
    { cat new.out; fail "a damaged newest checkpoint: wrong message"; }
  [ ! -e new.safetensors ] || fail "export wrote the older checkpoint's weights"
  "$ck_tool" export ck.new --step 6 -o new.safetensors >/dev/null || fail "export --step 6 of the older one"
  echo "  $(cut -c1-100 new.out)..."
  # an index re-signed after wq's and wo's offsets (layer 0) were swapped
  rm -rf ck.swap && cp -r ck ck.swap && edit swap ck.swap/step_00000006/MANIFEST 17 20
  want="the MANIFEST's index puts layers.0.wq at byte [0-9]* of rank_0000.ckpt, where the file holds it at byte [0-9]*"
  c/launch.sh --steps $steps --checkpoint-dir ck.swap --resume >swap.out 2>&1 &&
    { cat swap.out; fail "resume under another plan took a swapped index"; }
  grep -q "skipping checkpoint ck.swap/step_00000006: $want" swap.out &&
    grep -q "error: --resume: none of the 1 checkpoint in 'ck.swap' verifies" swap.out ||
    { cat swap.out; fail "a swapped index: wrong message"; }
  grep -q "^step \|read its ranges" swap.out && fail "a swapped index: loaded"
  one/launch.sh --steps $steps --checkpoint-dir ck.swap --resume >swap1.out 2>&1 &&
    { cat swap1.out; fail "resume under the same plan took a swapped index"; }
  for cmd in export info; do
    "$ck_tool" $cmd ck.swap -o swap.$cmd.safetensors >swap.$cmd 2>&1 && fail "$cmd took a swapped index"
    grep -q "does not verify ($want" swap.$cmd || { cat swap.$cmd; fail "$cmd of a swapped index: wrong message"; }
  done
  [ ! -e swap.export.safetensors ] || fail "export of a swapped index wrote a file"
  echo "  $(grep -o 'skipping.*' swap.out | cut -c1-130)..."
  # an offset shifted by one float
  rm -rf ck.shift && cp -r ck ck.shift && edit shift ck.shift/step_00000006/MANIFEST 18 4
  "$ck_tool" export ck.shift --step 6 -o shift.safetensors >shift.out 2>&1 && fail "export took a shifted offset"
  grep -q "the MANIFEST's index puts layers.0.wk at byte" shift.out || { cat shift.out; fail "a shifted offset: wrong message"; }
  # rope_theta and norm_eps: another value recorded is another model's checkpoint
  for case in "rope_theta 10000:rope_theta 500000" "norm_eps 1e-05:norm_eps 1e-06"; do
    rm -rf ck.m && cp -r ck ck.m && edit model ck.m/step_00000006/MANIFEST "${case%%:*}" "${case#*:}"
    c/launch.sh --steps $steps --checkpoint-dir ck.m --resume >m.out 2>&1 &&
      { cat m.out; fail "resume took a checkpoint of ${case#*:}"; }
    grep -q "error: resume from ck.m/step_00000006: the checkpoint is of another model (layers 4 .* ${case#*:}[^;]*); this program trains layers 4 .* ${case%%:*}" m.out ||
      { cat m.out; fail "a checkpoint of ${case#*:}: wrong message"; }
    grep -q "^step " m.out && fail "a checkpoint of ${case#*:}: training started"
    echo "  ${case#*:}: $(grep -o 'the checkpoint is of another.*' m.out | cut -c1-60)..."
  done
  # an older hexic's line, without them: resumed across plans, said so
  edit model ck/step_00000006/MANIFEST " rope_theta 10000 norm_eps 1e-05" ""
  resume old c "an older hexic's MANIFEST (no rope_theta, norm_eps) -> plan C (TP 3)"
  grep -q "note: ck.old/step_00000006 records the model as 'layers 4 hidden 96 ffn 176 heads 6 kv_heads 6 vocab 256 tie_embeddings 0' (an older hexic's MANIFEST): the shape is this model's and it is resumed; that it was trained with rope_theta 10000 norm_eps 1e-05 cannot be checked" old.out ||
    { cat old.out; fail "an older MANIFEST: no note"; }
  # --init-from: weights imported with another rope_theta (config.json's) are refused
  "$ck_tool" export ck.both --step 6 -o model.safetensors >/dev/null || fail "export"
  mkdir -p theta && sed 's/"rope_theta": 10000.0/"rope_theta": 500000.0/' "$here/tiny6-config.json" >theta/config.json
  "$ck_tool" import model.safetensors --config theta/config.json -o theta.safetensors >/dev/null || fail "import"
  one/launch.sh --steps 1 --init-from theta.safetensors >theta.out 2>&1 &&
    { cat theta.out; fail "--init-from took the weights of another rope_theta"; }
  grep -q "error: --init-from: theta.safetensors holds the weights of another model (.* rope_theta 500000 norm_eps 1e-05); this program trains .* rope_theta 10000 norm_eps 1e-05" theta.out ||
    { cat theta.out; fail "--init-from of another rope_theta: wrong message"; }
  grep -q "^step " theta.out && fail "--init-from of another rope_theta: training started"
  echo "  --init-from: $(grep -o 'theta.safetensors holds.*' theta.out | cut -c1-90)..."
  ;;
hf_folder)
  # Llama 3's RoPE and Hugging Face model folders (issue 27): tiny6 with
  # rope_theta 500000 and rope_type llama3 (models/tiny6-llama3.hx). The
  # MANIFEST's model line records the scaling; export writes config.json
  # (every field transformers reads, hexic's values) beside the weights;
  # import takes that folder as it is; import-hf reads transformers 4's and
  # 5's layouts (rope_parameters) and refuses other RoPE types by field;
  # --init-from takes the folder (one file, or shards through an index) on
  # TP 2 + PP 2 bit for bit, and a config.json of another model is refused
  # naming the field.
  ck_tool=$(dirname "$hexic")/hexic-ckpt
  l3=$here/models/tiny6-llama3.hx
  steps=3
  compile one "$l3" "$src/examples/clusters/cpu1.hx"
  compile a "$l3" "$src/tests/exec/clusters/four.hx" --plan="$here/plans/a_tp2_pp2.json"
  compile plain "$tiny6" "$src/examples/clusters/cpu1.hx"
  grep -q "\.rope_factor = 8.0," one/rank_0000.c && grep -q "\.rope_original_max_len = 64," one/rank_0000.c ||
    fail "the rank program's model lacks the llama3 scaling"
  rm -rf ck && train full one --checkpoint-dir ck --checkpoint-every 3 --dump-weights "$PWD/full.w"
  line="layers 4 hidden 96 ffn 176 heads 6 kv_heads 6 vocab 256 tie_embeddings 0 rope_theta 500000 norm_eps 1e-05 rope_scaling llama3 factor 8 low_freq_factor 1 high_freq_factor 4 original_max_len 64"
  grep -qx "model $line" ck/step_00000003/MANIFEST || { cat ck/step_00000003/MANIFEST; fail "the model line lacks the scaling"; }
  # the scaling reaches the kernels: tiny6 at rope_theta 500000 unscaled trains other losses
  sed 's/rope_theta = 500000/rope_theta = 500000; rope_scaling = none/; /rope_factor\|rope_high/d' "$l3" >unscaled.hx
  grep -q "rope_factor" unscaled.hx && fail "unscaled.hx keeps the scaling"
  compile unscaled unscaled.hx "$src/examples/clusters/cpu1.hx"
  train unscaled unscaled
  cmp -s full.losses unscaled.losses && fail "llama3 scaling changed no loss: it does not reach the RoPE table"
  echo "  llama3 scaling: step-3 loss $(tail -n 1 full.losses | cut -d' ' -f2), unscaled $(tail -n 1 unscaled.losses | cut -d' ' -f2)"
  # export: config.json beside the weights
  mkdir -p hf3 && "$ck_tool" export ck -o hf3/model.safetensors >export.txt || fail "export"
  python3 - hf3/config.json <<'PY' || fail "export's config.json"
import json, sys
c = json.load(open(sys.argv[1]))
want = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 96,
        "intermediate_size": 176, "num_hidden_layers": 4, "num_attention_heads": 6,
        "num_key_value_heads": 6, "head_dim": 16, "vocab_size": 256,
        "max_position_embeddings": 64, "rms_norm_eps": 1e-05, "rope_theta": 500000,
        "hidden_act": "silu", "tie_word_embeddings": False, "torch_dtype": "float32",
        "attention_bias": False, "mlp_bias": False,
        "rope_scaling": {"rope_type": "llama3", "factor": 8, "low_freq_factor": 1,
                         "high_freq_factor": 4, "original_max_position_embeddings": 64}}
bad = {k: (c.get(k), v) for k, v in want.items() if c.get(k) != v}
if bad:
    sys.exit("config.json: %s" % bad)
try:
    from transformers import LlamaConfig
except ImportError:
    print("  (transformers is not installed: LlamaConfig not tried)")
else:
    lc = LlamaConfig.from_pretrained(sys.path[0] if False else sys.argv[1].rsplit("/", 1)[0])
    got = getattr(lc, "rope_parameters", None) or {"rope_theta": lc.rope_theta, **(lc.rope_scaling or {})}
    assert lc.rms_norm_eps == 1e-05 and lc.tie_word_embeddings is False, lc
    assert got["rope_theta"] == 500000 and got["rope_type"] == "llama3", got
    print("  LlamaConfig.from_pretrained reads it:", got)
PY
  # a second export of the same model beside it keeps config.json; another dtype's is refused
  "$ck_tool" export ck -o hf3/again.safetensors >/dev/null || fail "a second export into the folder"
  "$ck_tool" export ck --dtype bf16 -o hf3/bf16.safetensors >bf16.out 2>&1 && fail "export replaced another config.json"
  grep -q "hf3/config.json exists: refusing to replace it .*(export writes the model's config.json beside -o hf3/bf16.safetensors)" bf16.out ||
    { cat bf16.out; fail "export over another config.json: wrong message"; }
  [ ! -e hf3/bf16.safetensors ] || fail "export wrote weights whose config.json it could not"
  rm -f hf3/again.safetensors
  echo "  export: $(cut -c1-60 export.txt)...; config.json: transformers' fields, hexic's values"
  # import: hexic's own export folder as it is (config.json beside it)
  "$ck_tool" import hf3/model.safetensors -o init.safetensors >import.txt || fail "import of hexic's own export"
  grep -q "($line)" import.txt || { cat import.txt; fail "import: the model line"; }
  a/launch.sh --steps 0 --init-from init.safetensors --dump-weights "$PWD/init.w" >init.out 2>&1 ||
    { cat init.out; fail "--init-from the import"; }
  cmp full.w init.w || fail "export -> import -> --init-from is not bit-exact"
  # an export with no config.json beside it (an older hexic's): the model line it records
  rm -rf bare && mkdir bare && cp hf3/model.safetensors bare/
  "$ck_tool" import bare/model.safetensors -o bare.safetensors >bare.out 2>&1 || { cat bare.out; fail "import of a bare export"; }
  grep -q "note: no bare/config.json: bare/model.safetensors is hexic's export, and the model line it records is taken" bare.out ||
    { cat bare.out; fail "import of a bare export: no note"; }
  cmp init.safetensors bare.safetensors || fail "import of a bare export: other weights"
  # import-hf: the .hx of the exported config.json is this model
  "$ck_tool" import-hf hf3/config.json --name tiny6-llama3 -o back.hx >/dev/null || fail "import-hf of the export"
  grep -q "rope_theta = 500000;" back.hx && grep -q "rope_scaling = llama3; rope_factor = 8; rope_low_freq_factor = 1" back.hx &&
    grep -q "rope_high_freq_factor = 4; rope_original_max_len = 64" back.hx || { cat back.hx; fail "import-hf: the scaling"; }
  sed -n '/^train/,$p' "$l3" | cat back.hx - "$src/examples/clusters/cpu1.hx" >back-all.hx
  "$hexic" back-all.hx --target=cpu -o back >/dev/null || fail "hexic on import-hf's .hx"
  grep -q "\.rope_factor = 8.0," back/rank_0000.c || fail "import-hf's .hx lost the scaling"
  # --init-from the folder: one file, and shards through an index, on TP 2 + PP 2
  a/launch.sh --steps 0 --init-from hf3 --dump-weights "$PWD/folder.w" >folder.out 2>&1 ||
    { cat folder.out; fail "--init-from an HF folder"; }
  cmp full.w folder.w || fail "--init-from the folder is not the exported weights"
  mkdir -p sharded && python3 "$here/st_check.py" shard hf3/model.safetensors sharded || fail "sharding"
  cp hf3/config.json sharded/
  a/launch.sh --steps 0 --init-from sharded --dump-weights "$PWD/sharded.w" >sharded.out 2>&1 ||
    { cat sharded.out; fail "--init-from a sharded HF folder"; }
  cmp full.w sharded.w || fail "--init-from the sharded folder is not the exported weights"
  one/launch.sh --steps 2 --init-from sharded >cont.out 2>&1 || { cat cont.out; fail "training from the HF folder"; }
  [ "$(grep -c '^step ' cont.out)" = 2 ] || { cat cont.out; fail "training from the HF folder: not 2 steps"; }
  echo "  --init-from an HF folder (model.safetensors; 2 shards + index) on TP 2 + PP 2: the exported weights bit for bit; 2 steps trained on"
  # a config.json of another model: refused naming the field, before step 1
  refuse() { # NAME PYTHON-EDIT WANT
    rm -rf "$1" && mkdir "$1" && ln -s ../hf3/model.safetensors "$1/model.safetensors"
    python3 -c "import json, sys
c = json.load(open('hf3/config.json'))
$2
json.dump(c, open(sys.argv[1], 'w'))" "$1/config.json" || fail "writing $1/config.json"
    one/launch.sh --steps 1 --init-from "$1" >"$1.out" 2>&1 && { cat "$1.out"; fail "$1: --init-from took it"; }
    grep -q "error: --init-from: $1/config.json describes another model: $3" "$1.out" ||
      { cat "$1.out"; fail "$1: wrong message"; }
    grep -q "^step " "$1.out" && fail "$1: training started"
    echo "  $(grep -o 'describes another model.*' "$1.out")"
  }
  refuse theta 'c["rope_theta"] = 10000' "rope_theta is 10000 where this program's model has 500000"
  refuse noscale 'c["rope_scaling"] = None' "rope_scaling.factor (0: no llama3 scaling) is 0 where this program's model has 8"
  refuse eps 'del c["rms_norm_eps"]' "rms_norm_eps is 1e-06 where this program's model has 1e-05"
  refuse kv 'c["num_key_value_heads"] = 3' "num_key_value_heads is 3 where this program's model has 6"
  plain/launch.sh --steps 1 --init-from hf3 >plain.out 2>&1 && fail "an unscaled model took the llama3 folder"
  grep -q "rope_theta is 500000 where this program's model has 10000" plain.out || { cat plain.out; fail "unscaled: wrong message"; }
  # transformers 5's layout: rope_parameters carries rope_theta and the type
  python3 - hf3/config.json <<'PY' || fail "writing transformers 5 configs"
import json, os, sys
c = json.load(open(sys.argv[1]))
scaling = c.pop("rope_scaling")
theta = c.pop("rope_theta")
os.makedirs("v5", exist_ok=True)
os.symlink("../hf3/model.safetensors", "v5/model.safetensors")
json.dump(dict(c, rope_parameters=dict(scaling, rope_theta=theta)), open("v5/config.json", "w"))
json.dump(dict(c, rope_parameters={"rope_theta": theta, "rope_type": "default"}), open("v5-default.json", "w"))
json.dump(dict(c, rope_theta=10000.0, rope_parameters={"rope_theta": theta, "rope_type": "default"}),
          open("v5-both.json", "w"))
for kind, key in (("yarn", "rope_parameters"), ("linear", "rope_scaling"), ("dynamic", "rope_scaling")):
    d = dict(c)
    d[key] = {"rope_type": kind, "factor": 2.0} if kind != "dynamic" else {"type": kind, "factor": 2.0}
    json.dump(d, open("v5-%s.json" % kind, "w"))
PY
  "$ck_tool" import-hf v5/config.json -o v5.hx >/dev/null || fail "import-hf of rope_parameters"
  grep -q "rope_theta = 500000;" v5.hx && grep -q "rope_scaling = llama3; rope_factor = 8;" v5.hx ||
    { cat v5.hx; fail "import-hf of rope_parameters: rope_theta or the scaling lost"; }
  "$ck_tool" import-hf v5-default.json >v5-default.hx 2>/dev/null || fail "import-hf of rope_type default"
  grep -q "rope_theta = 500000;" v5-default.hx && ! grep -q rope_scaling v5-default.hx ||
    { cat v5-default.hx; fail "rope_parameters' rope_theta with rope_type default"; }
  "$ck_tool" import-hf v5-both.json >both.out 2>&1 && fail "two rope_theta that differ were accepted"
  grep -qx "hexic-ckpt: error: v5-both.json: rope_theta (10000) and rope_parameters.rope_theta (500000) differ" both.out ||
    { cat both.out; fail "two rope_theta: wrong message"; }
  a/launch.sh --steps 0 --init-from v5 --dump-weights "$PWD/v5.w" >v5.out 2>&1 || { cat v5.out; fail "--init-from a transformers 5 folder"; }
  cmp full.w v5.w || fail "--init-from a transformers 5 folder: other weights"
  for case in "yarn:rope_parameters.rope_type 'yarn'" "linear:rope_scaling.rope_type 'linear'" "dynamic:rope_scaling.type 'dynamic'"; do
    "$ck_tool" import-hf "v5-${case%%:*}.json" >kind.out 2>&1 && fail "rope type ${case%%:*} was accepted"
    grep -qx "hexic-ckpt: error: v5-${case%%:*}.json: ${case#*:} is not supported (hexic computes RoPE unscaled, 'default', or with Llama 3's frequency scaling, 'llama3')" kind.out ||
      { cat kind.out; fail "rope type ${case%%:*}: wrong message"; }
  done
  echo "  transformers 5's rope_parameters: rope_theta 500000 and llama3 kept; $(cut -c 13- kind.out | cut -c1-80)..."
  ;;
export_many)
  # A checkpoint of 1029 tensors (114 layers): export reads its MANIFEST
  # once, not once per tensor (over 600 s for 1024 tensors before).
  ck_tool=$(dirname "$hexic")/hexic-ckpt
  compile many "$here/models/many-layers.hx" "$src/examples/clusters/cpu1.hx"
  steps=1
  rm -rf ck && train many many --checkpoint-dir ck --checkpoint-every 1
  [ "$(grep -c '^tensor ' ck/step_00000001/MANIFEST)" = 1029 ] || fail "not a checkpoint of 1029 tensors"
  # linear, not timed: the MANIFEST opened a fixed number of times (strace
  # counts them; it was opened once per tensor, 1031 times); and the file is
  # fsync'ed before it is renamed into place (it was renamed unsynced: a crash
  # could leave an empty many.safetensors)
  command -v strace >/dev/null || fail "strace is missing (scripts/setup.sh installs it)"
  # (LeakSanitizer cannot run under ptrace)
  ASAN_OPTIONS="${ASAN_OPTIONS:-}:detect_leaks=0" \
    strace -f -e trace=openat,fsync,fdatasync,rename,renameat,renameat2 -o export.trace \
    "$ck_tool" export ck -o many.safetensors >export.out 2>&1 || { cat export.out; fail "export of 1029 tensors"; }
  opened=$(grep -c '/MANIFEST"' export.trace)
  [ "$opened" -le 4 ] || fail "export opened the MANIFEST $opened times for 1029 tensors (once per tensor?)"
  awk '/fsync\(|fdatasync\(/ { synced = 1 } /rename.*many\.safetensors\.tmp/ { print (synced ? "ok" : "unsynced"); exit }' \
    export.trace | grep -qx ok || fail "export renamed many.safetensors.tmp into place before any fsync"
  "$ck_tool" info many.safetensors >info.out || fail "hexic-ckpt info of the export"
  grep -q "^many.safetensors: safetensors, 1029 tensors" info.out || { head -n 1 info.out; fail "the export lacks tensors"; }
  echo "  $(cut -c1-100 export.out)...; the MANIFEST read ${opened:-?} times"
  ;;
*)
  fail "unknown mode $mode"
  ;;
esac
echo "ckpt.$mode: ok"
