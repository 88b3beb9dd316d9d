#!/usr/bin/env bash
# The one command for a machine with an NVIDIA GPU (issue 12):
#
#   bash tests/gpu/run.sh
#
# Configures and builds hexic's CUDA parts (Release, CUDA on, for this GPU's
# architecture) in build-gpu/ (HEXIC_GPU_BUILD overrides), runs every GPU
# check, and ends with a summary table: check -> PASS / FAIL / SKIP
# and its figures. Every check runs whatever happened before it (a failure
# never stops the run); each kernel group runs in its own process, so a CUDA
# error in one cannot hide the others. Exit 0 when nothing failed, 1 when a
# check failed, 2 when no GPU was visible (then only the build was checked).
# Budget: 8 minutes on one H200 (a target, not yet timed on a GPU); the multi-GPU
# checks (issue 13) run only with two or more GPUs.
set -uo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
build=${HEXIC_GPU_BUILD:-$root/build-gpu}
mkdir -p "$build"
log=$build/gpu-run.log
: >"$log"
t_start=$(date +%s)
jobs=$(nproc 2>/dev/null || echo 4)

rows=() # "check|status|figures"
record() { rows+=("$1|$2|$3"); echo "== $1: $2 ${3:+($3)}"; }
elapsed() { echo "$(($(date +%s) - $1)) s"; }

# ---- the machine ------------------------------------------------------------
echo "== machine"
gpu_name=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)
gpu_cc=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1)
driver=$(nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>/dev/null | head -1)
nvcc=${CUDA_HOME:-/usr/local/cuda}/bin/nvcc
echo "GPU: ${gpu_name:-none visible to nvidia-smi}  compute capability: ${gpu_cc:-?}  driver: ${driver:-?}"
"$nvcc" --version 2>/dev/null | tail -1 || echo "nvcc: not found at $nvcc"

# ---- build ------------------------------------------------------------------
# The packages the rest of hexic needs (CMake finds them even for the CUDA
# targets); a machine without network that lacks one fails the build below
# with CMake's message in the log.
bash scripts/setup.sh >>"$log" 2>&1 || echo "setup.sh could not install what is missing (see $log); building with what is there"

# Only this GPU's architecture (faster than the default 80+90 list).
arch_flag=()
if [[ $gpu_cc =~ ^([0-9]+)\.([0-9]+)$ ]]; then
  arch_flag=(-DCMAKE_CUDA_ARCHITECTURES="${BASH_REMATCH[1]}${BASH_REMATCH[2]}")
fi
t=$(date +%s)
built=0
if cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DHEXIC_CUDA=ON \
    "${arch_flag[@]}" >>"$log" 2>&1 &&
  cmake --build "$build" -j"$jobs" --target check_kernels attention_bench \
    >>"$log" 2>&1; then
  built=1
  record "build (Release, CUDA)" PASS "$(elapsed "$t")${arch_flag:+, ${arch_flag[0]#-D}}"
else
  record "build (Release, CUDA)" FAIL "see $log"
  tail -30 "$log"
fi
check_bin=$build/tests/check_kernels
bench_bin=$build/attention_bench

# ---- each CUDA kernel against the CPU kernel ----------------------------------
# One line per group: its PASS/FAIL counts and the worst err/tol ratio.
run_group() { # GROUP
  local group=$1 out rc
  out=$(timeout 300 "$check_bin" "$group" 2>&1)
  rc=$?
  echo "$out" >>"$log"
  local npass nfail worst
  npass=$(grep -c '^PASS' <<<"$out")
  nfail=$(grep -c '^FAIL' <<<"$out")
  worst=$(awk '$1 == "PASS" || $1 == "FAIL" {
      for (i = 1; i < NF; i++) { if ($i == "err") e = $(i+1); if ($i == "tol") t = $(i+1) }
      if (t + 0 > 0 && e / t > w) { w = e / t; name = $2 " " $3 }
    } END { if (name != "") printf "worst err/tol %.2f (%s)", w, name }' <<<"$out")
  case $rc in
  0) record "kernels: $group" PASS "$npass checks, $worst" ;;
  77) record "kernels: $group" SKIP "no GPU visible to the CUDA runtime" ;;
  3) record "kernels: $group" FAIL "CUDA error after $npass passed: $(grep '^ERROR' <<<"$out" | head -1 | cut -c7-)" ;;
  124) record "kernels: $group" FAIL "timed out (300 s) after $npass passed" ;;
  *)
    record "kernels: $group" FAIL "$nfail of $((npass + nfail)) failed: $(grep '^FAIL' <<<"$out" | awk '{print $2 "/" $3}' | head -4 | tr '\n' ' ')"
    grep '^FAIL' <<<"$out"
    ;;
  esac
}
if [ $built = 1 ]; then
  echo "== kernel checks ($($check_bin --list | wc -l) groups; every line in $log)"
  for group in $("$check_bin" --list); do
    run_group "$group"
  done
