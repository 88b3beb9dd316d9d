#!/bin/bash
# scripts/setup.sh on a machine that lacks packages, with stand-in dpkg-query,
# apt-get, sudo and pip on PATH (nothing is installed): one line per step on
# the screen, apt-get's and pip's hundreds of lines in the log only; when
# apt-get install fails, the log's tail on stderr and exit 1.
# usage: setup_quiet.sh SOURCE_DIR WORK_DIR
set -u
src=$1; work=$2
fail() { echo "FAIL: $*"; exit 1; }
rm -rf "$work"; mkdir -p "$work/bin"; cd "$work" || exit 1
real_python=$(command -v python3)
# dpkg-query: every package but cmake is missing
cat > bin/dpkg-query <<'SH'
#!/bin/sh
for a; do p=$a; done
[ "$p" = cmake ] && printf 'install ok installed' && exit 0
exit 1
SH
# apt-get: 300 lines of progress; install fails when FAKE_APT_FAIL=1
cat > bin/apt-get <<'SH'
#!/bin/sh
i=0
while [ $i -lt 300 ]; do echo "Unpacking fake-package-$i (1.0) ..."; i=$((i + 1)); done
if [ "$1" = install ] && [ "${FAKE_APT_FAIL:-0}" = 1 ]; then
  echo "E: Unable to locate package fake-broken" >&2; exit 100
fi
echo "apt-get $1: fake ok"
SH
cat > bin/sudo <<'SH'
#!/bin/sh
exec "$@"
SH
# python3: the module checks fail (so pip runs), pip prints 200 lines
cat > bin/python3 <<SH
#!/bin/sh
if [ "\$1" = -c ]; then exit 1; fi
if [ "\$1" = -m ] && [ "\$2" = pip ]; then
  i=0; while [ \$i -lt 200 ]; do echo "Collecting fake-wheel-\$i"; i=\$((i + 1)); done; exit 0
fi
exec "$real_python" "\$@"
SH
chmod +x bin/*
export PATH="$work/bin:$PATH" CUDA_HOME="$work/no-cuda" HEXIC_SETUP_LOG="$work/setup.log"

bash "$src/scripts/setup.sh" > ok.out 2> ok.err; rc=$?
[ $rc -eq 0 ] || { cat ok.out ok.err; fail "setup.sh exited $rc with every step succeeding"; }
lines=$(cat ok.out ok.err | wc -l)
[ "$lines" -le 8 ] || { head -20 ok.out ok.err; fail "setup.sh printed $lines lines (at most 8: one per step)"; }
grep -n 'Unpacking\|Collecting' ok.out ok.err && fail "apt-get's or pip's output on the screen"
grep -qx 'setup: apt-get install (17 packages) ... done' ok.out || { cat ok.out; fail "no 'apt-get install ... done' line"; }
grep -q '^Unpacking fake-package-299' setup.log && grep -q '^Collecting fake-wheel-199' setup.log ||
  fail "the log lacks apt-get's or pip's output"
sed -n 1,20p ok.out | sed 's/^/  /'

FAKE_APT_FAIL=1 bash "$src/scripts/setup.sh" > bad.out 2> bad.err; rc=$?
[ $rc -ne 0 ] || fail "setup.sh exited 0 when apt-get install failed"
grep -qx 'setup: apt-get install (17 packages) ... failed (exit 100)' bad.out || { cat bad.out; fail "no 'failed (exit 100)' line"; }
grep -q "E: Unable to locate package fake-broken" bad.err || { cat bad.err; fail "the log's tail is not on stderr"; }
lines=$(cat bad.out bad.err | wc -l)
[ "$lines" -le 40 ] || fail "a failure printed $lines lines (at most 40)"
echo "ok (setup.sh: $(wc -l < ok.out) lines on the screen, $(wc -l < setup.log) in the log; a failed step shows the log's tail, exit $rc)"
