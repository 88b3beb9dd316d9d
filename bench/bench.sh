#!/bin/sh
# The scheduler bench (issue 4): simulated iteration time of hexic's plan
# against both symmetric baselines (Megatron on every device, and the best
# symmetric plan on a subset of the devices: issue 15), with the speed-up over
# each, and, on <= 8 devices, the exhaustive optimum; then a table of the planner's CPU time (one core) and its plan's
# simulated iteration time at 8 .. 4096 devices x global batch 64 .. 4096
# (Llama-2-70B on clusters of four GPU types generated here as .hx text).
# Figures are measured, nothing is asserted.
#   usage: bench/bench.sh [HEXIC]   (default: build-bench/hexic, built Release)
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
. "$root/bench/release_hexic.sh"

# iteration seconds of the plan, of the all-device baseline (base) or of
# the best symmetric plan on a subset of the devices (subset) in an IR dump
iter() { awk -v want="$1" '/^baseline plan/{cur="base"} /^subset baseline plan/{cur="subset"}
  /^plan /{cur="plan"} /simulated: iteration/{ if (cur==want) print $3 }'; }

# hexic against both symmetric baselines (Megatron on every device; the best
# symmetric plan on a subset of the devices) and, with "yes", the exhaustive
# optimum
compare() { # name model cluster [exhaustive]
  out=$("$hexic" "$2" "$3" --print-ir 2>/dev/null || true)
  h=$(printf '%s\n' "$out" | iter plan); b=$(printf '%s\n' "$out" | iter base)
  u=$(printf '%s\n' "$out" | iter subset)
  e=-
  if [ "${4:-}" = yes ]; then
    e=$("$hexic" "$2" "$3" --print-ir --strategy=exhaustive 2>/dev/null | iter plan || true)
  fi
  awk -v n="$1" -v h="${h:--}" -v b="${b:--}" -v u="${u:--}" -v e="${e:--}" 'BEGIN{
    s = (b != "-" && h != "-") ? sprintf("%.2fx", b / h) : "-";
    t = (u != "-" && h != "-") ? sprintf("%.2fx", u / h) : "-";
    g = (e != "-" && h != "-") ? sprintf("%+.2f%%", 100 * (h / e - 1)) : "-";
    printf "%-20s hexic %8s s  all-device %8s s %6s  subset %8s s %6s  exhaustive %8s s  gap %s\n",
           n, h, b, s, u, t, e, g }'
}

ex=$root/examples
echo "== examples"
compare "7B case-study" "$ex/models/llama2-7b.hx" "$ex/clusters/case-study.hx" yes
compare "13B case-study" "$ex/models/llama2-13b.hx" "$ex/clusters/case-study.hx" yes
compare "13B hetero-32" "$ex/models/llama2-13b.hx" "$ex/clusters/hetero-32.hx"
compare "30B hetero-64" "$ex/models/llama-30b.hx" "$ex/clusters/hetero-64.hx"

echo "== seeded random 8-device clusters (8-layer model)"
cat > "$tmp/m.hx" <<'M'
model "m" { layers = 8; hidden = 1024; ffn = 2816; heads = 8; kv_heads = 8; vocab = 32000; seq_len = 1024 }
train { global_batch = 8; precision = bf16; recompute = auto; steps = 1; seed = 1 }
M
seed=1
while [ $seed -le 20 ]; do
  python3 - "$seed" > "$tmp/c.hx" <<'P'
import random, sys
rng = random.Random(int(sys.argv[1]))
gpus = [("A100", 312, 80), ("RTX4090", 165.2, 24), ("RTX3090", 71, 24), ("L40S", 362, 48)]
sizes, left = [], 8
while left:
    k = min(rng.choice([1, 2, 2, 3, 4]), left); sizes.append(k); left -= k
