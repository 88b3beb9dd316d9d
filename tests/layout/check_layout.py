#!/usr/bin/env python3
"""The house rules of hexic's tree, checked (issue 11).

1. Layering: every folder of the compiler and of the runtime has a floor;
   a file includes only headers of its own stack on its own floor or below
   (ir/ never reaches into passes/, rtlib/ never into the compiler).
2. Every source folder is listed here with its floor, and in the README's
   layout table; the table names no folder that does not exist.
3. No source folder holds more than MAX_FILES files.
4. No two files of a folder call into each other: when a.c calls a function
   that b.c defines (not static), b.c calls none that a.c defines. A circle
   means a piece of one belongs in a third file or on a lower floor
   (../shared/notes/style.md). KNOWN_CIRCLES lists the pairs still to untie;
   a pair that is untied must leave the list.

Usage: check_layout.py ROOT   (exit 1 with one line per violation)
"""
import os
import re
import sys

# (stack, floor). Lower floors are included by higher ones, never the reverse.
FLOORS = {
    "ir": ("compiler", 0),
    "ir/text": ("compiler", 0),
    "grammar": ("compiler", 1),
    "passes/cost": ("compiler", 1),
    "codegen": ("compiler", 4),
    "passes/schedule": ("compiler", 2),
    "passes/hexiseq": ("compiler", 2),
    "passes/planload": ("compiler", 2),
    "passes": ("compiler", 3),
    "compiler": ("compiler", 5),
    "kernels": ("runtime", 0),
    "kernels/cpu": ("runtime", 0),
    "kernels/cuda": ("runtime", 0),
    "rtlib": ("runtime", 1),
    "rtlib/cpu": ("runtime", 1),
    "rtlib/cuda": ("runtime", 1),
    "rtlib/seq": ("runtime", 1),
    "rtlib/ckpt": ("runtime", 1),
    "rtlib/tools": ("runtime", 2),
}
# Folders outside the floors: they may include anything, nothing on a floor
# includes them.
FREE = ("tests", "bench", "examples", "docs", "scripts")
TOP_SOURCE = ("compiler", "grammar", "ir", "passes", "codegen", "rtlib", "kernels")
MAX_FILES = 16
SOURCE_EXT = re.compile(r"\.(c|h|l|y|cu|cuh)$")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def source_folders(root):
    for top in TOP_SOURCE:
        for d, subdirs, _ in os.walk(os.path.join(root, top)):
            subdirs[:] = sorted(s for s in subdirs if not s.startswith("."))
            yield os.path.relpath(d, root)


def resolve(root, folder, inc):
    for base in (folder, ""):
        p = os.path.normpath(os.path.join(base, inc))
        if os.path.isfile(os.path.join(root, p)):
            return p
    return None  # a header of the build tree (parser.h, lexer.h) or the system


def check_includes(root, errors):
    for folder in source_folders(root):
        if folder not in FLOORS:
            errors.append(f"{folder}/: a source folder with no floor in tests/layout/check_layout.py")
            continue
        stack, floor = FLOORS[folder]
        for name in sorted(os.listdir(os.path.join(root, folder))):
            if not SOURCE_EXT.search(name):
                continue
            path = os.path.join(folder, name)
            text = open(os.path.join(root, path), encoding="utf-8", errors="replace").read()
            for m in INCLUDE.finditer(text):
                target = resolve(root, folder, m.group(1))
                if target is None:
                    continue
                tfolder = os.path.dirname(target)
                if tfolder.split("/")[0] in FREE:
                    errors.append(f"{path}: includes {target}, which belongs to {tfolder}/ (tests and tools are not a floor)")
                    continue
                tstack, tfloor = FLOORS.get(tfolder, (None, None))
                if tstack != stack:
                    errors.append(f"{path}: includes {target} across stacks ({stack} -> {tstack})")
                elif tfloor > floor:
                    errors.append(f"{path}: includes {target} from a higher floor ({folder} is floor {floor}, {tfolder} is {tfloor})")


