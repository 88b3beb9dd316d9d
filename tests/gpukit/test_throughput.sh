#!/usr/bin/env bash
# bench/gpu_throughput.sh on a machine without a GPU: it must say it needs
# one and exit 2, both when it probes with the kernels' bench program ($1,
# CUDA builds: it finds no device and exits 77) and when it has none to
# probe with (nvidia-smi decides). Skipped (77) where a GPU is visible:
# there the script measures, and tests/gpu/run.sh runs it.
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
script=$root/bench/gpu_throughput.sh
if nvidia-smi -L 2>/dev/null | grep -q '^GPU'; then
  echo "a GPU is visible: gpu_throughput.sh would measure (tests/gpu/run.sh runs it)"
  exit 77
fi
fail=0
expect_no_gpu() {
  local what=$1 out rc
  shift
  out=$(bash "$script" "$@" 2>&1)
  rc=$?
  echo "$what: exit $rc: $out"
  if [ $rc != 2 ]; then
    echo "FAIL: $what: exit $rc, expected 2"
    fail=1
  fi
  if ! grep -q 'needs a GPU' <<<"$out"; then
    echo "FAIL: $what: no 'needs a GPU' in its output"
    fail=1
  fi
}
if [ $# -ge 1 ]; then
  expect_no_gpu "with gpu_bench" --bench "$1" --quick
fi
# An empty kit: nvidia-smi decides (or a gpu_bench of build-gpu/ or build/).
empty=$(mktemp -d /tmp/gpukit-throughput.XXXXXX)
trap 'rm -rf "$empty"' EXIT
expect_no_gpu "with an empty kit" --kit "$empty"
exit $fail
