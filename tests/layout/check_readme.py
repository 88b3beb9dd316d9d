#!/usr/bin/env python3
"""The README's commands, run: every line of a ```-fenced block that starts
with build/hexic, make or out/ runs for real in a scratch folder (build/ is
BIN_DIR, examples/ the tree's); `bash X.sh ...` is checked by `bash -n` and its
arguments in the tree must exist (the two commands rebuild the tree, the suite
itself is what the second one runs, and the worked example to transformers has
a test of its own, hf.example). A block that follows a command's
block and starts like its output ("plan: ...", "/* rank_...") must match:
the output word for word, a rank file's lines in order ("..." skips).
The picture the README shows must be the plan.svg its command writes.

Usage: check_readme.py ROOT BIN_DIR SCRATCH   (exit 1 naming each miss)
"""
import os
import re
import shutil
import subprocess
import sys

MPI_ENV = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
           "OMPI_MCA_rmaps_base_oversubscribe": "1", "OPENBLAS_NUM_THREADS": "1"}


def fenced_blocks(text):
    """(first line number, lines) of every ``` block."""
    blocks, cur, start = [], None, 0
    for n, line in enumerate(text.split("\n"), 1):
        if line.strip().startswith("```"):
            if cur is None:
                cur, start = [], n + 1
            else:
                blocks.append((start, cur))
                cur = None
        elif cur is not None:
            cur.append(line.strip())
    return blocks


def check_script_line(root, line, errors, where):
    words = line.split()
    script = os.path.join(root, words[1])
    if not os.path.isfile(script):
        errors.append(f"{where}: {words[1]} does not exist")
        return
    p = subprocess.run([words[0], "-n", script], capture_output=True, text=True)
    if p.returncode:
        errors.append(f"{where}: {words[0]} -n {words[1]}: {p.stderr.strip()}")
    for w in words[2:]:
        # the tree's files must exist; other words name the user's own folders
        if w.split("/")[0] in ("examples", "scripts", "docs") and not os.path.exists(os.path.join(root, w)):
            errors.append(f"{where}: {w} does not exist")


def run_line(line, scratch, env, errors, where):
    cmd = line.replace("build/hexic", "./build/hexic", 1) if line.startswith("build/") else line
    p = subprocess.run(["bash", "-c", cmd], cwd=scratch, env=env, capture_output=True,
                       text=True, timeout=600)
    if p.returncode:
        errors.append(f"{where}: `{line}` exited {p.returncode}:\n{(p.stdout + p.stderr)[-1500:]}")
    return p.stdout


def compare_output(shown, stdout, scratch, errors, where):
    if shown[0].startswith("/* rank_"):
        name = shown[0].split()[1].rstrip(":")
        path = next((os.path.join(dp, name) for dp, _, fs in os.walk(os.path.join(scratch, "out"))
                     if name in fs), None)
        if path is None:
            errors.append(f"{where}: no {name} was written")
            return
        lines = [l.strip() for l in open(path, encoding="utf-8").read().split("\n")]
        i = 0
        for want in (l for l in shown if l != "..."):
            while i < len(lines) and lines[i] != want:
                i += 1
            if i == len(lines):
                errors.append(f"{where}: {name} has no line '{want}' (in this order)")
                return
        return
    got = [l.strip() for l in stdout.strip().split("\n")]
    if got != shown:
        errors.append(f"{where}: the README shows\n  " + "\n  ".join(shown) +
                      "\nbut the command printed\n  " + "\n  ".join(got))


def main():
    root, bindir, scratch = (os.path.abspath(a) for a in sys.argv[1:4])
    shutil.rmtree(scratch, ignore_errors=True)
    os.makedirs(scratch)
    os.symlink(os.path.join(root, "examples"), os.path.join(scratch, "examples"))
    os.symlink(bindir, os.path.join(scratch, "build"))
    env = dict(os.environ, **MPI_ENV)
    text = open(os.path.join(root, "README.md"), encoding="utf-8").read()
    errors, ran, last_stdout = [], 0, None
    for start, lines in fenced_blocks(text):
        where = f"README.md:{start}"
        if lines and last_stdout is not None and (lines[0].startswith("plan:") or
                                                 lines[0].startswith("/* rank_")):
            compare_output(lines, last_stdout, scratch, errors, where)
            last_stdout = None
            continue
        last_stdout = None
        for line in lines:
            if re.match(r"(bash|sh) \S+\.sh\b", line):
                check_script_line(root, line, errors, where)
                ran += 1
            elif re.match(r"(build/hexic|make|out/)", line):
                last_stdout = run_line(line, scratch, env, errors, where)
                ran += 1
    for img in re.findall(r"!\[[^\]]*\]\((docs/img/plan-([^)]*)\.svg)\)", text):
        # docs/img/plan-13b-hetero-32.svg is out/13b/plan.svg of the README's command
        out = os.path.join(scratch, "out", img[1].split("-")[0], "plan.svg")
        if not os.path.exists(out) or open(out, "rb").read() != open(os.path.join(root, img[0]), "rb").read():
            errors.append(f"README.md: {img[0]} is not the plan.svg its command writes ({out}); "
                          f"copy that file over it")
    for e in errors:
        print(e)
    print(f"check_readme: {ran} commands, {len(errors)} problems")
    return 1 if errors or ran == 0 else 0


if __name__ == "__main__":
    sys.exit(main())