else
  record "kernels" FAIL "not run: the build failed"
fi

# ---- --target=cuda programs (issue 12: the runtime's checks) ------------------
# hexic writes each program set into $work; its generated Makefile builds it
# (the first CUDA set compiles the runtime and the kernel library, later sets
# get copies with their timestamps, so make only links their ranks);
# launch.sh runs it on text (hexic-shard of the licence texts, else the
# docs). The cluster: examples/clusters/one-h200.hx on an H200 (or with no
# GPU), else one GPU of this machine's name, memory and compute capability
# (HEXIC_GPU_PEAK_TFLOPS, default 989, its dense bf16 peak). Each check
# records one row, whatever the others did; without a GPU the programs are
# still generated and built, and the runs are SKIP.
work=$build/gpu-programs
rm -rf "$work"
mkdir -p "$work"
hexic=$build/hexic
have_gpu=0
if nvidia-smi -L >/dev/null 2>&1; then have_gpu=1; fi
peak=${HEXIC_GPU_PEAK_TFLOPS:-989}
one=$root/examples/clusters/one-h200.hx
if [ $have_gpu = 1 ] && [[ $gpu_cc =~ ^([0-9]+)\.([0-9]+)$ ]] && [[ $gpu_name != *H200* ]]; then
  one=$work/this-gpu.hx
  mem=$(nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits | head -1 | tr -cd 0-9)
  printf 'gpu "%s" { tflops = %s; memory = %s MiB; cuda_arch = %s }\nnode "gpu0" { gpu = "%s"; gpus = 1 }\n' \
    "$(tr -cd 'A-Za-z0-9 ._-' <<<"$gpu_name")" "$peak" "${mem:-81920}" \
    "${BASH_REMATCH[1]}${BASH_REMATCH[2]}" "$(tr -cd 'A-Za-z0-9 ._-' <<<"$gpu_name")" >"$one"
fi
# Four ranks of the multi-rank plan on this one GPU: a node of four of it.
{ grep '^gpu ' "$one"; sed -n 's/^gpu \("[^"]*"\).*/node "gpu0" { gpu = \1; gpus = 4; bandwidth = 100 GB\/s }/p' "$one"; } >"$work/four.hx"
tiny=$root/examples/models/tiny.hx
sed 's/precision = fp32/precision = bf16/' "$tiny" >"$work/tiny-bf16.hx"
cat >"$work/llama-1.3b.hx" <<'EOF'
model "llama-1.3b" {
  layers = 24; hidden = 2048; ffn = 5504; heads = 16
  vocab = 32000; seq_len = 2048
}
train {
  global_batch = 32; micro_batch = 8
  precision = bf16; recompute = none
  lr = 3e-4; warmup_steps = 2; steps = 8; seed = 1
}
EOF

