#!/usr/bin/env bash
# The command line: exit codes and the texts users see first.
set -u
hexic=$1
cd "$(dirname "$0")/../.." || exit 2
fail=0
expect() { # expect RC DESCRIPTION -- COMMAND...
  local want=$1 what=$2; shift 3
  "$@" >/tmp/hx_cli_out.$$ 2>/tmp/hx_cli_err.$$
  local rc=$?
  if [ "$rc" != "$want" ]; then
    echo "FAIL: $what: exit $rc, expected $want"; cat /tmp/hx_cli_err.$$; fail=1
  fi
}
expect 2 "unknown option" -- "$hexic" --frobnicate examples/models/tiny.hx
grep -q '^usage: hexic' /tmp/hx_cli_err.$$ || { echo "FAIL: unknown option prints no usage"; fail=1; }
grep -q "unknown option '--frobnicate'" /tmp/hx_cli_err.$$ || { echo "FAIL: unknown option not named"; fail=1; }
expect 2 "no input" -- "$hexic"
expect 0 "--version" -- "$hexic" --version
grep -qE '^hexic [0-9]+\.[0-9]+\.[0-9]+$' /tmp/hx_cli_out.$$ || { echo "FAIL: --version text"; fail=1; }
expect 0 "--help" -- "$hexic" --help
grep -q -- '--print-after=PASS' /tmp/hx_cli_out.$$ || { echo "FAIL: --help lacks the options"; fail=1; }
expect 1 "missing file" -- "$hexic" --check no/such/file.hx
grep -qx "hexic: error: cannot read 'no/such/file.hx': No such file or directory" /tmp/hx_cli_err.$$ ||
  { echo "FAIL: missing-file message"; cat /tmp/hx_cli_err.$$; fail=1; }
expect 1 "a directory" -- "$hexic" --check examples
grep -q "hexic: error: cannot read 'examples': Is a directory" /tmp/hx_cli_err.$$ ||
  { echo "FAIL: directory message"; cat /tmp/hx_cli_err.$$; fail=1; }
expect 2 "unknown pass" -- "$hexic" --print-after=nosuch examples/models/tiny.hx
grep -q "unknown pass 'nosuch' in --print-after" /tmp/hx_cli_err.$$ || { echo "FAIL: unknown pass not named"; fail=1; }
# A dump after a pass that will not run is a usage error, not silence.
expect 2 "--print-after past --check" -- "$hexic" --check --print-after=schedule examples/models/tiny.hx
grep -q "^hexic: error: --print-after=schedule: that pass does not run under --check$" /tmp/hx_cli_err.$$ ||
  { echo "FAIL: --check --print-after=schedule message"; cat /tmp/hx_cli_err.$$; fail=1; }
expect 2 "--print-after=emit without -o" -- "$hexic" --print-after=emit examples/models/tiny.hx
grep -q "^hexic: error: --print-after=emit: that pass does not run without -o DIR$" /tmp/hx_cli_err.$$ ||
  { echo "FAIL: --print-after=emit message"; cat /tmp/hx_cli_err.$$; fail=1; }
