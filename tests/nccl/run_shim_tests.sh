#!/usr/bin/env bash
# The NCCL shim's own checks (test_nccl_shim.c) under mpirun:
#   run_shim_tests.sh MPIEXEC TEST_BINARY [ok|order|count|missing|unmatched|all]
# ok must pass on 4 ranks; each deadlock case (2 ranks) must end non-zero
# within seconds with the shim's report naming the communicator, the ranks
# and the op numbers.
set -uo pipefail
mpiexec=$1 bin=$2 part=${3:-all}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
# MPI keeps its allocations until exit (an ASan build of the test)
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0}
log=$(mktemp)
trap 'rm -f "$log"' EXIT
fail=0
# expect CASE NP PATTERN...: the case's exit status is non-zero and its
# output holds every pattern (ok: status 0).
expect() {
  local case=$1 np=$2 rc p
  shift 2
  # the bounded waits: short for the two cases that need them, the default
  # (minutes) elsewhere, so a loaded machine cannot fail the others
  local limit=300
  case $case in missing | unmatched) limit=5 ;; esac
  HEXIC_NCCL_SHIM_TIMEOUT_S=$limit timeout 60 "$mpiexec" --oversubscribe -np "$np" "$bin" "$case" >"$log" 2>&1
  rc=$?
  if [ "$case" = ok ]; then
    [ $rc -eq 0 ] || { echo "FAIL: shim $case (status $rc)"; cat "$log"; fail=1; return; }
  elif [ $rc -eq 0 ] || [ $rc -eq 124 ]; then
    echo "FAIL: shim $case: status $rc, want a report and a non-zero status"; cat "$log"; fail=1; return
  fi
  for p in "$@"; do
    grep -q -- "$p" "$log" || { echo "FAIL: shim $case: no '$p' in:"; cat "$log"; fail=1; return; }
  done
  echo "shim $case: $(grep -m 1 -o 'nccl-shim: .*' "$log" | cut -c1-400 || grep -m 1 ok "$log")"
}
case $part in all | ok) expect ok 4 "every call as NCCL's" ;; esac
case $part in all | order) expect order 2 "collective #0 differs" "AllReduce(count 4, float32, sum)" \
  "Broadcast(count 4, float32, root 0)" "init#0 of world rank 0" ;; esac
case $part in all | count) expect count 2 "collective #0 differs" "AllReduce(count 8" ;; esac
case $part in all | missing) expect missing 2 "never called by rank(s) 1 (world 1)" "collective #0" ;; esac
case $part in all | unmatched) expect unmatched 2 "send #0 (32 bytes) to rank 1 (world 1) has no matching receive" ;; esac
exit $fail
