#!/usr/bin/env bash
# --emulate end to end (issue 15, item 2) on a mixed cluster of 4 CPU ranks,
# two of them three times slower (tests/exec/clusters/mixed4.hx), TP x PP:
# the slow ranks' programs carry slowdown 3 and the fast ones' 1, and the
# emulated run trains exactly as the plain one (same losses: emulation only
# sleeps). Step times are not asserted (bench/measured.sh prints them).
# Then the same compile with an emulation block naming a host type twice as
# fast as the fast ranks (tests/exec/clusters/mixed4-host.hx): the slowdowns
# are against it, 2 and 6 (compiled and read, not run).
#   run_emulate.sh WORKDIR SRCDIR HEXIC
set -uo pipefail
work=$1 src=$2 hexic=$3
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
export HEXIC_TIMEOUT_S=${HEXIC_TIMEOUT_S:-30}
fail() { echo "FAIL: $*" >&2; exit 1; }
rm -rf "$work" && mkdir -p "$work" && cd "$work" || exit 1

# check_slowdowns DIR FAST SLOW AGAINST: each rank's program carries FAST or SLOW
# as its device is "fast" or "slow", and the comment above says against what.
check_slowdowns() {
  local dir=$1 fast=$2 slow=$3 against=$4 r dev want
  for r in 0 1 2 3; do
    dev=$(sed -n 's/^ \* MPI rank [0-9]* of 4: device \([a-z]*\):.*/\1/p' "$dir/rank_000$r.c")
    want=$fast
    [ "$dev" = slow ] && want=$slow
    grep -q "^    .slowdown = $want,$" "$dir/rank_000$r.c" || fail "$dir rank $r on $dev: not slowdown $want"
    grep -q "^// --emulate: this device's speed against $against, and its links$" "$dir/rank_000$r.c" ||
      fail "$dir rank $r: the slowdown's comment does not say it is against $against"
  done
}

"$hexic" "$src/examples/models/tiny.hx" "$src/tests/exec/clusters/mixed4.hx" --strategy=symmetric \
  -o m >plan.txt || fail "hexic: $(cat plan.txt)"
check_slowdowns m 1.0 3.0 "the cluster's fastest"
"$hexic" "$src/examples/models/tiny.hx" "$src/tests/exec/clusters/mixed4.hx" \
  "$src/tests/exec/clusters/mixed4-host.hx" --strategy=symmetric -o host >plan-host.txt 2>&1 ||
  fail "hexic with an emulation host: $(cat plan-host.txt)"
grep -q "warning" plan-host.txt && fail "hexic with an emulation host warns: $(cat plan-host.txt)"
check_slowdowns host 2.0 6.0 "the emulation host"
grep -q '^    .emulation = &emulation,$' m/rank_0000.c || fail "no emulation figures in rank_0000.c"
make -s -C m -j2 >make.log 2>&1 || { cat make.log; fail "make"; }

losses() { sed -n 's/^step \([0-9]*\)\/[0-9]* | loss \([0-9.]*\) .*/\1 \2/p' "$1"; }
# 5 steps: 3 calibrate (one rank's compute at a time), 2 run at the devices' speeds
m/launch.sh --steps 5 >plain.out 2>&1 || { cat plain.out; fail "plain run"; }
m/launch.sh --steps 5 --emulate >emu.out 2>&1 || { cat emu.out; fail "--emulate run"; }
grep -q "emulating the cluster file's device and link speeds" emu.out || { cat emu.out; fail "no banner"; }
grep -q "emulating" plain.out && fail "the plain run emulates"
[ "$(losses plain.out | wc -l)" -eq 5 ] || { cat plain.out; fail "plain: not 5 step lines"; }
# the closing line: every rank's compute of a step at its device's speed, a
# slow rank's above a fast one's (3x slower, the same share of the batch)
report=$(grep "compute of one step at each device's speed:" emu.out) ||
  { cat emu.out; fail "no closing line of per-rank compute"; }
for r in 0 1 2 3; do
  grep -q "rank $r [0-9.]* s" <<<"$report" || fail "rank $r missing from: $report"
done
compute_of() { sed -n "s/.* rank $1 \([0-9.]*\) s.*/\1/p" <<<"$report"; }
fast=-1 slow=-1
for r in 0 1 2 3; do
  dev=$(sed -n 's/^ \* MPI rank [0-9]* of 4: device \([a-z]*\):.*/\1/p' m/rank_000$r.c)
  [ "$dev" = fast ] && fast=$r
  [ "$dev" = slow ] && slow=$r
done
awk -v f="$(compute_of $fast)" -v s="$(compute_of $slow)" 'BEGIN { exit !(s > 1.5 * f && f > 0) }' ||
  fail "slow rank $slow's compute is not well above fast rank $fast's: $report"
[ "$(losses plain.out)" = "$(losses emu.out)" ] ||
  { paste <(losses plain.out) <(losses emu.out); fail "--emulate changed the losses"; }
# A run that ends in a calibration step (1 step) ends: the rank that stepped
# last used to keep the calibration lock into the closing report's gather,
# which the others could not reach without it (a hang, most runs).
for try in 1 2 3; do
  timeout 60 m/launch.sh --steps 1 --emulate >short.out 2>&1 ||
    { cat short.out; fail "--steps 1 --emulate (try $try): hung or failed"; }
done
grep -q "compute of one step at each device's speed:" short.out ||
  { cat short.out; fail "--steps 1 --emulate: no closing line"; }
# ... and it says that no step ran at the devices' speeds; the 5-step run does not
grep -q "every step of this run calibrated" short.out ||
  { cat short.out; fail "--steps 1 --emulate: does not say no step was emulated"; }
grep -q "every step of this run calibrated" emu.out && fail "the 5-step run says no step was emulated"
# HEXIC_EMULATE_CALIBRATION: 1 calibration step, so a 2-step run has one
# at the devices' speeds (3 by default: none); a bad value stops every rank
HEXIC_EMULATE_CALIBRATION=1 timeout 60 m/launch.sh --steps 2 --emulate >calib1.out 2>&1 ||
  { cat calib1.out; fail "HEXIC_EMULATE_CALIBRATION=1 --steps 2 --emulate"; }
grep -q "the first 1 steps time each rank's compute alone" calib1.out ||
  { cat calib1.out; fail "HEXIC_EMULATE_CALIBRATION=1: the banner does not say 1 step"; }
grep -q "every step of this run calibrated" calib1.out &&
  { cat calib1.out; fail "HEXIC_EMULATE_CALIBRATION=1 --steps 2: says no step was emulated"; }
[ "$(losses calib1.out)" = "$(losses plain.out | head -n 2)" ] ||
  fail "HEXIC_EMULATE_CALIBRATION=1 changed the losses"
HEXIC_EMULATE_CALIBRATION=0x3 timeout 60 m/launch.sh --steps 2 --emulate >calib-bad.out 2>&1 &&
  { cat calib-bad.out; fail "HEXIC_EMULATE_CALIBRATION=0x3 accepted"; }
grep -q "HEXIC_EMULATE_CALIBRATION wants the calibration steps, 1 to 1000, not '0x3'" calib-bad.out ||
  { cat calib-bad.out; fail "HEXIC_EMULATE_CALIBRATION=0x3: no clear error"; }
ms() { sed -n 's/^step [0-9]*\/[0-9]* | .* | \([0-9.]*\) ms | .*/\1/p' "$1" | tr '\n' ' '; }
echo "ok: same losses; step ms plain: $(ms plain.out); --emulate: $(ms emu.out)"
