"""usage: edit_plan.py IN.json OUT.json EDIT

Hand edits of a HexiSeq plan.json that break it, one per EDIT name; the
plan is written back in hexic's own layout (one line per device and group)
so errors point at lines a person would edit."""
import json
import sys

p = json.load(open(sys.argv[1]))
edit = sys.argv[3]
devs = p["devices"]
assert all(d["rank"] == i for i, d in enumerate(devs)), "devices in rank order"
stage0 = p["pipelines"][0]["stages"][0]
hp = [g for g in p["groups"] if g["kind"] == "hp_a2a"]
tp, ranks = stage0["tp"], stage0["ranks"]
# the first two members of the first stage's first hp group: first devices
# (TP rank 0) of two units that split one sequence and one TP head share
group = next(g for g in hp if g["ranks"][0] == ranks[0])
r0, r1 = group["ranks"][0], group["ranks"][1]

if edit == "drop_range":      # a token range held by nobody
    del devs[r1]["seq"][-1]
elif edit == "dup_head":      # two ranks of one hp group with the same heads
    devs[r1]["heads"] = list(devs[r0]["heads"])
elif edit == "stage_rank_twice":
    p["pipelines"][0]["stages"][1]["ranks"][0] = r0
elif edit == "group_rank_twice":
    hp[0]["ranks"][1] = hp[0]["ranks"][0]
elif edit == "not_zigzag":    # every token once, but not the zig-zag chunks
    u0, u1 = ranks.index(r0), ranks.index(r1)
    for t in range(tp):
        a, b = devs[ranks[u0 + t]], devs[ranks[u1 + t]]
        a["seq"], b["seq"] = b["seq"], a["seq"]
elif edit == "split_table":
    hp[0]["split_table"][1] += 1
elif edit == "cp":
    stage0["cp"] += 1
elif edit == "group_layers":  # end before begin
    hp[0]["layers"] = [3, 1]
elif edit == "group_kind":
    hp[0]["kind"] = "hp"
else:
    sys.exit("unknown edit " + edit)


def line(v):
    return json.dumps(v)


out = ["{"]
keys = list(p)
for k in keys:
    v = p[k]
    tail = "," if k != keys[-1] else ""
    if k in ("devices", "groups"):
        out.append("  %s: [" % json.dumps(k))
        out += ["    %s%s" % (line(x), "," if i + 1 < len(v) else "") for i, x in enumerate(v)]
        out.append("  ]" + tail)
    else:
        out.append("  %s: %s%s" % (json.dumps(k), line(v), tail))
out.append("}")
open(sys.argv[2], "w").write("\n".join(out) + "\n")