# gen NAME TARGET HEXIC_ARGS...: the program set in $work/NAME.
gen() {
  local name=$1 target=$2
  shift 2
  "$hexic" "$@" --target="$target" -o "$work/$name" >"$work/$name.hexic.txt" 2>&1
}
# build_set NAME: its Makefile, with the first CUDA set's runtime and kernels.
cuda_built=
build_set() {
  local dir=$work/$1 cuda=0
  grep -q NVCC "$dir/Makefile" && cuda=1
  if [ $cuda = 1 ] && [ -n "$cuda_built" ]; then cp -rp "$cuda_built"/obj "$cuda_built"/*.a "$dir"/; fi
  make -C "$dir" -j"$jobs" >"$dir.make.log" 2>&1 || return 1
  if [ $cuda = 1 ] && [ -z "$cuda_built" ]; then cuda_built=$dir; fi
}
# run_set NAME STEPS SECONDS ARGS...: launch.sh; "STEP LOSS MS" lines into
# NAME.steps; true when every step printed. run_rc: launch.sh's status.
run_set() {
  local name=$1 steps=$2 limit=$3
  shift 3
  timeout "$limit" "$work/$name/launch.sh" --steps "$steps" "$@" >"$work/$name.out" 2>&1
  run_rc=$?
  cat "$work/$name.out" >>"$log"
  sed -n 's/^step \([0-9]*\)\/[0-9]* | loss \([0-9.]*\) | lr [^|]*| \([0-9.]*\) ms .*/\1 \2 \3/p' \
    "$work/$name.out" >"$work/$name.steps"
  [ $run_rc -eq 0 ] && [ "$(wc -l <"$work/$name.steps")" -eq "$steps" ]
}
# why NAME: what stopped a set, in one line.
why() {
  local out=$work/$1.out
  if [ "$run_rc" = 124 ]; then echo "timed out"; return; fi
  grep -m 1 -o 'launch.sh: rank [0-9]* ([a-z_0-9]*) failed.*' "$out" || tail -n 1 "$out" | cut -c1-120
}
# ready NAME HEXIC_ARGS...: generated and built, else a FAIL row's reason in
# $reason. gpu_run NAME ...: run_set, turning "no GPU" into $skip.
ready() {
  local name=$1
  shift
  reason=
  if ! gen "$name" "$@"; then reason="hexic: $(grep -m 1 error "$work/$name.hexic.txt")"; return 1; fi
  if ! build_set "$name"; then reason="make failed: $(grep -m 1 'error' "$work/$name.make.log")"; return 1; fi
}
gpu_run() {
  skip=
  if [ $have_gpu = 0 ]; then skip="no GPU (nvidia-smi); generated and built"; return 1; fi
  run_set "$@" && return 0
  if grep -q "no CUDA device" "$work/$1.out"; then skip="no GPU visible to the CUDA runtime"; fi
  return 1
}
# maxrel A B N: the largest |b - a| / a over steps 1..N of A.steps and B.steps
# ("missing" when either lacks one).
maxrel() {
  awk -v n="$3" 'NR == FNR { a[$1] = $2; next } ($1 in a) && $1 <= n { k++
      r = ($2 - a[$1]) / a[$1]; if (r < 0) r = -r; if (r > m) m = r }
    END { if (k < n) print "missing"; else printf "%.2e\n", m }' "$work/$1.steps" "$work/$2.steps"
}
within() { [ "$1" != missing ] && awk -v x="$1" -v t="$2" 'BEGIN { exit !(x <= t) }'; }
# mean NAME FIRST LAST: the mean loss over those steps.
mean() { awk -v a="$2" -v b="$3" '$1 >= a && $1 <= b { s += $2; n++ } END { printf "%.4f", s / n }' "$work/$1.steps"; }
# outcome ROW: a SKIP or FAIL row for a set that did not run.
outcome() {
  if [ -n "$skip" ]; then record "$1" SKIP "$skip"; else record "$1" FAIL "$2"; fi
}

