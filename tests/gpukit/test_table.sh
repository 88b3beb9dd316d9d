#!/usr/bin/env bash
# tests/gpu/table.sh without a GPU: a row's status from an exit code (a
# signal or a timeout is a FAIL, never "0 of N failed"), the deadline's
# shares, the MFU verdict and the table's exit status.
set -uo pipefail
cd "$(dirname "$0")/../.."
. tests/gpu/table.sh >/dev/null
fails=0
expect() { # WHAT PATTERN TEXT
  if [[ $3 == $2 ]]; then echo "ok   $1"; else echo "FAIL $1: got '$3', want '$2'"; fails=$((fails + 1)); fi
}
last() { echo "${rows[${#rows[@]} - 1]}"; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# A fake check binary that kills itself with a signal after one PASS line.
cat >"$tmp/fake" <<'FAKE'
#!/usr/bin/env bash
echo "PASS  a.b  fp32  err 1e-06  tol 1e-05"
case $1 in
segv) kill -SEGV $$ ;;
hang) sleep 30 ;;
fail) echo "FAIL  c.d  bf16  err 1e-01  tol 1e-02"; exit 1 ;;
nodev) echo "check_kernels: no CUDA device (cudaErrorNoDevice: no CUDA-capable device is detected; driver CUDA 0.0, runtime CUDA 13.0): skipped"; exit 77 ;;
cuda) echo "ERROR cudaMemcpy: an illegal memory access was encountered"; exit 3 ;;
esac
FAKE
chmod +x "$tmp/fake"
for case in segv hang fail nodev cuda ok; do
  out=$(timeout -k 1 2 "$tmp/fake" $case 2>&1)
  rc=$?
  kernel_row "$case" "$rc" "$out" 2 >/dev/null
  eval "row_$case=\$(last)"
done
expect "a signal is a FAIL naming it" 'kernels: segv|FAIL|killed by SIGSEGV (exit 139) after 1 passed, 0 failed' "$row_segv"
expect "a timeout is a FAIL" 'kernels: hang|FAIL|timed out (2 s) after 1 passed*' "$row_hang"
expect "failed checks are counted" 'kernels: fail|FAIL|1 of 2 failed: c.d/bf16 ' "$row_fail"
expect "no device is a SKIP" 'kernels: nodev|SKIP|no GPU visible*cudaErrorNoDevice*' "$row_nodev"
expect "a CUDA error is a FAIL" 'kernels: cuda|FAIL|CUDA error after 1 passed: cudaMemcpy*' "$row_cuda"
expect "all passed" 'kernels: ok|PASS|1 checks, worst err/tol 0.10 (a.b fp32)' "$row_ok"
kernel_row empty 0 "" 5 >/dev/null
expect "exit 0 without a PASS line is a FAIL" '*|FAIL|exit 0 with 0 PASS*' "$(last)"
kernel_row killed 137 "PASS x y err 0 tol 1" 5 >/dev/null
expect "KILL after the timeout is a timeout" '*|FAIL|timed out (5 s)*' "$(last)"
expect "died: 0 is nothing" '' "$(died 0 5)"
expect "died: 1 is nothing" '' "$(died 1 5)"
expect "died: 134 is SIGABRT" 'killed by SIGABRT (exit 134)' "$(died 134 5)"

# The deadline: a check's limit is what is left less the later shares, at
# least its own share, never past the end; 0 under MIN_S.
order=(a b c)
share=([a]=10 [b]=20 [c]=30)
deadline_start 100
expect "first check takes the slack" '50' "$(allot a)"
expect "a middle check" '70' "$(allot b)"
expect "the last check takes what is left" '100' "$(allot c)"
deadline_start 40
expect "a short budget: at least the own share" '20' "$(allot b)"
deadline_start 15
expect "never past the end" '15' "$(allot c)"
deadline_start 3
expect "under MIN_S: 0" '0' "$(allot a)"
expect "the past-deadline reason" 'not run: the 3 s deadline left 3 s, a needs 5' "$(past_deadline a)"
expect "shares line" 'a 10 s, b 20 s, c 30 s' "$(shares_line)"

# MFU against the 40% target: a figure, not the status.
expect "below target" 'below target (40%)' "$(mfu_verdict 35.2 40)"
expect "at target" 'at or above target (40%)' "$(mfu_verdict 40.0 40)"

# The exit status of the table.
log=/dev/null
rows=()
record "x" PASS "" >/dev/null
record "y" SKIP "no GPU: none" >/dev/null
summary t >/dev/null
verdict >/dev/null
expect "no GPU and nothing failed: 2" 2 "$?"
record "z" FAIL "boom" >/dev/null
summary t >/dev/null
verdict >/dev/null
expect "a FAIL: 1" 1 "$?"
rows=()
record "x" PASS "" >/dev/null
record "w" SKIP "this machine has 1 GPU(s)" >/dev/null
summary t >/dev/null
verdict >/dev/null
expect "PASS and other SKIPs: 0" 0 "$?"

expect "12.2 is older than 13.0" yes "$(ver_lt 12.2 13.0 && echo yes)"
expect "13.0 is not older than 13.0" no "$(ver_lt 13.0 13.0 || echo no)"
expect "13.1 is not older than 13.0" no "$(ver_lt 13.1 13 || echo no)"
expect "nothing is not older" no "$(ver_lt "" 13.0 || echo no)"

steps_line='step 3/20 | loss 5.432100 | lr 1.0000e-04 | 12.5 ms | 1000 tok/s'
echo "$steps_line" >"$tmp/s.out"
expect "steps_of" '3 5.432100 12.5' "$(steps_of "$tmp/s.out")"

[ $fails = 0 ] && echo "table: all passed"
exit $((fails > 0))