expect 0 "blocks spread over files" -- "$hexic" --check examples/models/tiny.hx examples/clusters/cpu8.hx
# The same input twice gives the same bytes.
"$hexic" --print-after=cluster-table examples/models/llama2-13b.hx examples/clusters/case-study.hx >/tmp/hx_cli_a.$$
"$hexic" --print-after=cluster-table examples/models/llama2-13b.hx examples/clusters/case-study.hx >/tmp/hx_cli_b.$$
cmp -s /tmp/hx_cli_a.$$ /tmp/hx_cli_b.$$ || { echo "FAIL: dump not deterministic"; fail=1; }
# --print-ir after --check shows the 8x8 tables of the case study.
"$hexic" --check --print-ir examples/models/llama2-13b.hx examples/clusters/case-study.hx >/tmp/hx_cli_a.$$
grep -q '^bandwidth GB/s (device x device)' /tmp/hx_cli_a.$$ || { echo "FAIL: --print-ir lacks the table"; fail=1; }
# A 10 MB line and random bytes: exit 1 with a located error, no crash.
python3 -c 'import sys; sys.stdout.write("model \"m\" { layers = " + "9" * 10000000 + " }\n")' >/tmp/hx_cli_big.$$.hx
expect 1 "10 MB line" -- "$hexic" --check /tmp/hx_cli_big.$$.hx
grep -qE '^/tmp/hx_cli_big[^:]*:1:[0-9]+: error: ' /tmp/hx_cli_err.$$ || { echo "FAIL: 10 MB line: no located error"; fail=1; }
python3 -c 'import random, sys; random.seed(7); sys.stdout.buffer.write(bytes(random.randrange(256) for _ in range(200000)))' >/tmp/hx_cli_rand.$$.hx
expect 1 "random bytes" -- "$hexic" --check /tmp/hx_cli_rand.$$.hx
# Inputs are bounded (ir/source.c): devices, pipes and files over 64 MiB are
# refused at once with the file's name, whether .hx or plan.json; `timeout`
# turns the old endless read into a failure here rather than a hang.
expect 1 "/dev/zero as .hx" -- timeout 10 "$hexic" --check /dev/zero
grep -qx "hexic: error: cannot read '/dev/zero': it is a character device; hexic reads only regular files" \
  /tmp/hx_cli_err.$$ || { echo "FAIL: /dev/zero message"; cat /tmp/hx_cli_err.$$; fail=1; }
expect 1 "/dev/urandom as .hx" -- timeout 10 "$hexic" --check /dev/urandom
grep -q "cannot read '/dev/urandom': it is a character device" /tmp/hx_cli_err.$$ ||
  { echo "FAIL: /dev/urandom message"; cat /tmp/hx_cli_err.$$; fail=1; }
expect 1 "--plan /dev/zero" -- timeout 10 "$hexic" --plan=/dev/zero examples/models/tiny.hx examples/clusters/cpu1.hx
grep -q "cannot read '/dev/zero': it is a character device" /tmp/hx_cli_err.$$ ||
  { echo "FAIL: --plan /dev/zero message"; cat /tmp/hx_cli_err.$$; fail=1; }
expect 1 "simulate /dev/zero" -- timeout 10 "$hexic" simulate /dev/zero examples/models/tiny.hx examples/clusters/cpu1.hx
grep -q "cannot read '/dev/zero': it is a character device" /tmp/hx_cli_err.$$ ||
  { echo "FAIL: simulate /dev/zero message"; cat /tmp/hx_cli_err.$$; fail=1; }
mkfifo /tmp/hx_cli_fifo.$$
expect 1 "a FIFO" -- timeout 10 "$hexic" --check /tmp/hx_cli_fifo.$$
grep -qx "hexic: error: cannot read '/tmp/hx_cli_fifo.$$': it is a pipe; hexic reads only regular files" \
  /tmp/hx_cli_err.$$ || { echo "FAIL: FIFO message"; cat /tmp/hx_cli_err.$$; fail=1; }
truncate -s $((64 * 1024 * 1024 + 1)) /tmp/hx_cli_huge.$$.hx # sparse: no disk used
expect 1 "a file over 64 MiB" -- timeout 10 "$hexic" --check /tmp/hx_cli_huge.$$.hx
grep -qx "hexic: error: cannot read '/tmp/hx_cli_huge.$$.hx': it has 67108865 bytes, more than the 64 MiB (67108864 bytes) hexic reads from one input file" \
  /tmp/hx_cli_err.$$ || { echo "FAIL: over-limit message"; cat /tmp/hx_cli_err.$$; fail=1; }
