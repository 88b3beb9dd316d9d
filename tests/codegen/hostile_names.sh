#!/usr/bin/env bash
# Hostile names end to end (issue 10, item 2): a model, GPU types, nodes and
# paths whose names hold quotes, $(...), backticks, */ and /*, %s%n, #, '\',
# '??/' (a trigraph), '|', Markdown and spaces go through hexic -o into an
# output directory with spaces in its path. Every generated file must be
# there; the rank programs must compile with -Werror (gcc, gnu11 as the
# Makefile builds them, and c11 with its trigraphs) and parse clean under
# libclang; launch.sh and slurm.sbatch must pass `bash -n` and run up to the
# "not built" check; `make -n` must work; plan.json and trace.json must be
# JSON that gives the names back; --plan must read plan.json back; no file
# named pwned may appear anywhere; and each file must hold the names in its
# own escaped form.
#   hostile_names.sh HEXIC PARSE_CHECK SRCDIR WORKDIR
set -uo pipefail
hexic=$1 parse_check=$2 src=$3 work=$4
rm -rf "$work"
mkdir -p "$work/cwd"
cd "$work/cwd" || exit 1
fail() { echo "FAIL: $*" >&2; exit 1; }

# The input, quoted so the shell writing it expands nothing. In .hx strings
# \" is a quote and \\ one backslash.
cat >hostile.hx <<'EOF'
model "m\"$(touch pwned)`touch pwned`*/ #x %s%n ??/ |a|_b_ <i> \\" {
  layers = 4; hidden = 64; ffn = 176; heads = 4; kv_heads = 2
  vocab = 256; seq_len = 64
}
train {
  global_batch = 8
  precision = fp32
  data = "my data/$(touch pwned)`touch pwned`\"q\"'s ??/ %s%n #.bin"
  checkpoint_dir = "ck pt/$(touch pwned)/*/ ??= \\"
}
gpu "G*/ #error x /* \"q\" ??/ $(shell touch pwned) `touch pwned` %s%n # \\" {
  tflops = 0.02; memory = 4 GiB; efficiency = 1; mem_bandwidth = 10 GB/s; cuda_arch = 90
}
node "n'\"$(touch pwned)|`x`*/#%n ??/ \\" {
  gpu = "G*/ #error x /* \"q\" ??/ $(shell touch pwned) `touch pwned` %s%n # \\"
  gpus = 2; bandwidth = 5 GB/s; latency = 2 us
}
EOF
gpu_name='G*/ #error x /* "q" ??/ $(shell touch pwned) `touch pwned` %s%n # \'
node_name='n'"'"'"$(touch pwned)|`x`*/#%n ??/ \'
model_name='m"$(touch pwned)`touch pwned`*/ #x %s%n ??/ |a|_b_ <i> \'
data_path='my data/$(touch pwned)`touch pwned`"q"'"'"'s ??/ %s%n #.bin'

out="$work/out dir/with space"
mkdir -p "$work/out dir"
"$hexic" hostile.hx --target=cpu -o "$out" >plan.txt 2>err.txt || { cat err.txt; fail "hexic -o"; }
[ -s err.txt ] && { cat err.txt; fail "hexic printed diagnostics"; }
for f in plan.json report.md trace.json plan.svg rank_0000.c rank_0001.c Makefile launch.sh slurm.sbatch .clang-format; do
  [ -s "$out/$f" ] || fail "$f was not generated"
done
python3 -c 'import sys, xml.etree.ElementTree as E; E.parse(sys.argv[1])' "$out/plan.svg" ||
  fail "plan.svg is not XML"

# C: both ranks compile with -Werror, as gnu11 (the Makefile's) and as c11
# (trigraphs on: '??/' in a comment would splice lines), and parse clean.
blas=$(grep -o '^BLAS_INCLUDE ?= .*' "$out/Makefile" | cut -d' ' -f3-)
for std in gnu11 c11; do
  for f in "$out"/rank_*.c; do
    mpicc -std=$std -Wall -Wextra -Werror -Wcomment -Wtrigraphs -fsyntax-only -I "$src/rtlib" $blas "$f" ||
      fail "$f does not compile with -std=$std -Werror"
  done
done
"$parse_check" -I "$src/rtlib" "$out"/rank_*.c >/dev/null || fail "libclang diagnostics"
# The strings in the tables are the names, byte for byte: compile a probe
# that prints them from the rank's own train table.
sed -n '/^static const struct hx_rt_train train = {/,/^};/p' "$out/rank_0000.c" >train_table.h
cat >probe.c <<'EOF'
#include <stdio.h>
#include "hexic_rt.h"
#include "train_table.h"
int main(void) { printf("%s\n%s\n", train.data, train.checkpoint_dir); return 0; }
EOF
mpicc -std=c11 -Wall -Wextra -Werror -I "$src/rtlib" -I . $blas probe.c -o probe || fail "probe build"
printf '%s\n%s\n' "$data_path" 'ck pt/$(touch pwned)/*/ ??= \' >want.txt
./probe | cmp -s - want.txt || { ./probe; fail "the data or checkpoint path is not the one written"; }

# Make: -n expands every variable (a $(shell ...) in one would run).
make -n -C "$out" >make.txt 2>&1 || { cat make.txt; fail "make -n"; }
grep -q -- "-I$src/rtlib" make.txt || fail "make -n lost HEXIC_HOME"