seen = set()
for i, n in enumerate(sizes):
    name, tf, mem = rng.choice(gpus)
    if name not in seen:
        print('gpu "%s" { tflops = %s; memory = %d GiB }' % (name, tf, mem)); seen.add(name)
    print('node "n%d" { gpu = "%s"; gpus = %d; bandwidth = %s; latency = 5 us }'
          % (i, name, n, rng.choice(["16 GB/s", "25 GB/s", "200 GB/s"])))
print('network { bandwidth = %s; latency = 20 us }' % rng.choice(["1 Gbps", "10 Gbps", "25 GB/s"]))
P
  compare "random-8 seed $seed" "$tmp/m.hx" "$tmp/c.hx" yes | tee -a "$tmp/gaps"
  seed=$((seed + 1))
done
awk '{ g = $NF; if (g == "-") next; sub("%", "", g); g += 0; n++; s += g; if (g > m || n == 1) m = g;
       if (g <= 2) w++ }
     END { if (n) printf "gap to the exhaustive optimum over %d clusters: mean %+.2f%%, max %+.2f%%, %d within 2%%\n", n, s / n, m, w }' "$tmp/gaps"

# A cluster of n devices of four GPU types, as .hx text: n/8 machines of 8
# (n/2 of 2 below 32 devices), a quarter of each type, one network.
cluster() {
  n=$1
  [ "$n" -lt 32 ] && nodes=$((n / 2)) || nodes=$((n / 8))
  gpn=$(( n / nodes ))
  echo 'gpu "H100" { tflops = 989; memory = 80 GiB }'
  echo 'gpu "A100" { tflops = 312; memory = 80 GiB }'
  echo 'gpu "A800" { tflops = 312; memory = 80 GiB }'
  echo 'gpu "L40S" { tflops = 362; memory = 48 GiB }'
  for t in h100:H100 a100:A100 a800:A800 l40s:L40S; do
    echo "node \"${t%%:*}\" { gpu = \"${t#*:}\"; gpus = $gpn; bandwidth = 300 GB/s; latency = 2 us; replicas = $((nodes / 4)) }"
  done
  echo 'network { bandwidth = 25 GB/s; latency = 5 us }'
}

# Planner time grows with the cluster and, through the micro-batch settings
# and the pipeline counts it can try, with the global batch: one cell per
# (devices, global batch), the planner's time on one core and the simulated
# iteration time of its plan. The time is the process's CPU time (user +
# system, by /usr/bin/time) when there is one: on a shared machine wall time
# measures the neighbours too; else wall time.
one_core=""
command -v taskset >/dev/null 2>&1 && one_core="taskset -c 0"
cpu_time=""
[ -x /usr/bin/time ] && cpu_time="/usr/bin/time -f %U+%S -o $tmp/cpu"
echo "== planner ${cpu_time:+CPU }time / simulated iteration time, Llama-2-70B, four GPU types"
batches="64 256 1024 4096"
printf "%8s" devices; for gb in $batches; do printf " %22s" "global_batch $gb"; done; echo
for n in 8 64 512 1024 4096; do
  cluster "$n" > "$tmp/big.hx"
  printf "%8d" "$n"
  for gb in $batches; do
    sed "s/global_batch = 64/global_batch = $gb/" "$ex/models/llama2-70b.hx" > "$tmp/m70.hx"
    start=$(date +%s.%N)
    out=$($cpu_time $one_core "$hexic" "$tmp/m70.hx" "$tmp/big.hx" --print-ir 2>/dev/null || true)
    end=$(date +%s.%N)
    if [ -n "$cpu_time" ]; then start=0; end=$(tail -1 "$tmp/cpu" | awk -F+ '{print $1 + $2}'); fi
    h=$(printf '%s\n' "$out" | iter plan)
    awk -v s="$start" -v e="$end" -v h="${h:-}" 'BEGIN{
      if (h == "") printf " %22s", sprintf("%.2f s / no plan", e - s)
      else printf " %22s", sprintf("%.2f s / %.3g s", e - s, h) }'
  done
  echo
done
