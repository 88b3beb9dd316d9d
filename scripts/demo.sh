#!/usr/bin/env bash
# The README's first command: builds hexic, turns real text into a byte-level
# token shard, compiles the tiny Llama for a CPU cluster (by default the 8
# ranks of 3 speeds of examples/clusters/cpu8.hx, where hexic picks an
# asymmetric plan: pipelines of different batch sizes, stage counts and TP
# degrees), builds the generated per-rank programs and trains a few hundred
# steps, printing the plan summary, the loss falling and the time taken.
#   scripts/demo.sh [CLUSTER.hx] [STEPS] [MODEL.hx]
#   (defaults examples/clusters/cpu8.hx, 300, examples/models/tiny.hx). The
#   long-context pair, where hexic splits every 2048-token sequence over the
#   ranks (HexiSeq): scripts/demo.sh examples/clusters/cpu8-long.hx 20
#   examples/models/tiny-long.hx
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
cluster=${1:-examples/clusters/cpu8.hx}
steps=${2:-300}
model=${3:-examples/models/tiny.hx}

bash scripts/setup.sh
echo "== build hexic (Release, build/)"
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DHEXIC_TESTS=OFF >/dev/null
cmake --build build -j"$(nproc 2>/dev/null || echo 2)" --target hexic hexic-shard >/dev/null

echo "== real text -> byte-level token shard"
mkdir -p build/demo-data
if ls /usr/share/common-licenses/* >/dev/null 2>&1; then
  cat /usr/share/common-licenses/* >build/demo-data/text.txt
else
  cat docs/*.md README.md >build/demo-data/text.txt
fi
./build/hexic-shard build/demo-data/text.txt build/demo-data/text.bin

echo "== hexic $model $cluster --target=cpu -o build/demo"
rm -rf build/demo
./build/hexic "$model" "$cluster" --target=cpu -o build/demo
if [ -f build/demo/report.md ]; then
  echo "== plan summary (build/demo/report.md)"
  sed -n '1,40p' build/demo/report.md
fi

echo "== build the generated programs (make -C build/demo)"
make -s -C build/demo -j"$(nproc 2>/dev/null || echo 2)" >/dev/null

echo "== train $steps steps on real text"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
start=$(date +%s.%N)
build/demo/launch.sh --data "$root/build/demo-data/text.bin" --steps "$steps" |
  tee build/demo-data/train.log
awk '/^step/ { l[++k] = $5 } END {
       if (k < 20) { printf "== %d steps: too few to compare the first and last 10 losses\n", k; exit }
       for (i = 1; i <= 10; i++) { a += l[i]; b += l[k - 10 + i] }
       printf "== loss: mean of the first 10 steps %.3f, of the last 10 %.3f\n", a / 10, b / 10 }' \
  build/demo-data/train.log
awk -v s="$start" -v e="$(date +%s.%N)" -v n="$steps" \
  'BEGIN { printf "== %d steps in %.1f s (wall, with MPI start-up)\n", n, e - s }'
