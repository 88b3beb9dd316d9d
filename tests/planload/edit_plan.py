"""usage: edit_plan.py IN.json OUT.json EDIT

Hand edits of a plan.json that break it, one per EDIT name; the plan is
written back in hexic's own layout (one line per stage, device and group)
so errors point at lines a person would edit. The HexiSeq edits need a
HexiSeq plan; the others (stale_groups, missing_group, no_groups,
recompute_off, recompute_on, shards_*, device_*) any plan with two pipelines
or more."""
import json
import sys

p = json.load(open(sys.argv[1]))
edit = sys.argv[3]
devs = p["devices"]
assert all(d["rank"] == i for i, d in enumerate(devs)), "devices in rank order"
stages = [st for pl in p["pipelines"] for st in pl["stages"]]
SEQ_EDITS = ("drop_range", "dup_head", "stage_rank_twice", "group_rank_twice", "not_zigzag",
             "split_table", "cp", "group_layers", "group_kind", "empty_unit")


def unit_group(st, hp):
    """An hp group of stage st with >= 2 members, all first devices (TP rank
    0) of the stage's units: two units that split one sequence and one TP
    head share. None when the stage has no such group (no seq layout, or
    every group a single unit)."""
    if "cp" not in st:
        return None
    firsts = set(st["ranks"][::st["tp"]])
    return next((g for g in hp if len(g["ranks"]) >= 2 and set(g["ranks"]) <= firsts), None)


def merge_chunks(ranges):
    """Token ranges joined where one ends at the next's start."""
    out = []
    for b, e in sorted(ranges):
        if out and out[-1][1] == b:
            out[-1][1] = e
        else:
            out.append([b, e])
    return out


def refill_split_tables(p, devs):
    """Every hp group's split table from the devices' tokens and heads (the
    sender's tokens x the receiver's heads), so the tables agree with them."""
    tokens = lambda r: sum(e - b for b, e in devs[r]["seq"])
    heads = lambda r: devs[r]["heads"][1] - devs[r]["heads"][0]
    for g in p["groups"]:
        if g["kind"] == "hp_a2a":
            g["split_table"] = [tokens(x) * heads(y) for x in g["ranks"] for y in g["ranks"]]


