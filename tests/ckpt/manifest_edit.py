#!/usr/bin/env python3
"""Edits a hexic checkpoint MANIFEST as a forger would, then signs it again
(tests/ckpt, mode verify): its checksum line is the FNV-1a 64 of every byte
above it (docs/checkpoint-format.md), so the edit is not caught by it.

manifest_edit.py swap MANIFEST ID_A ID_B
    in every rank file's index holding both spec ids, swaps the byte offsets
    of their records: the index then points ID_A at ID_B's data and back.
manifest_edit.py shift MANIFEST ID DELTA
    adds DELTA to the byte offset of every record of spec id ID.
manifest_edit.py model MANIFEST FROM TO
    replaces FROM with TO in the model line (TO '': removed), as a run of
    another model (rope_theta, norm_eps) or an older hexic would have written it.
"""
import sys


def fnv64(data):
    h = 0xcbf29ce484222325
    for b in data:
        h ^= b
        h = (h * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    return h


def edit(lines, op, args):
    """The index lines changed in place; returns how many records changed."""
    changed = 0
    if op == "model":
        for i, l in enumerate(lines):
            if l.startswith("model ") and args[0] in l:
                lines[i] = l.replace(args[0], args[1])
                changed += 1
        return changed
    rank_starts = [i for i, l in enumerate(lines) if l.startswith("rank ")] + [len(lines)]
    for start, end in zip(rank_starts, rank_starts[1:]):
        recs = {}
        for i in range(start + 1, end):
            f = lines[i].split()
            if f and f[0] == "tensor":
                recs.setdefault(int(f[1]), i)
        if op == "swap":
            a, b = int(args[0]), int(args[1])
            if a in recs and b in recs:
                fa, fb = lines[recs[a]].split(), lines[recs[b]].split()
                fa[8], fb[8] = fb[8], fa[8]
                lines[recs[a]], lines[recs[b]] = " ".join(fa), " ".join(fb)
                changed += 2
        elif op == "shift":
            tid, delta = int(args[0]), int(args[1])
            if tid in recs:
                f = lines[recs[tid]].split()
                f[8] = str(int(f[8]) + delta)
                lines[recs[tid]] = " ".join(f)
                changed += 1
    return changed


def main():
    op, path, args = sys.argv[1], sys.argv[2], sys.argv[3:]
    with open(path, "rb") as f:
        text = f.read().decode()
    lines = text.split("\n")[:-1]
    assert lines[-1].startswith("manifest-fnv64 "), "not a hexic MANIFEST"
    body = lines[:-1]
    if edit(body, op, args) == 0:
        sys.exit(f"manifest_edit.py: nothing to {op} in {path}")
    signed = "".join(l + "\n" for l in body)
    signed += "manifest-fnv64 %016x\n" % fnv64(signed.encode())
    with open(path, "w") as f:
        f.write(signed)


if __name__ == "__main__":
    main()
