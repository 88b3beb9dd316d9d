#!/usr/bin/env bash
# One rank of a tiny Llama through hx_rt_main on each backend, compared:
#   run_backend.sh MPIEXEC CPU_BIN CUDA_BIN|- WEIGHTS_CMP WORKDIR
# CPU_BIN (rt_backend_cpu) trains 3 steps in fp32 and dumps its weights; in
# bf16 it gives the same losses (the CPU computes in fp32) and says so.
# With CUDA_BIN (rt_backend_cuda, or its host emulation) the same 3 steps in
# fp32 must give the CPU's losses within 1e-4 relative and its weights
# within 1e-4, and 3 steps in bf16 its losses within 2%. Exit 77 (skipped)
# when CUDA_BIN finds no GPU.
set -u
mpiexec=$1 cpu=$2 cuda=$3 weights_cmp=$4 work=$5
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1 OPENBLAS_NUM_THREADS=1
# CUDA maps memory where ASan protects its shadow gap by default.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0:protect_shadow_gap=0}
rm -rf "$work" && mkdir -p "$work" && cd "$work" || exit 1

fail() {
  echo "FAIL: $*"
  for f in *.log; do echo "---- $f ----"; cat "$f"; done
  exit 1
}

# train NAME BIN PRECISION: 3 steps, weights to NAME.w, output to NAME.log.
train() {
  "$mpiexec" --oversubscribe -np 1 "$2" --precision "$3" --steps 3 --dump-weights "$1.w" \
    >"$1.log" 2>&1
}

losses() { sed -n 's/^step [0-9]*\/[0-9]* | loss \([0-9.]*\) .*/\1/p' "$1.log"; }

# close A B REL: the two loss lists have 3 entries each, pairwise within REL.
close() {
  paste <(losses "$1") <(losses "$2") | awk -v rel="$3" '
    { n++; d = $1 - $2; if (d < 0) d = -d; if (d > rel * $1 || $1 == "" || $2 == "") bad++ }
    END { exit !(n == 3 && bad == 0) }'
}

train cpu "$cpu" fp32 || fail "the CPU backend's run failed"
[ "$(losses cpu | wc -l)" = 3 ] || fail "the CPU run printed no 3 loss lines"
grep -q "weights: .* written to cpu.w" cpu.log || fail "the CPU run dumped no weights"
# The CPU computes in fp32 whatever the plan says, and says so once.
train cpu16 "$cpu" bf16 || fail "the CPU backend's bf16 run failed"
[ "$(losses cpu16)" = "$(losses cpu)" ] || fail "the CPU backend's bf16 run is not its fp32 run"
[ "$(grep -c "precision: the plan says bf16; the CPU backend computes in fp32" cpu16.log)" = 1 ] ||
  fail "the CPU backend does not say once that it runs a bf16 plan in fp32"
[ "$cuda" = - ] && { echo "cpu: $(losses cpu | tr '\n' ' ')"; exit 0; }

train cuda32 "$cuda" fp32
status=$?
[ $status = 77 ] && { echo "no GPU: skipped"; exit 77; }
[ $status = 0 ] || fail "the CUDA backend's fp32 run exited $status"
close cpu cuda32 1e-4 || fail "fp32 losses differ from the CPU's by more than 1e-4 relative"
"$weights_cmp" cpu.w cuda32.w 1e-4 >cmp32.log 2>&1 || fail "fp32 weights differ from the CPU's"

train cuda16 "$cuda" bf16 || fail "the CUDA backend's bf16 run failed"
close cpu cuda16 0.02 || fail "bf16 losses differ from the CPU's fp32 by more than 2%"
echo "cpu:  $(losses cpu | tr '\n' ' ')"
echo "fp32: $(losses cuda32 | tr '\n' ' ')"
echo "bf16: $(losses cuda16 | tr '\n' ' ')"