def zero1(p, grads):
    """A ZeRO-1 plan: train.optimizer_sharding zero1 and, on every gradient
    group without them, even shards (parts per million, the remainder on the
    first members)."""
    p.setdefault("train", {})["optimizer_sharding"] = "zero1"
    for g in grads:
        if "optimizer_shards" not in g:
            n = len(g["ranks"])
            g["optimizer_shards"] = [1000000 // n + (k < 1000000 % n) for k in range(n)]


if edit in SEQ_EDITS:
    hp = [g for g in p["groups"] if g["kind"] == "hp_a2a"]
    # the first stage (any pipeline) with a seq layout and such a group: the
    # scheduler decides which stages and groups those are, so look, not assume
    stage0, group = next(((st, unit_group(st, hp)) for st in stages if unit_group(st, hp)),
                         (None, None))
    assert group, "no stage with an hp group of two or more units"
    other = next((st for st in stages if st is not stage0), None)
    tp, ranks = stage0["tp"], stage0["ranks"]
    r0, r1 = group["ranks"][0], group["ranks"][1]
else:
    assert len(p["pipelines"]) >= 2, "a plan of one pipeline"
    grads = [g for g in p["groups"] if g["kind"] in ("grad", "unsplit")]
    assert grads, "a plan without gradient groups"

if edit == "drop_range":      # a token range held by nobody
    del devs[r1]["seq"][-1]
elif edit == "dup_head":      # two ranks of one hp group with the same heads
    devs[r1]["heads"] = list(devs[r0]["heads"])
elif edit == "stage_rank_twice":  # r0 in a second stage as well
    assert other, "a plan of one stage"
    other["ranks"][0] = r0
elif edit == "group_rank_twice":
    group["ranks"][1] = group["ranks"][0]
elif edit == "not_zigzag":    # every token once, but not the zig-zag chunks
    u0, u1 = ranks.index(r0), ranks.index(r1)
    for t in range(tp):
        a, b = devs[ranks[u0 + t]], devs[ranks[u1 + t]]
        a["seq"], b["seq"] = b["seq"], a["seq"]
elif edit == "empty_unit":  # r1's unit holds no tokens: r0's takes them, tables agree
    u0, u1 = ranks.index(r0), ranks.index(r1)
    for t in range(tp):
        a, b = devs[ranks[u0 + t]], devs[ranks[u1 + t]]
        a["seq"] = merge_chunks(a["seq"] + b["seq"])
        b["seq"] = []
    refill_split_tables(p, devs)
elif edit == "split_table":
    group["split_table"][1] += 1
elif edit == "cp":
    stage0["cp"] += 1
elif edit == "group_layers":  # end before begin
    group["layers"] = [3, 1]
elif edit == "group_kind":
    group["kind"] = "hp"
elif edit == "stale_groups":  # the last pipeline deleted, its batch moved, groups kept
    gone = p["pipelines"].pop()
    first = p["pipelines"][0]
    moved = gone["micro_batches"] * gone["micro_batch_size"]
    total = first["micro_batches"] * first["micro_batch_size"] + moved
    if moved % first["micro_batch_size"]:
        first["micro_batch_size"] = 1
    first["micro_batches"] = total // first["micro_batch_size"]
elif edit == "missing_group":  # one gradient group left out
    p["groups"].remove(grads[-1])
elif edit == "device_rank":  # a rank the cluster does not have
    devs[-1]["rank"] = len(devs)
elif edit == "device_name":  # two devices swapped: a plan for another order
    devs[0]["name"], devs[1]["name"] = devs[1]["name"], devs[0]["name"]
elif edit == "device_gpu":  # rank 0 on another GPU type of the plan's cluster
    devs[0]["gpu"] = next(d["gpu"] for d in devs if d["gpu"] != devs[0]["gpu"])
elif edit == "device_node":
    devs[0]["node"] = next(d["node"] for d in devs if d["node"] != devs[0]["node"])
elif edit == "no_groups":  # no tables at all: the stages' are derived (accepted)
    p["groups"] = []
elif edit.startswith("shards_"):  # ZeRO-1 optimizer shards (zero1_api.md)
    zero1(p, grads)
    g0 = grads[0]
    if edit == "shards_uneven":  # accepted: the first member takes the most
        n = len(g0["ranks"])
        g0["optimizer_shards"] = [1000000 - 1000 * (n - 1)] + [1000] * (n - 1)
    elif edit == "shards_length":
        g0["optimizer_shards"].append(0)
    elif edit == "shards_sum":
        g0["optimizer_shards"][0] += 1
    elif edit == "shards_negative":
        g0["optimizer_shards"][0] += g0["optimizer_shards"][1] + 1
        g0["optimizer_shards"][1] = -1
    elif edit == "shards_kind":
        # refused as it is read, before the groups are checked against the stages
        p["groups"].append({"kind": "tp", "ranks": [0], "layers": [0, 1],
                            "optimizer_shards": [1000000]})
    elif edit == "shards_unsharded":  # shards on a plan that says none
        p["train"]["optimizer_sharding"] = "none"
    elif edit == "shards_word":
        p["train"]["optimizer_sharding"] = "zero3"
    elif edit == "shards_train_word":  # the setting without its object
        p["train"] = "zero1"
    else:
        sys.exit("unknown edit " + edit)
elif edit == "recompute_off":  # against recompute = full
    stages[-1]["recompute"] = False
elif edit == "recompute_on":  # against recompute = none
    stages[-1]["recompute"] = True
else:
    sys.exit("unknown edit " + edit)


def line(v):
    return json.dumps(v)


out = ["{"]
keys = list(p)
for k in keys:
    v = p[k]
    tail = "," if k != keys[-1] else ""
    if k == "pipelines":
        out.append("  %s: [" % json.dumps(k))
        for i, pl in enumerate(v):
            head = {x: pl[x] for x in pl if x != "stages"}
            out.append("    %s, \"stages\": [" % line(head)[:-1])
            out += ["        %s%s" % (line(st), "," if j + 1 < len(pl["stages"]) else "")
                    for j, st in enumerate(pl["stages"])]
            out.append("    ]}%s" % ("," if i + 1 < len(v) else ""))
        out.append("  ]" + tail)
    elif k in ("devices", "groups"):
        out.append("  %s: [" % json.dumps(k))
        out += ["    %s%s" % (line(x), "," if i + 1 < len(v) else "") for i, x in enumerate(v)]
        out.append("  ]" + tail)
    else:
        out.append("  %s: %s%s" % (json.dumps(k), line(v), tail))
out.append("}")
open(sys.argv[2], "w").write("\n".join(out) + "\n")
