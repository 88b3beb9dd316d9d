# The GPU checks' bookkeeping, sourced by tests/gpu/run.sh and driven
# without a GPU by tests/gpukit/test_table.sh: the rows of the summary
# table, a row's status from an exit code, the overall deadline and each
# check's share of it, the MFU verdict. Nothing here runs a GPU.
#
# Rows: "check|status|figures"; status is PASS, FAIL or SKIP and the figures
# say why on the row itself (a SKIP or FAIL never sends the reader to a log).

rows=()
record() { rows+=("$1|$2|$3"); echo "== $1: $2 ${3:+($3)}"; }

# ---- status from an exit code -----------------------------------------------
# signal_name RC: "SIGSEGV" for 139 and the like (128 + the signal number).
signal_name() {
  local name
  name=$(kill -l "$(($1 - 128))" 2>/dev/null) || name=$(($1 - 128))
  echo "SIG${name#SIG}"
}
# died RC LIMIT: the reason a process that exited RC under `timeout LIMIT`
# did not finish, or nothing when it finished on its own. 124 is timeout's
# own exit (the limit passed), 137 its KILL after that; any other status of
# 128 or more is a signal (a crash: never a count of failed checks).
died() {
  case $1 in
  124 | 137) echo "timed out (${2} s)" ;;
  *) if [ "$1" -ge 128 ]; then echo "killed by $(signal_name "$1") (exit $1)"; fi ;;
  esac
}

# kernel_row GROUP RC OUT LIMIT: the row of one check_kernels group from its
# exit status and stdout (check_kernels.cu: 0 all passed, 1 some failed,
# 3 a CUDA error, 77 no GPU).
kernel_row() {
  local group=$1 rc=$2 out=$3 limit=$4 npass nfail worst dead
  npass=$(grep -c '^PASS' <<<"$out")
  nfail=$(grep -c '^FAIL' <<<"$out")
  worst=$(awk '$1 == "PASS" || $1 == "FAIL" {
      for (i = 1; i < NF; i++) { if ($i == "err") e = $(i+1); if ($i == "tol") t = $(i+1) }
      if (t + 0 > 0 && e / t > w) { w = e / t; name = $2 " " $3 }
    } END { if (name != "") printf "worst err/tol %.2f (%s)", w, name }' <<<"$out")
  dead=$(died "$rc" "$limit")
  if [ -n "$dead" ]; then
    record "kernels: $group" FAIL "$dead after $npass passed, $nfail failed"
    return
  fi
  case $rc in
  0)
    if [ "$npass" -gt 0 ] && [ "$nfail" -eq 0 ]; then
      record "kernels: $group" PASS "$npass checks, $worst"
    else
      record "kernels: $group" FAIL "exit 0 with $npass PASS and $nfail FAIL lines"
    fi
    ;;
  77) record "kernels: $group" SKIP "no GPU visible to the CUDA runtime: $(grep -m 1 -o 'no CUDA device.*' <<<"$out" | cut -c1-100)" ;;
  3) record "kernels: $group" FAIL "CUDA error after $npass passed: $(grep '^ERROR' <<<"$out" | head -1 | cut -c7-)" ;;
  1)
    if [ "$nfail" -gt 0 ]; then
      record "kernels: $group" FAIL "$nfail of $((npass + nfail)) failed: $(grep '^FAIL' <<<"$out" | awk '{print $2 "/" $3}' | head -4 | tr '\n' ' ')"
    else
      record "kernels: $group" FAIL "exit 1 with no FAIL line: $(tail -n 1 <<<"$out" | cut -c1-100)"
    fi
    ;;
  *) record "kernels: $group" FAIL "exit $rc after $npass passed: $(tail -n 1 <<<"$out" | cut -c1-100)" ;;
  esac
}