t=$(date +%s)
programs=0
if [ -f "$build/CMakeCache.txt" ] &&
  cmake --build "$build" -j"$jobs" --target hexic hexic-shard >>"$log" 2>&1; then
  programs=1
  if ls /usr/share/common-licenses/* >/dev/null 2>&1; then
    cat /usr/share/common-licenses/* >"$work/text.txt"
  else
    cat "$root"/docs/*.md "$root"/README.md >"$work/text.txt"
  fi
  "$build/hexic-shard" "$work/text.txt" "$work/text.bin" >>"$log" 2>&1 || programs=0
fi
data=(--data "$work/text.bin")

# [tiny, fp32 and bf16 vs the CPU] the CPU single-rank run is the reference.
row32="tiny model, 1 GPU, fp32 vs CPU (20 steps)"
row16="tiny model, 1 GPU, bf16 vs CPU (50 steps)"
cpu_ok=0
if [ $programs = 0 ]; then
  record "$row32" FAIL "hexic or hexic-shard did not build (see $log)"
  record "$row16" FAIL "hexic or hexic-shard did not build"
elif ! ready cpu1 cpu "$tiny" "$root/examples/clusters/cpu1.hx"; then
  record "$row32" FAIL "the CPU reference: $reason"
  record "$row16" FAIL "the CPU reference: $reason"
elif ! run_set cpu1 50 300 "${data[@]}"; then
  record "$row32" FAIL "the CPU reference did not train: $(why cpu1)"
  record "$row16" FAIL "the CPU reference did not train"
else
  cpu_ok=1
fi
if [ $cpu_ok = 1 ]; then
  t=$(date +%s)
  if ! ready g32 cuda "$tiny" "$one"; then
    record "$row32" FAIL "$reason"
  elif ! gpu_run g32 20 120 "${data[@]}"; then
    outcome "$row32" "did not train: $(why g32)"
  else
    d=$(maxrel cpu1 g32 20)
    if within "$d" 1e-4; then
      record "$row32" PASS "max rel. diff $d (tol 1e-4); loss $(mean g32 1 1) -> $(mean g32 20 20); $(elapsed "$t")"
    else
      record "$row32" FAIL "max rel. diff $d > 1e-4"
      paste "$work/cpu1.steps" "$work/g32.steps" | head -20
    fi
  fi
  t=$(date +%s)
  if ! ready g16 cuda "$work/tiny-bf16.hx" "$one"; then
    record "$row16" FAIL "$reason"
  elif ! gpu_run g16 50 120 "${data[@]}"; then
    outcome "$row16" "did not train: $(why g16)"
  else
    d=$(maxrel cpu1 g16 50)
    first=$(mean g16 1 10) last=$(mean g16 41 50)
    figures="max rel. diff $d (tol 2e-2); mean loss steps 1-10 $first, 41-50 $last"
    if within "$d" 2e-2 && awk -v a="$first" -v b="$last" 'BEGIN { exit !(b < a - 0.5) }'; then
      record "$row16" PASS "$figures; $(elapsed "$t")"
    else
      record "$row16" FAIL "$figures (must fall by 0.5)"
    fi
  fi
fi

# [multi-rank plan on one GPU] TP 2 + PP 2 + uneven batches (20 and 12
# sequences): four ranks share the GPU through the MPI transport that stages
# device buffers through host memory; losses as the one-GPU fp32 run's.
row="multi-rank plan on one GPU (TP2+PP2, uneven)"
t=$(date +%s)
if [ $programs = 0 ]; then
  record "$row" FAIL "hexic did not build"
elif ! ready gmr cuda "$tiny" "$work/four.hx" --plan="$root/tests/codegen/plans/tp2_pp2_uneven.json"; then
  record "$row" FAIL "$reason"
elif ! gpu_run gmr 20 180 "${data[@]}"; then
  outcome "$row" "did not train: $(why gmr)"
else
  ref=g32 against="the one-GPU fp32 run"
  if [ ! -s "$work/g32.steps" ] || [ "$(wc -l <"$work/g32.steps")" -ne 20 ]; then
    ref=cpu1 against="the CPU run (the one-GPU run did not train)"
  fi
  d=$(maxrel "$ref" gmr 20)
  if within "$d" 1e-4; then
    record "$row" PASS "max rel. diff $d vs $against (tol 1e-4); $(elapsed "$t")"
  else
    record "$row" FAIL "max rel. diff $d vs $against > 1e-4"
    paste "$work/$ref.steps" "$work/gmr.steps" | head -20
  fi
fi

# [HexiSeq on one GPU, issue 14] seqtiny's hand-written PP x TP x CP x HP
# plan (tests/exec/plans/seq_pp_tp_cp_hp.json: ring attention and ragged
# all-to-alls, one-head devices, uneven token ranges) on eight ranks sharing
# the GPU through the staged MPI transport: the layers take their tokens'
# positions and rtlib/seq's hook on the CUDA kernel table. Losses as the
# same plan's CPU programs within 1e-4, as the other fp32 runs (10 steps).
row="HexiSeq plan on one GPU (8 ranks) vs CPU, fp32"
t=$(date +%s)
seqtiny=$root/tests/exec/models/seqtiny.hx
seqplan=$root/tests/exec/plans/seq_pp_tp_cp_hp.json
{ grep '^gpu ' "$one"; sed -n 's/^gpu \("[^"]*"\).*/node "gpu0" { gpu = \1; gpus = 8; bandwidth = 100 GB\/s }/p' "$one"; } >"$work/eight.hx"
if [ $programs = 0 ]; then
  record "$row" FAIL "hexic did not build"
