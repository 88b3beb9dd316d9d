#!/usr/bin/env python3
"""A stand-in for `srun --multi-prog CONF [ARGS...]` that runs every task here.

Each task's argv is what Slurm gives it, as srun(1) documents the multi-prog
file (MULTIPLE PROGRAM CONFIGURATION) and as slurmstepd's multi_prog.c reads
it: lines split at newlines (so no argument can hold one), blank lines and
lines whose first non-blank is '#' skipped, a line ending in a backslash
continued on the next; then a task range (N, N-M, comma lists, '*') and the
program and its arguments, split at blanks, where '%t' becomes the task id
and '%o' its offset within the range ('%' and any other character are
dropped), a backslash keeps the next character, and single quotes keep
everything up to the next quote (no escape inside). ARGS after CONF are
appended to every task's argv as they are. The tasks (one per line of
SLURM_HOSTFILE, or SLURM_NTASKS) run one after another with SLURM_PROCID
set; the exit status is the highest of theirs.
"""
import os
import shutil
import subprocess
import sys

SPACE = " \t\n\v\f\r"  # C's isspace


def die(msg):
    print("srun: error: " + msg, file=sys.stderr)
    sys.exit(1)


def in_range(rank, spec):
    """The task's offset within spec, or None when spec does not hold it."""
    if spec == "*":
        return rank
    passed = 0
    for part in spec.split(","):
        low, dash, high = part.partition("-")
        if not low.isdigit() or (dash and not high.isdigit()):
            die("Invalid task range specification (%s)" % part)
        low, high = int(low), int(high) if dash else int(low)
        if low <= rank <= high:
            return passed + rank - low
        passed += high - low + 1
    return None


def parse_args(lines, i, args, rank, offset):
    """The argv of a line's text after its range (args), reading continued
    lines from lines[i:]."""
    argv, buf, pos = [], None, 0
    while pos < len(args):
        if buf is not None:
            argv.append(buf)
            buf = None
        while True:  # one argument, in pieces
            start = pos
            while pos < len(args) and args[pos] not in "\\%'" and args[pos] not in SPACE:
                pos += 1
            buf = (buf or "") + args[start:pos]
            if pos == len(args):
                return argv + [buf]
            c = args[pos]
            pos += 1
            if c == "%":
                nxt = args[pos] if pos < len(args) else ""
                buf += str(rank) if nxt == "t" else str(offset) if nxt == "o" else ""
                pos += 1
            elif c == "\\":
                if pos < len(args):
                    buf += args[pos]
                    pos += 1
                elif i < len(lines):  # a line break: on with the next line
                    args, pos, i = lines[i], 0, i + 1
                else:
                    return argv + [buf]
            elif c == "'":
                end = args.find("'", pos)
                if end < 0:
                    die("Program arguments specification format invalid: " + args)
                buf += args[pos:end]
                pos = end + 1
            else:  # blanks end the argument
                while pos < len(args) and args[pos] in SPACE:
                    pos += 1
                break
    if buf is not None:
        argv.append(buf)
    return argv


def task_argv(conf, rank):
    lines = [line for line in conf.split("\n") if line]  # strtok: empty lines vanish
    last_break = False
    i = 0
    while i < len(lines):
        line = lines[i]
        i += 1
        line_break = line.endswith("\\")
        if last_break:
            last_break = line_break
            continue
        last_break = line_break
        p = line.lstrip(SPACE)
        if not p or p.startswith("#"):
            continue
        end = next((k for k, ch in enumerate(p) if ch in SPACE), None)
        if end is None:
            die("Invalid MPMD configuration line %d" % i)
        offset = in_range(rank, p[:end])
        if offset is None:
            continue
        return parse_args(lines, i, p[end + 1 :].lstrip(SPACE), rank, offset)
    die("Program for task rank %d not specified." % rank)


def main():
    argv = sys.argv[1:]
    if "--multi-prog" not in argv:
        die("this stand-in runs --multi-prog only")
    positional = [k for k, a in enumerate(argv) if not a.startswith("-")]
    if not positional:
        die("no multi-prog file")
    conf_at = positional[0]
    conf = open(argv[conf_at], encoding="utf-8", errors="surrogateescape").read()
    extra = argv[conf_at + 1 :]
    hostfile = os.environ.get("SLURM_HOSTFILE")
    hosts = open(hostfile).read().split() if hostfile else []
    ntasks = int(os.environ.get("SLURM_NTASKS", len(hosts)))
    status = 0
    for rank in range(ntasks):
        task = task_argv(conf, rank) + extra
        exe = task[0] if "/" in task[0] else shutil.which(task[0])
        if not exe:
            die("Could not find executable " + task[0])
        env = dict(os.environ, SLURM_PROCID=str(rank))
        if rank < len(hosts):
            env["SLURMD_NODENAME"] = hosts[rank]
        status = max(status, subprocess.call(task, executable=exe, env=env))
    sys.exit(status)


if __name__ == "__main__":
    main()
