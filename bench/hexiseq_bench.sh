#!/bin/sh
# The HexiSeq paper-like simulated settings (issue 7, item 5): 32 GPUs of 3
# types, 64 and 128 of 4 (H100 989 TFLOP/s 80 GiB, A100 312/80, A800 312/80,
# L40S 362/48; NVLink inside 8-GPU nodes, PCIe for L40S, 25 GB/s between
# nodes), Llama-2-13B and 70B shapes at 128K-1M tokens, global batch 8.
# Prints hexic against each baseline, the average and best speed-up over the
# best symmetric baseline, how many settings fit a plan and the 70B 512K plans
# (issue 16: ZeRO-1), and the scheduler's wall time at 128 and 1024 GPUs.
# usage: bench/hexiseq_bench.sh [BUILD_DIR [quick]]   (default: build-bench, built Release)
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-}
quick=${2:-}
if [ -z "$build" ]; then
  build=$root/build-bench
  cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DHEXIC_TESTS=OFF >/dev/null
  cmake --build "$build" -j2 --target hexiseq_bench >/dev/null
fi
bench=$build/hexiseq_bench
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# cluster FILE H100_NODES A100_NODES A800_NODES L40S_NODES (8 GPUs a node)
cluster() {
  {
    [ "$2" -gt 0 ] && echo 'gpu "H100" { tflops = 989; memory = 80 GiB }'
    [ "$3" -gt 0 ] && echo 'gpu "A100" { tflops = 312; memory = 80 GiB }'
    [ "$4" -gt 0 ] && echo 'gpu "A800" { tflops = 312; memory = 80 GiB }'
    [ "$5" -gt 0 ] && echo 'gpu "L40S" { tflops = 362; memory = 48 GiB }'
    [ "$2" -gt 0 ] && echo "node \"h100\" { gpu = \"H100\"; gpus = 8; bandwidth = 450 GB/s; latency = 2 us; replicas = $2 }"
    [ "$3" -gt 0 ] && echo "node \"a100\" { gpu = \"A100\"; gpus = 8; bandwidth = 300 GB/s; latency = 2 us; replicas = $3 }"
    [ "$4" -gt 0 ] && echo "node \"a800\" { gpu = \"A800\"; gpus = 8; bandwidth = 200 GB/s; latency = 2 us; replicas = $4 }"
    [ "$5" -gt 0 ] && echo "node \"l40s\" { gpu = \"L40S\"; gpus = 8; bandwidth = 32 GB/s; latency = 5 us; replicas = $5 }"
    echo 'network { bandwidth = 25 GB/s; latency = 10 us }'
  } > "$1"
}

# model FILE NAME SEQ_LEN: 13b or 70b shapes
model() {
  case $2 in
  13b) shape='layers = 40; hidden = 5120; ffn = 13824; heads = 40' ;;
  70b) shape='layers = 80; hidden = 8192; ffn = 28672; heads = 64; kv_heads = 8' ;;
  esac
  cat > "$1" <<EOM
model "llama-$2" {
  $shape
  vocab = 32000; seq_len = $3
  rope_theta = 1000000
}
train { global_batch = 8; precision = bf16; recompute = auto; lr = 1e-4; steps = 10; seed = 1 }
EOM
}

cluster "$work/c32.hx" 1 2 0 1
cluster "$work/c64.hx" 2 2 2 2
cluster "$work/c128.hx" 4 4 4 4
cluster "$work/c1024.hx" 32 32 32 32

runs="$work/runs.txt"
: > "$runs"
settings=0
# quick (tests/hexiseq/bench_small.sh): two 13B settings that fit a plan
# under the CUDA programs' memory (6a46508). At 128K on 32 GPUs neither
# model fits: a bf16 HexiSeq rank holds fp32 hook scratch, fp32 views of
# q/k/v/o and their gradients, the NCCL transport's fp32 widening and, on a
# stage leader, two fp32 whole-sequence buffers (the 13B's former plan,
# Ulysses tp=4 pp=4 hp=2, priced 42.6 GiB on a middle stage's rank, now
# 49.2: over an L40S's 48), and the 70B fits neither 32 nor 64 GPUs at 64K
# or 128K (its search takes a minute to say so in a sanitized build).
if [ "$quick" = quick ]; then
  list="32 13b 65536
64 13b 131072"
else
  list=$(for size in 32 64 128; do for m in 13b 70b; do
    for seq in 131072 262144 524288 1048576; do echo "$size $m $seq"; done; done; done)
fi
sizes=$(echo "$list" | awk '{ print $1 }' | sort -nu)
while read -r size m seq; do
  model "$work/m.hx" $m $seq
  settings=$((settings + 1))
  # its status, not tee's: a setting without a plan says so
  if out=$("$bench" "$work/m.hx" "$work/c$size.hx" < /dev/null); then
    printf '%s\n' "$out" | tee -a "$runs"
  else
    printf '%s\n' "$out"
    echo "($m $seq on $size: no plan)"
  fi
done <<EOL
$list
EOL
awk '/speed-up/ { for (i = 1; i <= NF; i++) if ($i == "speed-up") { x = $(i+1); sub("x", "", x);
       n++; s += x; if (x > best) best = x; if (x < worst || n == 1) worst = x } }
     END { if (n) printf "speed-up over the best baseline: average %.3fx, best %.3fx, worst %.3fx over %d settings\n", s / n, best, worst, n }' "$runs"
# issue 16 (ZeRO-1, the default): how many settings fit a plan at all (19 of
# 24 before it), and the 70B 512K settings' plans
echo "settings that fit a plan: $(grep -c '^llama-' "$runs") of $settings"
for size in $sizes; do
  grep "^llama-70b 512K on $size GPUs" "$runs" || echo "llama-70b 512K on $size GPUs: no plan"
done
if [ "$quick" != quick ]; then
  model "$work/m.hx" 13b 1048576
  echo "scheduler wall time:"
  "$bench" "$work/m.hx" "$work/c128.hx" | sed 's/.*scheduler/  128 GPUs: scheduler/'
  "$bench" "$work/m.hx" "$work/c1024.hx" | sed 's/.*scheduler/  1024 GPUs: scheduler/'
fi
