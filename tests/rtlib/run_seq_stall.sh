#!/usr/bin/env bash
# A rank of a HexiSeq stage stops answering while the others run the
# attention hook: the job must end within the watchdog bound, every report
# naming that rank (the hook's waits name their peers, so the stall trace
# reaches it through the all-to-alls and the ring).
#   run_seq_stall.sh MPIEXEC TEST_RT_SEQ CASE NP RANK
set -u
mpiexec=$1 program=$2 case_name=$3 np=$4 stalled=$5
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0}
out=$(mktemp)
trap 'rm -f "$out"' EXIT
fail() {
  echo "FAIL (seq stall): $*"
  echo "---- output ----"
  cat "$out"
  exit 1
}
start=$SECONDS
"$mpiexec" --oversubscribe -np "$np" -x HEXIC_TIMEOUT_S=2 "$program" "$case_name" stall "$stalled" \
  >"$out" 2>&1
status=$?
elapsed=$((SECONDS - start))
[ "$status" -ne 0 ] || fail "exit status 0, expected non-zero"
grep -qF "test_rt_seq: rank $stalled stops answering" "$out" || fail "rank $stalled did not stop"
grep -q "hexic-rt: failed rank $stalled: it does not answer (stopped, hung or dead); rank [0-9]* waits on it (the " "$out" ||
  fail "no report names rank $stalled"
if grep "hexic-rt: failed rank" "$out" | grep -qv "failed rank $stalled:"; then fail "another rank was named"; fi
[ "$elapsed" -lt 60 ] || fail "took ${elapsed}s: the stall did not end the job"
grep "hexic-rt: failed rank" "$out" | head -n 1
echo "ok (seq stall, rank $stalled of $case_name)"