# Shell: syntax, then launch.sh up to its "not built" check.
bash -n "$out/launch.sh" || fail "launch.sh syntax"
bash -n "$out/slurm.sbatch" || fail "slurm.sbatch syntax"
(cd "$work" && "$out/launch.sh" --steps 1 >launch.txt 2>&1)
[ $? = 2 ] || { cat "$work/launch.txt"; fail "launch.sh before make should exit 2"; }
grep -q "is not built (run make)" "$work/launch.txt" || fail "launch.sh did not stop at the build check"
grep -qx '#SBATCH --job-name=hexic-m___touch_pwned__touch_pwned_____x__s_n______a__b___i___' \
  "$out/slurm.sbatch" || { grep job-name "$out/slurm.sbatch"; fail "slurm job name not sanitised"; }

# JSON gives the names back; --plan reads plan.json back.
python3 - "$out" "$model_name" "$gpu_name" "$node_name" <<'EOF' || fail "plan.json / trace.json names"
import json, sys
out, model, gpu, node = sys.argv[1:]
plan = json.load(open(out + "/plan.json", encoding="utf-8"))
trace = json.load(open(out + "/trace.json", encoding="utf-8"))
assert plan["model"]["name"] == model, plan["model"]["name"]
for d in plan["devices"]:
    assert d["gpu"] == gpu and d["node"] == node and d["name"].startswith(node + ":"), d
names = [e["args"]["name"] for e in trace["traceEvents"] if e.get("name") == "thread_name"]
assert names and all(node in n for n in names), names
EOF
"$hexic" hostile.hx --plan="$out/plan.json" >replan.txt 2>&1 || { cat replan.txt; fail "--plan of plan.json"; }

# Escaped forms: C comments hex-escape '*', '\' and '?'; the literal escapes
# '"', '\' and '?'; Markdown escapes '|', '`', '*', '_', '<', '#' and '\'.
grep -qF 'device n'"'"'"$(touch pwned)|`x`\x2a/#%n \x3f\x3f/ \x5c:0 (G\x2a/ #error x /\x2a "q" \x3f\x3f/' \
  "$out/rank_0000.c" || fail "rank_0000.c: the device comment is not escaped"
grep -qF '.data = "my data/$(touch pwned)`touch pwned`\"q\"'"'"'s \?\?/ %s%n #.bin",' "$out/rank_0000.c" ||
  fail "rank_0000.c: the data literal is not escaped"
grep -qF '# hexic plan: m"$(touch pwned)\`touch pwned\`\*/ \#x %s%n ??/ \|a\|\_b\_ \<i\> \\ on 2 devices' \
  "$out/report.md" || fail "report.md: the model name is not escaped"
grep -qF '| n'"'"'"$(touch pwned)\|\`x\`\*/\#%n ??/ \\:0 |' "$out/report.md" ||
  fail "report.md: the device names are not escaped"
grep -q '^#error' "$out"/rank_*.c && fail "a name planted a directive"

# --target=cuda: the GPU type name also goes into the rank's device_type
# literal, its GPU comment and the Makefile's architecture comment.
cuda_out="$work/out dir/cuda with space"
"$hexic" hostile.hx --target=cuda -o "$cuda_out" >cuda.txt 2>&1 || { cat cuda.txt; fail "hexic --target=cuda"; }
for f in "$cuda_out"/rank_*.c; do
  mpicc -std=c11 -Wall -Wextra -Werror -Wcomment -Wtrigraphs -fsyntax-only -I "$src/rtlib" "$f" ||
    fail "$f (cuda) does not compile with -std=c11 -Werror"
done
"$parse_check" -I "$src/rtlib" "$cuda_out"/rank_*.c >/dev/null || fail "libclang diagnostics (cuda)"
sed -n '/^static const struct hx_rt_rank_config rank_config = {/,/^};/p' "$cuda_out/rank_0000.c" |
  grep '\.device_type = ' | sed 's/^ *\.device_type = \(.*\),$/static const char *type = \1;/' >type.h
printf '#include <stdio.h>\n#include "type.h"\nint main(void) { puts(type); return 0; }\n' >probe_type.c
mpicc -std=c11 -Wall -Wextra -Werror -Wno-unused-variable -I . probe_type.c -o probe_type ||
  fail "device_type probe build"
[ "$(./probe_type)" = "$gpu_name" ] || { ./probe_type; fail "device_type is not the GPU type's name"; }
make -n -C "$cuda_out" >cuda_make.txt 2>&1 || { cat cuda_make.txt; fail "make -n (cuda)"; }
grep -q -- "-gencode arch=compute_90,code=sm_90" cuda_make.txt || fail "make -n (cuda) lost the arch"
bash -n "$cuda_out/launch.sh" || fail "launch.sh (cuda) syntax"
grep -q '^#error' "$cuda_out"/rank_*.c && fail "a name planted a directive (cuda)"

found=$(find "$work" -name pwned)
[ -z "$found" ] || fail "a name ran a command: $found"
echo "hostile names: every file generated, compiled -Werror (gnu11, c11), parsed, make -n, bash -n," \
  "JSON round trip, --plan, --target=cuda, no command run"