elif ! ready cpuseq cpu "$seqtiny" "$root/examples/clusters/cpu8.hx" --plan="$seqplan"; then
  record "$row" FAIL "the CPU reference: $reason"
elif ! run_set cpuseq 10 300 "${data[@]}"; then
  record "$row" FAIL "the CPU reference did not train: $(why cpuseq)"
elif ! ready gseq cuda "$seqtiny" "$work/eight.hx" --plan="$seqplan"; then
  record "$row" FAIL "$reason"
elif ! gpu_run gseq 10 300 "${data[@]}"; then
  outcome "$row" "did not train: $(why gseq)"
elif ! grep -q "transport: mpi-staged" "$work/gseq.out"; then
  record "$row" FAIL "eight ranks on one GPU did not take the staged transport"
else
  d=$(maxrel cpuseq gseq 10)
  if within "$d" 1e-4; then
    record "$row" PASS "max rel. diff $d (tol 1e-4); loss $(mean gseq 1 1) -> $(mean gseq 10 10); $(elapsed "$t")"
  else
    record "$row" FAIL "max rel. diff $d > 1e-4"
    paste "$work/cpuseq.steps" "$work/gseq.steps" | head -10
  fi
fi

# [NCCL, issue 13] the one-GPU fp32 set again with HEXIC_TRANSPORT=mpi (the
# staged transport): the same losses as its default NCCL run (one rank has
# nothing to send: any difference is a transport touching what it should
# not), and each run says which transport it took.
row="tiny, 1 GPU: NCCL vs staged MPI (20 steps)"
t=$(date +%s)
if [ ! -s "$work/g32.steps" ] || [ "$(wc -l <"$work/g32.steps")" -ne 20 ]; then
  if [ $have_gpu = 0 ]; then
    record "$row" SKIP "no GPU (nvidia-smi)"
  else
    record "$row" FAIL "the one-GPU fp32 (NCCL) run did not train"
  fi
elif ! grep -q "transport: nccl" "$work/g32.out"; then
  record "$row" FAIL "the one-GPU run did not take NCCL: $(grep -m 1 'transport:' "$work/g32.out")"
else
  # g32.* are the NCCL run's; the staged run of the same set replaces them,
  # so keep them as g32nccl.* and the staged run's as g32mpi.*
  cp "$work/g32.steps" "$work/g32nccl.steps" && cp "$work/g32.out" "$work/g32nccl.out"
  HEXIC_TRANSPORT=mpi run_set g32 20 120 "${data[@]}"
  staged=$?
  mv "$work/g32.steps" "$work/g32mpi.steps" && mv "$work/g32.out" "$work/g32mpi.out"
  cp "$work/g32nccl.steps" "$work/g32.steps" && cp "$work/g32nccl.out" "$work/g32.out"
  if [ $staged -ne 0 ]; then
    record "$row" FAIL "the staged run did not train: $(tail -n 1 "$work/g32mpi.out" | cut -c1-120)"
  elif ! grep -q "transport: mpi-staged" "$work/g32mpi.out"; then
    record "$row" FAIL "HEXIC_TRANSPORT=mpi did not take the staged transport"
  else
    d=$(maxrel g32nccl g32mpi 20)
    if within "$d" 0; then
      record "$row" PASS "losses equal (max rel. diff $d); $(elapsed "$t")"
    else
      record "$row" FAIL "max rel. diff $d (want 0)"
      paste "$work/g32nccl.steps" "$work/g32mpi.steps" | head -20
    fi
  fi
fi

# [several GPUs, issue 13] DP 2, TP 2 and PP 2 of the tiny model over NCCL,
# fp32, each against the one-GPU fp32 run within 1e-5 (20 steps). Needs two
# GPUs of this machine; one GPU skips them with a line saying so.
ngpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
two=$work/two.hx
{ grep '^gpu ' "$one"; sed -n 's/^gpu \("[^"]*"\).*/node "gpu0" { gpu = \1; gpus = 2; bandwidth = 100 GB\/s }/p' "$one"; } >"$two"
python3 - "$work" <<'EOF'
import json, sys
st = lambda ranks, layers: {"ranks": ranks, "tp": len(ranks), "layers": layers,
                             "leader": ranks[0], "recompute": False}
