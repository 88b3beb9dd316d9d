#!/bin/sh
# Hand edits of a plain (not HexiSeq) plan.json (issue 10, item 10): both
# ways a plan comes back in, `hexic simulate PLAN` and --plan=PLAN, run the
# same checks and print the same located error, exit 1: gradient groups left
# stale by deleting a pipeline and moving its batch, a gradient group left
# out, a stage's recompute against the train block's, devices[] entries
# that do not name the cluster's devices. A plan with no group tables at all
# is accepted (they are derived from the stages).
# usage: edits.sh HEXIC SOURCE_DIR WORK_DIR
set -u
hexic=$1; src=$2; work=$3
here=$(cd "$(dirname "$0")" && pwd)
fail=0
rm -rf "$work"; mkdir -p "$work"; cd "$work" || exit 1
tiny=$src/examples/models/tiny.hx full=$here/tiny-full.hx cpu8=$src/examples/clusters/cpu8.hx

# base MODEL DIR: the plan hexic picks; the edits need two pipelines or more.
base() {
  "$hexic" "$1" "$cpu8" -o "$2" > /dev/null || { echo "FAIL: hexic $1 cpu8.hx"; exit 1; }
  python3 -c 'import json, sys; p = json.load(open(sys.argv[1]))
assert len(p["pipelines"]) >= 2 and any(g["kind"] == "grad" for g in p["groups"])' \
    "$2/plan.json" || { echo "FAIL: the cpu8 plan has one pipeline: pick a cluster that has more"; exit 1; }
}
base "$tiny" plain
base "$full" full

# refused BASE MODEL EDIT MESSAGE (an extended regex after "error: ").
refused() {
  b=$1 model=$2 edit=$3 msg=$4
  python3 "$here/edit_plan.py" "$b/plan.json" "$edit.json" "$edit" || { fail=1; return; }
  "$hexic" simulate "$edit.json" "$model" "$cpu8" > /dev/null 2> "$edit.sim.err"
  sim=$?
  "$hexic" "$model" "$cpu8" --plan="$edit.json" -o "$edit.out" > /dev/null 2> "$edit.plan.err"
  plan=$?
  if [ $sim -ne 1 ] || [ $plan -ne 1 ] ||
     ! grep -Eq "^$edit.json:[0-9]+:[0-9]+: error: $msg" "$edit.sim.err" ||
     ! grep -q '^ *\^$' "$edit.sim.err" || ! cmp -s "$edit.sim.err" "$edit.plan.err"; then
    echo "FAIL: $edit: want exit 1 from both paths and the same located error matching '$msg';"
    echo "hexic simulate: exit $sim"; cat "$edit.sim.err"
    echo "--plan: exit $plan"; cat "$edit.plan.err"
    fail=1
  fi
}
refused plain "$tiny" stale_groups \
  "this (grad|unsplit|tp) group .*(does not match the stages|is no stage's TP group)"
refused plain "$tiny" missing_group "'groups' lists gradient groups but not the (grad|unsplit) group"
refused full "$full" recompute_off \
  "this stage has \"recompute\": false but the train block says recompute = full"
refused plain "$tiny" recompute_on \
  "this stage has \"recompute\": true but the train block says recompute = none"
# ZeRO-1 optimizer shards (issue 16, /work/notes/zero1_api.md)
refused plain "$tiny" shards_length "'optimizer_shards' must be an array of [0-9]+ integers, one per rank"
refused plain "$tiny" shards_sum "the optimizer shards sum to 1000001 parts per million, not 1000000"
refused plain "$tiny" shards_negative "an optimizer shard must be an integer in \\[0, 1000000\\]"
refused plain "$tiny" shards_kind "'optimizer_shards' belongs to a grad or unsplit group, not a tp group"
refused plain "$tiny" shards_unsharded "'optimizer_shards' on a plan whose train.optimizer_sharding is not"
refused plain "$tiny" shards_word "'optimizer_sharding' must be \"none\" or \"zero1\""
refused plain "$tiny" shards_train_word "'train' must be an object"
# devices[] against the cluster (issue 24 item 13): a rank it does not have,
# another device's name, GPU type or node
refused plain "$tiny" device_rank "'rank' must be an integer in \\[0, 7\\]: the cluster has 8 devices"
refused plain "$tiny" device_name "'name' of rank 0 is \"[^\"]*\", but rank 0 of the cluster is \"[^\"]*\""
refused plain "$tiny" device_gpu "'gpu' of rank 0 is \"[^\"]*\", but rank 0 of the cluster has the GPU type"
refused plain "$tiny" device_node "'node' of rank 0 is \"[^\"]*\", but rank 0 of the cluster is on node"
# uneven shards are accepted and written back as they were read
python3 "$here/edit_plan.py" plain/plan.json shards_uneven.json shards_uneven || fail=1
if "$hexic" "$tiny" "$cpu8" --plan=shards_uneven.json -o uneven.out > /dev/null 2> uneven.err; then
  python3 -c 'import json, sys
a, b = (json.load(open(f)) for f in sys.argv[1:])
key = lambda p: [(g["kind"], g["ranks"], g.get("layers"), g.get("slice"), g.get("optimizer_shards"))
                 for g in p["groups"] if g["kind"] in ("grad", "unsplit")]
assert b["train"]["optimizer_sharding"] == "zero1", b["train"]
assert sorted(map(str, key(a))) == sorted(map(str, key(b))), "optimizer_shards not kept"' \
    shards_uneven.json uneven.out/plan.json || { echo "FAIL: uneven shards not written back"; fail=1; }
  # report.md: each used rank's optimizer-state bytes; the uneven group's
  # first member (999000 - ... ppm of that group) keeps more than its peers
  python3 -c 'import json, re, sys
p = json.load(open(sys.argv[1]))
rows = {int(m.group(1)): int(m.group(2)) for m in
        re.finditer(r"^\| (\d+) \| [^|]* \| (\d+) \|", open(sys.argv[2]).read().split(
            "## Optimizer state per rank (ZeRO-1)")[1], re.M)}
used = [d["rank"] for d in p["devices"] if d["pipeline"] >= 0]
assert sorted(rows) == sorted(used), (sorted(rows), used)
g = next(g for g in p["groups"] if g["kind"] in ("grad", "unsplit"))
first, rest = g["ranks"][0], g["ranks"][1:]
assert all(rows[first] > rows[r] for r in rest), (rows, g["ranks"])' \
    uneven.out/plan.json uneven.out/report.md || { echo "FAIL: report.md optimizer state per rank"; fail=1; }
else
  echo "FAIL: --plan refuses uneven optimizer shards:"; cat uneven.err; fail=1
fi

python3 "$here/edit_plan.py" plain/plan.json no_groups.json no_groups || fail=1
"$hexic" simulate no_groups.json "$tiny" "$cpu8" > /dev/null 2> no_groups.err ||
  { echo "FAIL: a plan without group tables is refused:"; cat no_groups.err; fail=1; }
"$hexic" "$tiny" "$cpu8" --plan=no_groups.json -o no_groups.out > /dev/null 2>> no_groups.err ||
  { echo "FAIL: --plan refuses a plan without group tables:"; cat no_groups.err; fail=1; }
[ $fail -eq 0 ] && echo "ok (planload edits: stale and missing groups, recompute, optimizer shards, devices, both paths)"
exit $fail
