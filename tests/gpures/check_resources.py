#!/usr/bin/env python3
"""Every CUDA kernel's registers and shared memory, as ptxas compiled them
for each architecture, against the launches kernels/cuda/ makes at the
largest shapes --target=cuda accepts (launch_table's lines).

  check_resources.py ptxas OUT.txt NVCC ARGS...   run nvcc, keep ptxas's report
  check_resources.py check LAUNCH_TABLE sm_80=A.txt,B.txt sm_89=... ...
(LAUNCH_TABLE: the launch_table program, whose output it reads)

A kernel passes an architecture when every launch of it fits:
  - threads <= 1024; grid x < 2^31, y and z <= 65535;
  - registers: ptxas's count per thread, allocated per warp in units of 256
    (8 a thread), times the block's warps, within the SM's 65536;
  - shared memory: static + dynamic within 48 KiB, or within the
    architecture's opt-in limit per block when the launcher opts in
    (cudaFuncSetAttribute): sm_80 166912, sm_89 101376, sm_90 232448 bytes.
Kernels named in MIN_BLOCKS (the tensor-core attention) must also spill
nothing (ptxas's spill stores and loads 0) and fit that many blocks an SM
at their largest launch: registers on every architecture, shared memory
(static + dynamic + the 1 KiB the hardware reserves a block) within the
SM's on sm_80 and sm_90 (sm_89's 100 KiB holds one block at head dim 128).
A kernel of the cubins that no launch names fails (a new kernel cannot
escape the check), and so does a launch that names no kernel of the cubins
(a stale or misspelt name). Launch names: "name" covers every
instantiation of a template, "name<A, B>" the instantiations whose last
template arguments are A, B ("attention_forward_tiled<64>" covers
<float, 64> and <__nv_bfloat16, 64>).
"""
import os
import re
import subprocess
import sys

REGS_PER_SM = 65536
REG_UNIT = 256  # registers a warp is allocated in
MAX_THREADS = 1024
DEFAULT_SMEM = 48 * 1024
OPT_IN_SMEM = {"sm_80": 166912, "sm_86": 101376, "sm_89": 101376, "sm_90": 232448}
SM_SMEM = {"sm_80": 167936, "sm_90": 233472}  # per SM, where MIN_BLOCKS' smem is checked
BLOCK_RESERVED_SMEM = 1024
# Blocks an SM a kernel must fit, spilling nothing (kernels/cuda/attention_tc.cu's
# budgets: the FlashAttention-2 forward and backward at 2 blocks an SM).
MIN_BLOCKS = {"attention_forward_tc": 2, "attention_backward_tc": 2}


def run_ptxas(out, cmd):
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if r.returncode != 0:
        sys.stdout.write(r.stdout)
        sys.exit("check_resources.py: %s failed (%d)" % (cmd[0], r.returncode))
    with open(out, "w") as f:
        f.write(r.stdout)


def split_name(demangled):
    """'void k<float, 64>(float*, ...)' -> ('k', ['float', '64'])."""
    s = demangled.strip()
    s = re.sub(r"^void\s+", "", s)
    s = re.sub(r"^\(anonymous namespace\)::", "", s)
    depth, end = 0, len(s)
    for i, c in enumerate(s):  # the parameter list: the first '(' at depth 0
        if c == "<":
            depth += 1
        elif c == ">":
            depth -= 1
        elif c == "(" and depth == 0:
            end = i
            break
    s = s[:end].strip()
    if "<" not in s:
        return s, []
    base, args = s[: s.index("<")], s[s.index("<") + 1 : s.rindex(">")]
    parts, depth, cur = [], 0, ""
    for c in args:
        if c == "," and depth == 0:
            parts.append(cur.strip())
            cur = ""
            continue
        depth += c == "<"
        depth -= c == ">"
        cur += c
    parts.append(cur.strip())
    return base, parts


def standard_anon(mangled):
    """nvcc names an anonymous namespace _GLOBAL__N__<hash>_<file>_<hash>,
    which c++filt leaves mangled: give it the standard _GLOBAL__N_1."""
    m = re.match(r"_ZN(\d+)", mangled)
    if not m:
        return mangled
    n, rest = int(m.group(1)), mangled[m.end():]
    if not rest.startswith("_GLOBAL__N_"):
        return mangled
    return "_ZN12_GLOBAL__N_1" + rest[n:]


def demangle(names):
    if not names:
        return []
    names = [standard_anon(n) for n in names]
    r = subprocess.run(["c++filt"], input="\n".join(names) + "\n", stdout=subprocess.PIPE,
                       text=True, check=True)
    out = r.stdout.split("\n")[: len(names)]
    assert len(out) == len(names), "c++filt gave fewer names than it was given"
    return out


def parse_ptxas(paths):
    """[(mangled, registers, static smem, spilled bytes)] of every entry
    function."""
    kernels = []
    for path in paths:
        fn, spill = None, 0
        for line in open(path):
            m = re.search(r"Compiling entry function '(\S+)'", line)
            if m:
                fn, spill = m.group(1), 0
                continue
            m = re.search(r"(\d+) bytes spill stores, (\d+) bytes spill loads", line)
            if m and fn:
                spill = int(m.group(1)) + int(m.group(2))
                continue
            m = re.search(r"Used (\d+) registers", line)
            if m and fn:
                sm = re.search(r"(\d+) bytes smem", line)
                kernels.append((fn, int(m.group(1)), int(sm.group(1)) if sm else 0, spill))
                fn = None
    return kernels