expect 1 "a plan.json over 64 MiB" -- timeout 10 "$hexic" --plan=/tmp/hx_cli_huge.$$.hx examples/models/tiny.hx examples/clusters/cpu1.hx
grep -q "cannot read '/tmp/hx_cli_huge.$$.hx': it has 67108865 bytes" /tmp/hx_cli_err.$$ ||
  { echo "FAIL: over-limit plan message"; cat /tmp/hx_cli_err.$$; fail=1; }
# A megabyte of NULs, loose or in a comment, scan in linear time (flex
# rescans a token at every NUL in it: one MiB used to take an hour).
{ printf 'model\n'; head -c $((1024 * 1024)) /dev/zero; printf '\n# '; head -c $((1024 * 1024)) /dev/zero; } \
  >/tmp/hx_cli_huge.$$.hx
expect 1 "2 MiB of NULs" -- timeout 10 "$hexic" --check /tmp/hx_cli_huge.$$.hx
grep -q "^/tmp/hx_cli_huge.$$.hx:2:1: error: unexpected NUL bytes" /tmp/hx_cli_err.$$ ||
  { echo "FAIL: NUL run message"; cat /tmp/hx_cli_err.$$; fail=1; }
# -o creates the missing folders above DIR (the README's `-o out/7b` in a fresh
# checkout); a folder that cannot be made is a one-line error, exit 1.
rm -rf /tmp/hx_cli_out_dir.$$
expect 0 "-o with missing parents" -- "$hexic" examples/models/tiny.hx examples/clusters/cpu1.hx \
  -o /tmp/hx_cli_out_dir.$$/a/b
[ -f /tmp/hx_cli_out_dir.$$/a/b/plan.json ] || { echo "FAIL: -o a/b: no plan.json"; fail=1; }
# (the micro-batch size is any: on one device every size takes the same
# step, 0.136 s, and which one wins is a tie broken by rounding)
grep -qx "plan: symmetric dp=1 tp=1 pp=1 mbs=[0-9]*, 1 pipeline over 1 of 1 devices" /tmp/hx_cli_out.$$ ||
  { echo "FAIL: summary's plan line (one pipeline)"; cat /tmp/hx_cli_out.$$; fail=1; }
: >/tmp/hx_cli_out_dir.$$/file
expect 1 "-o under a file" -- "$hexic" examples/models/tiny.hx examples/clusters/cpu1.hx \
  -o /tmp/hx_cli_out_dir.$$/file/x
grep -qx "hexic: error: cannot create /tmp/hx_cli_out_dir.$$/file/x: Not a directory" /tmp/hx_cli_err.$$ ||
  { echo "FAIL: -o under a file message"; cat /tmp/hx_cli_err.$$; fail=1; }
rm -rf /tmp/hx_cli_out_dir.$$
# A device a few MiB short: the shortfall in MiB (it said "0.0 GiB more").
printf 'gpu "g" { tflops = 1; memory = 1537 MiB }\nnode "n" { gpu = "g"; gpus = 1; bandwidth = 10 GB/s; latency = 1 us }\n' \
  >/tmp/hx_cli_small.$$.hx
expect 3 "a few MiB short" -- "$hexic" examples/models/tiny.hx /tmp/hx_cli_small.$$.hx
grep -qE "^hexic: error: no plan fits in memory: needs at least [1-9][0-9.]* MiB more on n:0" /tmp/hx_cli_err.$$ ||
  { echo "FAIL: a few MiB short: message"; cat /tmp/hx_cli_err.$$; fail=1; }
# The same shortfall through --plan: a plan made for 1600 MiB read back for
# 1537 MiB (it said "needs 0.0 GiB more").
sed 's/1537 MiB/1600 MiB/' /tmp/hx_cli_small.$$.hx >/tmp/hx_cli_roomy.$$.hx
expect 0 "plan for 1600 MiB" -- "$hexic" examples/models/tiny.hx /tmp/hx_cli_roomy.$$.hx \
  -o /tmp/hx_cli_roomy_out.$$
expect 3 "--plan a few MiB short" -- "$hexic" examples/models/tiny.hx /tmp/hx_cli_small.$$.hx \
  --plan /tmp/hx_cli_roomy_out.$$/plan.json
