#!/usr/bin/env python3
"""The house rules of hexic's tree, checked (issue 11).

1. Layering: every folder of the compiler and of the runtime has a floor;
   a file includes only headers of its own stack on its own floor or below
   (ir/ never reaches into passes/, rtlib/ never into the compiler).
2. Every source folder is listed here with its floor, and in the README's
   layout table; the table names no folder that does not exist.
3. No source folder holds more than MAX_FILES files.

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
    "codegen": ("compiler", 2),
    "passes/schedule": ("compiler", 2),
    "passes/hexiseq": ("compiler", 2),
    "passes/planload": ("compiler", 2),
    "passes": ("compiler", 3),
    "compiler": ("compiler", 4),
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


def check_sizes(root, errors):
    for folder in source_folders(root):
        files = [f for f in os.listdir(os.path.join(root, folder))
                 if os.path.isfile(os.path.join(root, folder, f))]
        if len(files) > MAX_FILES:
            errors.append(f"{folder}/: {len(files)} files, more than {MAX_FILES}: give a concern its own room")


def check_readme(root, errors):
    text = open(os.path.join(root, "README.md"), encoding="utf-8").read()
    m = re.search(r"^## Layout\n(.*?)^## ", text, re.M | re.S)
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
    check_sizes(root, errors)
    check_readme(root, errors)
    for e in errors:
        print("layout: " + e)
    if errors:
        return 1
    print("layout: every include goes down or sideways; every folder is listed; none over %d files" % MAX_FILES)
    return 0


if __name__ == "__main__":
    sys.exit(main())
