"""usage: same_plan.py WRITTEN.json REREAD.json [ragged]

The plan hexic wrote and the one it wrote again after reading it back
(--plan): the same devices (token ranges, heads), pipelines, groups with
their split tables, and exactly the same simulated figures. With `ragged`,
the plan must also have all-to-all groups of different sizes and uneven
head counts, so the round trip covers the asymmetric tables."""
import json
import sys

a = json.load(open(sys.argv[1]))
b = json.load(open(sys.argv[2]))
bad = [k for k in ("model", "description", "schedule", "devices", "pipelines", "groups",
                   "simulated") if a[k] != b[k]]
if bad:
    sys.exit("differs after the round trip: " + ", ".join(bad))
if not any(g["kind"] == "hp_a2a" for g in a["groups"]):
    sys.exit("not a context/head parallel plan")
if len(sys.argv) > 3:
    sizes = {len(g["ranks"]) for g in a["groups"] if g["kind"] == "hp_a2a"}
    heads = {d["heads"][1] - d["heads"][0] for d in a["devices"]}
    if len(sizes) < 2 or len(heads) < 2:
        sys.exit("plan is not ragged: group sizes %s, heads %s" % (sorted(sizes), sorted(heads)))
print("round trip: %d devices, %d groups, iteration_s %r" %
      (len(a["devices"]), len(a["groups"]), a["simulated"]["iteration_s"]))