grep -qE "^hexic: error: plan .*plan.json does not fit in memory: needs [1-9][0-9.]* MiB more on n:0$" \
  /tmp/hx_cli_err.$$ || { echo "FAIL: --plan a few MiB short: message"; cat /tmp/hx_cli_err.$$; fail=1; }
rm -rf /tmp/hx_cli_roomy_out.$$ /tmp/hx_cli_roomy.$$.hx
# Fits only with recompute, which the train block forbids (issue 24 item 13):
# the memory between the two needs (~4.4 and ~7.3 GiB as the CPU target
# prices them, in fp32). It said "needs at least -456.4 MiB more"; now the
# shortfall without recompute and the shape that fits with it. No negative
# figure either way.
cat >/tmp/hx_cli_rc.$$.hx <<'EOF2'
model "m" { layers = 4; hidden = 512; ffn = 1408; heads = 8; kv_heads = 8; vocab = 1024; seq_len = 4096 }
train { global_batch = 8; micro_batch = 8; precision = bf16; recompute = none }
gpu "g" { tflops = 100; memory = 6000 MiB }
node "n" { gpu = "g"; gpus = 1 }
EOF2
expect 3 "fits only with recompute" -- "$hexic" /tmp/hx_cli_rc.$$.hx -o /tmp/hx_cli_rc_out.$$
grep -qE "^hexic: error: no plan fits in memory with recompute = none: needs at least [1-9][0-9.]* [MG]iB more on n:0; with recompute = full the symmetric shape dp=1 tp=1 pp=1 mbs=8 fits \([1-9][0-9.]* [MG]iB to spare on n:0\): set recompute = full or auto" /tmp/hx_cli_err.$$ &&
  ! grep -q -- " -[0-9]" /tmp/hx_cli_err.$$ ||
  { echo "FAIL: fits only with recompute: message"; cat /tmp/hx_cli_err.$$; fail=1; }
rm -rf /tmp/hx_cli_rc_out.$$
# --emulate's limit without an emulation block (issue 24 item 13): the
# fastest type is the host; 1000 times slower is within it, 2000 times gets a
# warning naming both types (the input does not ask for --emulate: exit 0).
emu_cluster() { # SLOW_TFLOPS
  printf 'gpu "f" { tflops = 20; memory = 8 GiB; efficiency = 1 }\ngpu "s" { tflops = %s; memory = 8 GiB; efficiency = 1 }\n' "$1"
  printf 'node "a" { gpu = "f"; gpus = 1 }\nnode "b" { gpu = "s"; gpus = 1 }\nnetwork { bandwidth = 1 GB/s }\n'
}
emu_cluster 0.02 >/tmp/hx_cli_emu_ok.$$.hx
expect 0 "a 1000x slower device" -- "$hexic" --check examples/models/tiny.hx /tmp/hx_cli_emu_ok.$$.hx
[ ! -s /tmp/hx_cli_err.$$ ] || { echo "FAIL: a 1000x slower device: not silent"; cat /tmp/hx_cli_err.$$; fail=1; }
emu_cluster 0.01 >/tmp/hx_cli_emu_far.$$.hx
expect 0 "a 2000x slower device" -- "$hexic" --check examples/models/tiny.hx /tmp/hx_cli_emu_far.$$.hx
grep -qE "^/tmp/hx_cli_emu_far.$$.hx:2:1: warning: device type \"s\" \(0.01 TFLOP/s reachable\) is 2000 times slower than the cluster's fastest type \"f\" \(20 TFLOP/s\): --emulate .* honours at most 1000 .*; launch.sh --emulate cannot run this cluster" /tmp/hx_cli_err.$$ ||
  { echo "FAIL: a 2000x slower device: warning"; cat /tmp/hx_cli_err.$$; fail=1; }
rm -f /tmp/hx_cli_*.$$ /tmp/hx_cli_*.$$.hx
exit $fail