# ---- the deadline -------------------------------------------------------------
# deadline_start BUDGET_S: the whole run must end BUDGET_S seconds from now.
# Each check has a share (seconds; shares are set by the caller in the order
# the checks run). allot NAME prints the check's time limit: what is left of
# the budget less the shares of the checks after it, so time an earlier
# check did not use passes on, and a check never eats a later one's share;
# at least its own share when that much is left. 0 when under MIN_S (5) is
# left: the caller records a SKIP naming the deadline.
declare -A share=()
order=()
deadline_start() {
  t_start=$(date +%s)
  deadline=$((t_start + $1))
  budget=$1
}
left() { echo $((deadline - $(date +%s))); }
allot() {
  local name=$1 later=0 seen=0 n rest limit
  for n in "${order[@]}"; do
    if [ $seen = 1 ]; then later=$((later + ${share[$n]})); fi
    if [ "$n" = "$name" ]; then seen=1; fi
  done
  rest=$(left)
  limit=$((rest - later))
  if [ "$limit" -lt "${share[$name]}" ]; then limit=${share[$name]}; fi
  if [ "$limit" -gt "$rest" ]; then limit=$rest; fi
  if [ "$limit" -lt "${MIN_S:-5}" ]; then limit=0; fi
  echo "$limit"
}
# shares_line: "kernels 150 s, sanitizer 60 s, ..." for the header.
shares_line() {
  local n out=
  for n in "${order[@]}"; do out+="${out:+, }$n ${share[$n]} s"; done
  echo "$out"
}
past_deadline() { echo "not run: the ${budget} s deadline left $(left) s, $1 needs ${MIN_S:-5}"; }

# ---- MFU ------------------------------------------------------------------------
# mfu_verdict MFU_PERCENT TARGET_PERCENT: how the figure reads against the
# target. The throughput row's status says whether the run worked (PASS:
# it trained and printed figures; FAIL: it did not); being slow is a figure
# ("below target"), not a failure of the check.
mfu_verdict() {
  if awk -v m="$1" -v t="$2" 'BEGIN { exit !(m + 0 < t + 0) }'; then
    echo "below target (${2}%)"
  else
    echo "at or above target (${2}%)"
  fi
}

# ---- the table --------------------------------------------------------------------
# summary TITLE: prints the table; sets failures and no_gpu.
summary() {
  local row name status figures
  no_gpu=0
  failures=0
  for row in "${rows[@]}"; do
    case $row in *"|SKIP|no GPU"*) no_gpu=1 ;; esac
  done
  echo
  echo "== summary: $1"
  printf '%-50s %-6s %s\n' "check" "result" "figures"
  printf '%-50s %-6s %s\n' "-----" "------" "-------"
  for row in "${rows[@]}"; do
    IFS='|' read -r name status figures <<<"$row"
    printf '%-50s %-6s %s\n' "$name" "$status" "$figures"
    [ "$status" = FAIL ] && failures=$((failures + 1))
  done
  echo
}
# verdict: the closing line and the exit status (0 nothing failed, 1 a check
# failed, 2 no GPU and nothing failed).
verdict() {
  if [ "$failures" -gt 0 ]; then
    echo "gpu: $failures check(s) FAILED: see the rows above and $log"
    return 1
  elif [ "$no_gpu" = 1 ]; then
    echo "gpu: NO GPU visible to the CUDA runtime: only the kit was checked"
    return 2
  fi
  echo "gpu: nothing failed (SKIP rows did not run)"
  return 0
}

# steps_of FILE: "STEP LOSS MS" for each step line launch.sh printed.
steps_of() {
  sed -n 's/^step \([0-9]*\)\/[0-9]* | loss \([0-9.]*\) | lr [^|]*| \([0-9.]*\) ms .*/\1 \2 \3/p' "$1"
}

# ver_lt A B: true when version A (12.2, 535.104.05) is older than B; false
# when A is empty.
ver_lt() {
  [ -n "$1" ] && [ -n "$2" ] && awk -v a="$1" -v b="$2" 'BEGIN {
    n = split(a, x, "."); m = split(b, y, "."); if (m > n) n = m
    for (i = 1; i <= n; i++) { if (x[i] + 0 < y[i] + 0) exit 0; if (x[i] + 0 > y[i] + 0) exit 1 }
    exit 1 }'
}
