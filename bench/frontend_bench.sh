#!/bin/sh
# The front end at scale (issue 10, item 8): wall time of `hexic --check`
# (parse, sema, model-stats, cluster-table) on generated inputs with 20k and
# 100k GPU blocks (all but one unused: one warning each, capped) and with 100k
# link blocks between 450 one-GPU nodes. Figures are measured, nothing is
# asserted.
#   usage: bench/frontend_bench.sh [HEXIC]   (default: build-bench/hexic, built Release)
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
. "$root/bench/release_hexic.sh"

gpus() { # N: the tiny model, N GPU types, one node using the first
  cat "$root/examples/models/tiny.hx"
  awk -v n="$1" 'BEGIN { for (i = 0; i < n; i++) printf "gpu \"G%d\" { tflops = 100; memory = 16 GiB }\n", i
    print "node \"n\" { gpu = \"G0\"; gpus = 2; bandwidth = 10 GB/s }" }'
}

links() { # NODES: one-GPU nodes and a link between every pair of them
  cat "$root/examples/models/tiny.hx"
  awk -v n="$1" 'BEGIN { print "gpu \"G\" { tflops = 100; memory = 16 GiB }"
    for (i = 0; i < n; i++) printf "node \"n%d\" { gpu = \"G\"; gpus = 1 }\n", i
    for (i = 0; i < n; i++) for (j = i + 1; j < n; j++)
      printf "link \"n%d\" \"n%d\" { bandwidth = 10 Gbps }\n", i, j }'
}

run() { # NAME FILE: one timed --check, its exit code and output size
  start=$(date +%s.%N)
  rc=0
  "$hexic" --check "$2" >"$tmp/out" 2>&1 || rc=$?
  end=$(date +%s.%N)
  awk -v n="$1" -v s="$start" -v e="$end" -v rc="$rc" -v lines="$(wc -l <"$tmp/out")" 'BEGIN {
    printf "%-28s %8.2f s   exit %d, %d lines of diagnostics\n", n, e - s, rc, lines }'
}

echo "== hexic --check at scale"
gpus 20000 >"$tmp/g20k.hx" && run "20k gpu blocks" "$tmp/g20k.hx"
gpus 100000 >"$tmp/g100k.hx" && run "100k gpu blocks" "$tmp/g100k.hx"
links 450 >"$tmp/l100k.hx" && run "101k link blocks, 450 nodes" "$tmp/l100k.hx"
