#!/bin/sh
# plan.json round trips (issue 7 item 1): a HexiSeq plan written by hexic is
# read back by --plan=FILE and `hexic simulate` with every stage's layout,
# device table and group tables rebuilt, and simulates to the same figures;
# hand edits that break the CP/HP tables exit 1 with a located error; a plan
# without sequence splits still round-trips unchanged.
# usage: roundtrip.sh HEXIC SOURCE_DIR WORK_DIR
set -u
hexic=$1; src=$2; work=$3
here=$(dirname "$0")
fail=0
check() { if ! eval "$1"; then echo "FAIL: $2"; fail=1; fi; }
rm -rf "$work"; mkdir -p "$work"
model=$src/examples/models/long-context-13b.hx
c128=$src/examples/clusters/hetero-128.hx
# hetero-64 with twice the memory: its GPUs hold the 128K-token plans in
# bf16, and the CPU target these tests compile for allocates (and the fit
# check prices, issue 25) every element in fp32
c64=$work/hetero-64-x2.hx
awk '{ if (match($0, /memory = [0-9]+ GiB/)) { n = substr($0, RSTART + 9, RLENGTH - 13) * 2
       $0 = substr($0, 1, RSTART - 1) "memory = " n " GiB" substr($0, RSTART + RLENGTH) } print }' \
  "$src/examples/clusters/hetero-64.hx" > "$c64"

# CP/HP stages compile into programs on the CPU target (issue 14); the
# round trip is about planning and simulation.
"$hexic" "$model" "$c64" -o "$work/seq" --strategy=hexiseq > /dev/null 2> "$work/seq.err"
check '[ $? -eq 0 ] && [ -s "$work/seq/plan.json" ] && [ -s "$work/seq/rank_0000.c" ]' \
  "hexiseq plan on hetero-64 written, with its programs"
"$hexic" "$model" "$c64" -o "$work/auto" > /dev/null 2>&1
check 'grep -q "\"strategy\": \"hexiseq\"" "$work/auto/plan.json"' "auto picks HexiSeq for 128K tokens"

for plan in seq auto; do
  "$hexic" "$model" "$c64" --plan="$work/$plan/plan.json" -o "$work/$plan-re" > /dev/null 2>&1
  check '[ -s "$work/$plan-re/plan.json" ]' "--plan=FILE reads the $plan plan"
  check 'python3 "$here/same_plan.py" "$work/$plan/plan.json" "$work/$plan-re/plan.json"' \
    "$plan plan: same tables and figures after --plan"
done

# hexic simulate: exit 0 and the iteration time plan.json holds
"$hexic" simulate "$work/seq/plan.json" "$model" "$c64" > "$work/sim.txt" 2> "$work/sim.err"
check '[ $? -eq 0 ]' "hexic simulate accepts a HexiSeq plan"
want=$(python3 -c 'import json,sys; print("iteration: %.3f s" % json.load(open(sys.argv[1]))["simulated"]["iteration_s"])' "$work/seq/plan.json")
check 'grep -q "^$want" "$work/sim.txt"' "hexic simulate prints the plan's iteration time ($want)"

# Ragged all-to-all groups and uneven heads: the scheduler balances group
# sizes where the links allow, so take the first example cluster whose plan
# has groups of different sizes rather than assume one does.
ragged=
for c in "$c128" "$src/examples/clusters/large-256.hx"; do
  "$hexic" "$model" "$c" -o "$work/ragged" --strategy=hexiseq > /dev/null 2>&1
  if python3 "$here/same_plan.py" "$work/ragged/plan.json" "$work/ragged/plan.json" ragged \
    > /dev/null 2>&1; then ragged=$c; break; fi
done
check '[ -n "$ragged" ]' "an example cluster gets a ragged plan"
"$hexic" "$model" "$ragged" --plan="$work/ragged/plan.json" -o "$work/ragged-re" > /dev/null 2>&1
check 'python3 "$here/same_plan.py" "$work/ragged/plan.json" "$work/ragged-re/plan.json" ragged' \
  "ragged plan: same tables and figures after --plan"

# Hand edits: exit 1 and the same "FILE:LINE:COL: error: WHAT" from both
# `hexic simulate` and --plan, which writes no programs.
refused() { # EDIT MESSAGE (a grep pattern)
  edit=$1 msg=$2
  python3 "$here/edit_plan.py" "$work/seq/plan.json" "$work/$edit.json" "$edit" || { fail=1; return; }
  "$hexic" simulate "$work/$edit.json" "$model" "$c64" > /dev/null 2> "$work/$edit.err"
  rc=$?
  "$hexic" "$model" "$c64" --plan="$work/$edit.json" -o "$work/$edit.out" > /dev/null \
    2> "$work/$edit.plan.err"
  plan_rc=$?
  if [ $rc -ne 1 ] || ! grep -q "$edit.json:[0-9]*:[0-9]*: error: $msg" "$work/$edit.err"; then
    echo "FAIL: $edit: want exit 1 and a located error matching '$msg', got exit $rc:"
    cat "$work/$edit.err"
    fail=1
  fi
  if [ $plan_rc -ne 1 ] || ! cmp -s "$work/$edit.err" "$work/$edit.plan.err" ||
     [ -e "$work/$edit.out/rank_0000.c" ]; then
    echo "FAIL: $edit: --plan should refuse it as hexic simulate does (exit 1), got exit $plan_rc:"
    cat "$work/$edit.plan.err"
    fail=1
  fi
}
refused drop_range "cp ring of rank [0-9]* misses a token"
refused dup_head "hp group of rank [0-9]* repeats a head"
refused stage_rank_twice "rank [0-9]* is used twice"
refused group_rank_twice "rank [0-9]* of this hp group appears twice"
refused not_zigzag "rank [0-9]*'s token range \\[[0-9]*, [0-9]*) is not the next zig-zag chunk"
refused split_table "split_table row 0 column 1 is"
refused cp "'cp' of this stage must be"
refused group_layers "'layers' of a group must be \\[begin, end) within -1..[0-9]*"
refused group_kind "'kind' of a group must be \"tp\""
# A unit holding no tokens, split tables consistent with it: the cost model
# could price it but the programs cannot run it (issue 24 item 13).
refused empty_unit "rank [0-9]* holds no tokens of the sequence"
check 'grep -q "note: tokens \[[0-9]*, [0-9]*) are held by no rank" "$work/drop_range.err"' \
  "the dropped tokens are named"

# Without sequence splits: the reread plan writes the same plan.json, but
# for its strategy ("file").
m7=$src/examples/models/llama2-7b.hx cs=$src/examples/clusters/case-study.hx
"$hexic" "$m7" "$cs" -o "$work/plain" > /dev/null
"$hexic" "$m7" "$cs" --plan="$work/plain/plan.json" -o "$work/plain-re" > /dev/null
check '[ $? -eq 0 ]' "a plain plan compiles from --plan"
check '! grep -q "cp_ring\|hp_a2a" "$work/plain/plan.json"' "the plain plan has no CP/HP groups"
check 'grep -v "\"strategy\"" "$work/plain/plan.json" > "$work/a.json" &&
       grep -v "\"strategy\"" "$work/plain-re/plan.json" > "$work/b.json" && cmp -s "$work/a.json" "$work/b.json"' \
  "a plain plan round-trips to the same plan.json"
exit $fail