# Pairs that still call into each other (issue 28, item 4), each to untie.
KNOWN_CIRCLES = {
    # found by this check, not named in the issue
    ("kernels/cuda/attention.cu", "kernels/cuda/attention_tc.cu"),
    ("kernels/cuda/context.cu", "kernels/cuda/linear.cu"),
}
CODE_EXT = re.compile(r"\.(c|cu)$")
# A definition at the start of a line (the house style): return type, name,
# parameters without ';' or braces, then the body's '{'. Not static.
DEFINITION = re.compile(r"^(?!static\b)(?:[A-Za-z_]\w*[\s*]+)+([A-Za-z_]\w*)\(([^;{}]*)\)\s*\{", re.M)
CALL = re.compile(r"\b([A-Za-z_]\w*)\s*\(")
COMMENT_OR_STRING = re.compile(r'/\*.*?\*/|//[^\n]*|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'', re.S)


# Compiler annotations that look like calls: __attribute__((...)),
# __launch_bounds__(...).
ANNOTATION = re.compile(r"\b__\w+__\s*\(")


def drop_annotations(text):
    out, at = [], 0
    for m in ANNOTATION.finditer(text):
        if m.start() < at:
            continue
        depth, i = 1, m.end()
        while i < len(text) and depth:
            depth += {"(": 1, ")": -1}.get(text[i], 0)
            i += 1
        out.append(text[at:m.start()])
        at = i
    return "".join(out) + text[at:]


def code_of(path):
    """The file's text without comments, strings and annotations."""
    text = open(path, encoding="utf-8", errors="replace").read()
    text = COMMENT_OR_STRING.sub(lambda m: " " if m.group(0)[0] in "/" else '""', text)
    return drop_annotations(text)


def check_circles(root, errors):
    for folder in source_folders(root):
        names = sorted(n for n in os.listdir(os.path.join(root, folder)) if CODE_EXT.search(n))
        code = {n: code_of(os.path.join(root, folder, n)) for n in names}
        defines = {n: {m.group(1) for m in DEFINITION.finditer(code[n])} for n in names}
        calls = {}
        for n in names:
            called = {m.group(1) for m in CALL.finditer(code[n])} - defines[n]
            calls[n] = {other for other in names if other != n and called & defines[other]}
        for a in names:
            for b in names:
                if a < b and b in calls[a] and a in calls[b]:
                    pair = (f"{folder}/{a}", f"{folder}/{b}")
                    if pair not in KNOWN_CIRCLES:
                        both = sorted(set(defines[b]) & {m.group(1) for m in CALL.finditer(code[a])})
                        back = sorted(set(defines[a]) & {m.group(1) for m in CALL.finditer(code[b])})
                        errors.append(f"{pair[0]} and {pair[1]} call into each other ({', '.join(both[:3])} "
                                      f"one way, {', '.join(back[:3])} the other): move the piece one of "
                                      "them needs into a third file or a lower floor")
    for a, b in sorted(KNOWN_CIRCLES):
        paths = [os.path.join(root, p) for p in (a, b)]
        if not all(os.path.isfile(p) for p in paths):
            errors.append(f"KNOWN_CIRCLES lists {a} and {b}, which are no longer both in the tree: "
                          "take the pair off the list")
            continue
        ca, cb = (code_of(p) for p in paths)
        da, db = ({m.group(1) for m in DEFINITION.finditer(c)} for c in (ca, cb))
        if not ({m.group(1) for m in CALL.finditer(ca)} & db and {m.group(1) for m in CALL.finditer(cb)} & da):
            errors.append(f"{a} and {b} no longer call into each other: take the pair off KNOWN_CIRCLES")


def check_sizes(root, errors):
    for folder in source_folders(root):
        files = [f for f in os.listdir(os.path.join(root, folder))
                 if os.path.isfile(os.path.join(root, folder, f))]
        if len(files) > MAX_FILES:
            errors.append(f"{folder}/: {len(files)} files, more than {MAX_FILES}: give a concern its own room")


def check_readme(root, errors):
    text = open(os.path.join(root, "README.md"), encoding="utf-8").read()
    m = re.search(r"^## Layout\n(.*?)(?:^## |\Z)", text, re.M | re.S)
    if not m:
        errors.append("README.md: no '## Layout' section")
        return
    listed = set(re.findall(r"^\| `([A-Za-z0-9_./-]+)/` \|", m.group(1), re.M))
    actual = set(source_folders(root)) | {d for d in FREE if os.path.isdir(os.path.join(root, d))}
    for d in sorted(actual - listed):
        errors.append(f"README.md: the layout table does not list {d}/")
    for d in sorted(listed - actual):
        errors.append(f"README.md: the layout table lists {d}/, which is not in the tree")


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else "."
    errors = []
    check_includes(root, errors)
    check_circles(root, errors)
    check_sizes(root, errors)
    check_readme(root, errors)
    for e in errors:
        print("layout: " + e)
    if errors:
        return 1
    print("layout: every include goes down or sideways; no two files call into each other (%d pairs "
          "still listed); every folder is listed; none over %d files" % (len(KNOWN_CIRCLES), MAX_FILES))
    return 0


if __name__ == "__main__":
    sys.exit(main())
