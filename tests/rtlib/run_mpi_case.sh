#!/usr/bin/env bash
# One mpirun scenario of the runtime library, checked end to end:
#   run_mpi_case.sh CASE MPIEXEC PROBE WORKDIR
# Each case states the exit status and the messages it needs; a failure
# prints the whole output.
set -u
case_name=$1 mpiexec=$2 probe=$3 work=$4
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1
# MPI keeps allocations until exit; leaks are checked by the non-MPI tests.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0}
mpirun=("$mpiexec" --oversubscribe)
out=$(mktemp)
trap 'rm -f "$out"' EXIT

fail() {
  echo "FAIL ($case_name): $*"
  echo "---- output ----"
  cat "$out"
  exit 1
}

# run EXPECTED_STATUS ARGS...: EXPECTED_STATUS is 0 or "nonzero".
run() {
  local want=$1
  shift
  local start=$SECONDS
  "${mpirun[@]}" "$@" >"$out" 2>&1
  status=$?
  elapsed=$((SECONDS - start))
  if [ "$want" = 0 ] && [ "$status" -ne 0 ]; then fail "exit status $status, expected 0"; fi
  if [ "$want" = nonzero ] && [ "$status" -eq 0 ]; then fail "exit status 0, expected non-zero"; fi
}

expect() { grep -qF -- "$1" "$out" || fail "missing: $1"; }

case $case_name in
world_ok)
  run 0 -np 2 "$probe" world self 2 plan-a
  expect "hexic: world ok: 2 ranks" ;;
world_count)
  run nonzero -np 2 "$probe" world self 3 plan-a
  for r in 0 1; do
    expect "hexic-rt: rank $r: error: launched world does not match the plan: the plan has 3 ranks but 2 processes were launched"
  done ;;
world_order)
  # rank_0001's binary started as world rank 0 and the other way round
  run nonzero -np 1 "$probe" world 1 2 plan-a : -np 1 "$probe" world 0 2 plan-a
  for r in 0 1; do
    expect "hexic-rt: rank $r: error: launched world does not match the plan: world rank 0 runs the program of plan rank 1 (rank_0001)"
  done ;;
world_fingerprint)
  run nonzero -np 1 "$probe" world self 2 plan-a : -np 1 "$probe" world self 2 plan-b
  for r in 0 1; do
    expect "hexic-rt: rank $r: error: launched world does not match the plan: world rank 1 runs a program of another plan (fingerprint 'plan-b', rank 0 has 'plan-a')"
  done ;;
watchdog_hang)
  # Rank 1 stops answering and sleeps 120 s with its own watchdog off: only
  # rank 0's watchdog (2 s) can end the job well before that.
  run nonzero -np 2 -x HEXIC_TIMEOUT_S=2 "$probe" hang
  expect "probe: rank 1 stops answering"
  expect "hexic-rt: rank 0: error: no progress for 2."
  [ "$elapsed" -lt 60 ] || fail "took ${elapsed}s: the watchdog did not end the job" ;;
watchdog_die)
  # Rank 1 exits mid-run while rank 0 waits on it: the job must end, non-zero.
  run nonzero -np 2 -x HEXIC_TIMEOUT_S=2 "$probe" die
  expect "probe: rank 1 exits mid-run"
  if grep -qF "should never end" "$out"; then fail "rank 0 went on without its peer"; fi ;;
watchdog_chain)
  # Rank 0 times out first, but the rank that stopped is 3, two waits away
  # (a receive, then a collective, then a receive): every report names 3.
  run nonzero -np 4 -x HEXIC_TIMEOUT_S=2 "$probe" chain
  expect "probe: rank 3 stops answering"
  grep -q "hexic-rt: rank 0: error: no progress for [0-9.]* s waiting (probe receive, micro-batch 0); rank 3 does not answer within 2 s" "$out" ||
    fail "rank 0 did not trace its stall to rank 3"
  expect "hexic-rt: failed rank 3: it does not answer (stopped, hung or dead); rank 2 waits on it (probe receive, micro-batch 2)"
  if grep "hexic-rt: failed rank" "$out" | grep -qv "failed rank 3:"; then fail "another rank was named"; fi
  [ "$elapsed" -lt 60 ] || fail "took ${elapsed}s: the trace did not end the job" ;;
transport_fault)
  # A transport's fault hook (NCCL's asynchronous error, faked) ends the job
  # through the watchdog, well before HEXIC_TIMEOUT_S, after its abort hook.
  run nonzero -np 2 -x HEXIC_TIMEOUT_S=30 "$probe" transport_fault
  expect "hexic-rt: rank 1: error: probe: a fake transport fault; exiting"
  expect "probe: rank 1: abort hook ran"
  if grep -qF "outlived" "$out"; then fail "rank 1 went on after its fault"; fi
  [ "$elapsed" -lt 25 ] || fail "took ${elapsed}s: the fault did not end the job" ;;
wait_until)
  # A wait on a transport's own condition is traced like a wait on MPI's.
  run nonzero -np 2 -x HEXIC_TIMEOUT_S=2 "$probe" wait_until
  expect "probe: rank 1 stops answering"
  expect "hexic-rt: failed rank 1: it does not answer (stopped, hung or dead); rank 0 waits on it (probe event, micro-batch 0)"
  expect "probe: rank 0: abort hook ran"
  if grep -qF "should never end" "$out"; then fail "the wait completed"; fi
  [ "$elapsed" -lt 60 ] || fail "took ${elapsed}s: the trace did not end the job" ;;
watchdog_bad_env)
  run nonzero -np 1 -x HEXIC_TIMEOUT_S=soon "$probe" world self 1 plan-a
  expect "HEXIC_TIMEOUT_S='soon' is not a positive number of seconds" ;;
ckpt)
  rm -rf "$work"
  run 0 -np 2 "$probe" ckpt "$work"
  expect "hexic-rt: skipping checkpoint $work/step_00000003: rank_0001.ckpt is corrupt"
  expect "hexic: ckpt ok: resumed step 2"
  rm -rf "$work" ;;
*)
  fail "unknown case" ;;
esac
echo "ok ($case_name)"
