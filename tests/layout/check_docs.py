#!/usr/bin/env python3
"""Docs that cannot drift: every option a tool's --help lists is named in the
docs (README.md, docs/*.md), and every option the docs name in backquotes is
one some tool (or a program hexic calls: mpirun, srun, ...) has.

Usage: check_docs.py ROOT BIN_DIR SCRATCH   (exit 1 with one line per miss)
"""
import glob
import os
import re
import subprocess
import sys

OPT = re.compile(r"(?<![\w-])--[a-z][a-z0-9]*(?:-[a-z0-9]+)*")
# Options of programs hexic runs or documents beside its own, named in the docs
# when they say how hexic calls them: not hexic's to list in a --help.
FOREIGN = {
    # mpirun / Open MPI
    "--oversubscribe", "--host", "--hostfile", "--np", "--bind-to", "--map-by", "--mca",
    # srun / sbatch
    "--nodes", "--gpus-per-task", "--distribution", "--multi-prog", "--ntasks",
    # cmake, pip, git, python, nvcc, compute-sanitizer, ctest
    "--build", "--target", "--break-system-packages", "--index-url", "--tool",
    "--output-on-failure", "--test-dir",
    # what a misspelt option looks like, in the text that says it is refused
    "--dryrun",
}
# Tools whose --help lists no option (positional arguments only).
NO_OPTIONS = {"hexic-shard"}


def run(cmd, **kw):
    p = subprocess.run(cmd, capture_output=True, text=True, **kw)
    return p.stdout + p.stderr


def helps(root, bindir, scratch):
    """(tool, --help text) of every tool shipped with hexic."""
    hexic = os.path.join(bindir, "hexic")
    out = os.path.join(scratch, "docs-tiny")
    subprocess.run([hexic, os.path.join(root, "examples/models/tiny.hx"),
                    os.path.join(root, "examples/clusters/cpu8.hx"), "-o", out],
                   capture_output=True, check=True)
    yield "hexic", run([hexic, "--help"])
    for tool in ("hexic-ckpt", "hexic-shard", "hexic-profile"):
        yield tool, run([os.path.join(bindir, tool), "--help"])
    yield "hexic-tokenize.py", run([sys.executable, os.path.join(root, "rtlib/tools/hexic-tokenize.py"), "--help"])
    yield "launch.sh (and the rank programs)", run(["bash", os.path.join(out, "launch.sh"), "--help"])
    yield "bench/gpu_throughput.sh", run(["bash", os.path.join(root, "bench/gpu_throughput.sh"), "--help"])


def docs_text(root):
    files = [os.path.join(root, "README.md")] + sorted(glob.glob(os.path.join(root, "docs", "*.md")))
    return {os.path.relpath(f, root): open(f, encoding="utf-8").read() for f in files}


def fence_problems(name, text):
    """A code fence is ``` alone or with one language word, and they pair
    up: text after a closing fence (or an odd count) swallows the rest of
    the page into a code block."""
    problems, fences = [], 0
    for number, line in enumerate(text.split("\n"), 1):
        if line.lstrip().startswith("```"):
            fences += 1
            if not re.fullmatch(r"\s*```[\w+-]*\s*", line):
                problems.append(f"{name}:{number}: a code fence with text after it: {line[:60]!r}")
    if fences % 2:
        problems.append(f"{name}: {fences} code fences, an odd number")
    return problems


def main():
    root, bindir, scratch = sys.argv[1:4]
    errors = []
    docs = docs_text(root)
    for name, text in docs.items():
        errors += fence_problems(name, text)
    all_docs = "\n".join(docs.values())
    documented = set(OPT.findall(all_docs))
    known = set()
    for tool, text in helps(root, bindir, scratch):
        opts = set(OPT.findall(text))
        if not opts and tool not in NO_OPTIONS:
            errors.append(f"{tool} --help lists no options (did it fail?):\n{text[:400]}")
        known |= opts
        for o in sorted(opts - documented):
            errors.append(f"{tool}: {o} is in its --help but in no page of README.md or docs/")
    for name, text in docs.items():
        for code in re.findall(r"`([^`\n]+)`", text):
            for o in OPT.findall(code):
                if o not in known and o not in FOREIGN:
                    errors.append(f"{name}: `{code}` names {o}, which no tool's --help lists")
    for e in errors:
        print(e)
    print(f"check_docs: {len(known)} options of the tools, {len(errors)} problems")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