pipe = lambda m, mbs, stages: {"micro_batches": m, "micro_batch_size": mbs, "stages": stages}
plans = {"dp2": [pipe(4, 4, [st([0], [0, 4])]), pipe(4, 4, [st([1], [0, 4])])],
         "tp2": [pipe(4, 8, [st([0, 1], [0, 4])])],
         "pp2": [pipe(4, 8, [st([0], [0, 2]), st([1], [2, 4])])]}
for name, pipes in plans.items():
    json.dump({"strategy": "file", "description": name, "schedule": "1f1b", "pipelines": pipes},
              open("%s/%s.json" % (sys.argv[1], name), "w"))
# DP 2 with ZeRO-1 (issue 16): a hand-written plan's groups split evenly
json.dump({"strategy": "file", "description": "dp2 zero1", "schedule": "1f1b",
           "train": {"optimizer_sharding": "zero1"}, "pipelines": plans["dp2"]},
          open("%s/dp2z.json" % sys.argv[1], "w"))
EOF
for kind in dp2 tp2 pp2; do
  row="tiny, 2 GPUs over NCCL: ${kind^^} vs 1 GPU (fp32)"
  t=$(date +%s)
  if [ "$ngpus" -lt 2 ]; then
    record "$row" SKIP "this machine has ${ngpus:-0} GPU(s): multi-GPU checks need 2"
  elif [ ! -s "$work/g32nccl.steps" ]; then
    record "$row" FAIL "no one-GPU fp32 reference"
  elif ! ready "$kind" cuda "$tiny" "$two" --plan="$work/$kind.json"; then
    record "$row" FAIL "$reason"
  elif ! gpu_run "$kind" 20 180 "${data[@]}"; then
    outcome "$row" "did not train: $(why "$kind")"
  elif ! grep -q "transport: nccl" "$work/$kind.out"; then
    record "$row" FAIL "did not take NCCL: $(grep -m 1 'transport:' "$work/$kind.out")"
  else
    d=$(maxrel g32nccl "$kind" 20)
    if within "$d" 1e-5; then
      record "$row" PASS "max rel. diff $d (tol 1e-5); $(elapsed "$t")"
    else
      record "$row" FAIL "max rel. diff $d > 1e-5"
      paste "$work/g32nccl.steps" "$work/$kind.steps" | head -20
    fi
  fi
done

# [several GPUs, ZeRO-1, issue 16] the DP 2 plan once more with its optimizer
# state sharded (zero1, the default; the hand-written plan's group splits
# evenly): NCCL's uneven reduce-scatter and all-gather (transport_nccl.c)
# against the unsharded DP 2 run above, the same losses within 1e-5 (fp32).
row="tiny, 2 GPUs over NCCL: DP2 zero1 vs DP2 unsharded (fp32)"
t=$(date +%s)
if [ "$ngpus" -lt 2 ]; then
  record "$row" SKIP "this machine has ${ngpus:-0} GPU(s): multi-GPU checks need 2"
elif [ ! -s "$work/dp2.steps" ] || [ "$(wc -l <"$work/dp2.steps")" -ne 20 ]; then
  record "$row" FAIL "the unsharded DP 2 run did not train"
elif ! ready dp2z cuda "$tiny" "$two" --plan="$work/dp2z.json"; then
  record "$row" FAIL "$reason"
elif ! cat "$work/dp2z"/rank_*.c | grep -q '_shards\[\] = {'; then
  record "$row" FAIL "the zero1 plan's rank programs carry no optimizer shards"
elif ! gpu_run dp2z 20 180 "${data[@]}"; then
  outcome "$row" "did not train: $(why dp2z)"
elif ! grep -q "transport: nccl" "$work/dp2z.out"; then
  record "$row" FAIL "did not take NCCL: $(grep -m 1 'transport:' "$work/dp2z.out")"
else
  d=$(maxrel dp2 dp2z 20)
  if within "$d" 1e-5; then
    record "$row" PASS "max rel. diff $d (tol 1e-5); $(elapsed "$t")"
  else
    record "$row" FAIL "max rel. diff $d > 1e-5"
    paste "$work/dp2.steps" "$work/dp2z.steps" | head -20
  fi