def occupancy_errors(arch, label, base, regs, static, threads, smem):
    """MIN_BLOCKS' bound for one launch of a kernel (empty when it holds)."""
    want = MIN_BLOCKS.get(base)
    if not want:
        return []
    errors = []
    where = "%s %s at %d threads" % (arch, label, threads)
    if want * reg_per_block(regs, threads) > REGS_PER_SM:
        errors.append("%s: %d registers a thread leave room for fewer than %d blocks an SM"
                      % (where, regs, want))
    per_block = static + smem + BLOCK_RESERVED_SMEM
    if arch in SM_SMEM and want * per_block > SM_SMEM[arch]:
        errors.append("%s: %d bytes of shared memory a block leave room for fewer than %d "
                      "blocks an SM (%d)" % (where, per_block, want, SM_SMEM[arch]))
    return errors


def matches(launch_name, base, targs):
    lb, largs = split_name(launch_name)
    if lb != base:
        return False
    return not largs or (len(largs) <= len(targs) and targs[len(targs) - len(largs):] == largs)


def reg_per_block(regs, threads):
    per_thread = (regs + 7) // 8 * 8
    warps = (threads + 31) // 32
    return warps * max(per_thread * 32, REG_UNIT)


def check(launch_table, arch_specs):
    launches = {}
    out = subprocess.run([launch_table], stdout=subprocess.PIPE, text=True, check=True).stdout
    for line in out.splitlines():
        f = line.split()
        if not f:
            continue
        name, threads, smem, opt_in, gx, gy, gz = f[0], *map(int, f[1:])
        launches.setdefault(name, set()).add((threads, smem, opt_in, gx, gy, gz))
    errors, used = [], set()
    print("%-6s %-48s %5s %7s %12s %14s" % ("arch", "kernel", "regs", "threads", "regs/block",
                                            "smem s+d/limit"))
    for spec in arch_specs:
        arch, files = spec.split("=", 1)
        kernels = parse_ptxas(files.split(","))
        if not kernels:
            errors.append("%s: ptxas reported no kernels" % arch)
        for (mangled, regs, static, spill), dem in zip(kernels,
                                                      demangle([k[0] for k in kernels])):
            base, targs = split_name(dem)
            label = base + ("<%s>" % ", ".join(targs) if targs else "")
            names = [n for n in launches if matches(n, base, targs)]
            if not names:
                errors.append("%s: kernel %s (%s) has no launch in hxc_launch_table: add its "
                              "launcher's shape there" % (arch, label, mangled))
                continue
            used.update(names)
            if base in MIN_BLOCKS and spill:
                errors.append("%s %s: ptxas spills %d bytes (the budget is none)"
                              % (arch, label, spill))
            worst = None
            for n in names:
                for threads, smem, opt_in, gx, gy, gz in sorted(launches[n]):
                    rb = reg_per_block(regs, threads)
                    limit = OPT_IN_SMEM[arch] if opt_in else DEFAULT_SMEM
                    where = "%s %s at %d threads, grid (%d, %d, %d)" % (arch, label, threads, gx, gy, gz)
                    if threads < 1 or threads > MAX_THREADS:
                        errors.append("%s: %d threads a block" % (where, threads))
                    if regs > 255 or rb > REGS_PER_SM:
                        errors.append("%s: %d registers a thread, %d a block, over %d"
                                      % (where, regs, rb, REGS_PER_SM))
                    if static + smem > limit or static > DEFAULT_SMEM:
                        errors.append("%s: shared memory %d static + %d dynamic over %d%s"
                                      % (where, static, smem, limit,
                                         "" if opt_in else " (no opt-in)"))
                    if not (1 <= gx < 2 ** 31 and 1 <= gy <= 65535 and 1 <= gz <= 65535):
                        errors.append("%s: grid past the hardware's limits" % where)
                    errors += occupancy_errors(arch, label, base, regs, static, threads, smem)
                    key = (rb, static + smem)
                    if worst is None or key > worst[0]:
                        worst = (key, threads, smem, limit)
            (rb, total), threads, smem, limit = worst
            print("%-6s %-48s %5d %7d %6d/%5d %7d+%d/%d" % (arch, label[:48], regs, threads, rb,
                                                           REGS_PER_SM, static, smem, limit))
    for n in sorted(set(launches) - used):
        errors.append("launch %s names no kernel of the cubins" % n)
    for e in errors:
        print("FAIL " + e)
    print("check_resources: %d kernel launches checked, %d failures"
          % (sum(len(v) for v in launches.values()), len(errors)))
    return 1 if errors else 0


if __name__ == "__main__":
    if len(sys.argv) > 3 and sys.argv[1] == "ptxas":
        run_ptxas(sys.argv[2], sys.argv[3:])
    elif len(sys.argv) > 3 and sys.argv[1] == "check":
        sys.exit(check(sys.argv[2], sys.argv[3:]))
    else:
        sys.exit(__doc__)