fi

# [throughput] the 1.3B Llama, bf16, micro-batches of 8, one GPU: 8 steps,
# the first 2 left out (start-up, cuBLASLt's algorithm choice). MFU as the
# simulator counts it (model FLOPs, 3 x forward, no recompute): the plan's
# simulated MFU scaled by measured over simulated tokens/s, so against the
# cluster file's dense bf16 peak (989 TFLOPS for the H200).
row="1.3B throughput, bf16, 1 GPU"
t=$(date +%s)
if [ $programs = 0 ]; then
  record "$row" FAIL "hexic did not build"
elif ! ready g13 cuda "$work/llama-1.3b.hx" "$one"; then
  record "$row" FAIL "$reason"
elif ! gpu_run g13 8 300; then
  outcome "$row" "did not run: $(why g13)"
else
  plan_peak=$(sed -n 's/^gpu .*tflops = \([0-9.]*\).*/\1/p' "$one" | head -n 1)
  figures=$(python3 - "$work/g13/plan.json" "$work/g13.steps" "$plan_peak" <<'EOF'
import json, sys
plan = json.load(open(sys.argv[1]))
steps = [line.split() for line in open(sys.argv[2])]
ms = [float(s[2]) for s in steps[2:]]
tokens = plan["model"]["global_batch"] * plan["model"]["seq_len"]
tps = tokens / (sum(ms) / len(ms) / 1000)
sim = plan["simulated"]
mfu = sim["mfu"] * tps / sim["tokens_per_s"]
print("%.0f tokens/s, MFU %.1f%% of %s TFLOPS (target >= 40%%), %.0f ms/step; simulated %.0f tokens/s"
      % (tps, 100 * mfu, sys.argv[3], sum(ms) / len(ms), sim["tokens_per_s"]))
EOF
  )
  if [ -n "$figures" ]; then
    record "$row" PASS "$figures; $(elapsed "$t")"
  else
    record "$row" FAIL "no figures from $work/g13.steps"
  fi
fi

# ---- attention bench (figures, not a check) -----------------------------------
if [ $built = 1 ]; then
  echo "== attention bench"
  t=$(date +%s)
  bench_out=$(timeout 180 "$bench_bin" 2>&1)
  rc=$?
  echo "$bench_out" | tee -a "$log"
  # "tc  T 2048 nseq 8 heads 16/16 hd 128  fwd X ms Y TFLOP/s  bwd X ms Y TFLOP/s"
  best=$(awk '$1 == "tc" && $3 == 2048 && $9 == 128 {print "T 2048 hd 128: fwd " $13 ", bwd " $18 " TFLOP/s"; exit}' <<<"$bench_out")
  case $rc in
  0) record "attention bench (tensor cores)" PASS "${best:-see log}; $(elapsed "$t")" ;;
  77) record "attention bench (tensor cores)" SKIP "no GPU" ;;
  *) record "attention bench (tensor cores)" FAIL "exit $rc: $(tail -1 <<<"$bench_out")" ;;
  esac
fi

# ---- summary ------------------------------------------------------------------
no_gpu=0
for row in "${rows[@]}"; do
  case $row in *"|SKIP|no GPU"*) no_gpu=1 ;; esac
done
echo
echo "== summary: tests/gpu/run.sh on ${gpu_name:-an unknown GPU}, $(elapsed "$t_start") (log: $log)"
printf '%-46s %-5s %s\n' "check" "result" "figures"
printf '%-46s %-5s %s\n' "-----" "------" "-------"
failures=0
for row in "${rows[@]}"; do
  IFS='|' read -r name status figures <<<"$row"
  printf '%-46s %-5s %s\n' "$name" "$status" "$figures"
  [ "$status" = FAIL ] && failures=$((failures + 1))
done
echo
if [ $no_gpu = 1 ] && [ $failures -eq 0 ]; then
  echo "gpu: NO GPU visible to the CUDA runtime: the build was checked, nothing else ran"
  exit 2
elif [ $failures -eq 0 ]; then
  echo "gpu: nothing failed (SKIP rows did not run)"
else
  echo "gpu: $failures check(s) FAILED: see the rows above and $log"
fi
exit $((failures > 0))
