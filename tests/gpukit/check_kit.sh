#!/usr/bin/env bash
# The GPU kit is self-contained (tests/gpu/README.md):
#
#   check_kit.sh WORKDIR [KIT]
#
# Without KIT, `tests/gpu/run.sh prepare` builds one under WORKDIR (the CUDA
# toolkit needed: exit 77 without nvcc). Then, with the kit unpacked:
#  1. every ELF file of it, with LD_LIBRARY_PATH at the kit's lib/, takes no
#     library from outside the kit but glibc, libstdc++, libgcc_s and the
#     CUDA/NCCL ones ($kit_allowed of tests/gpu/prepare.sh), and none is
#     missing but those;
#  2. the kit's mpirun (PATH first) starts the kit's 2-rank CPU program, and
#     every library the dynamic loader initialised in mpirun and the ranks
#     (LD_DEBUG=libs: the libraries and the MCA plugins Open MPI and PMIx
#     dlopen) is the kit's or allowed;
#  3. `run.sh run KIT` on this machine without a GPU prints its table with
#     the kit row PASS, no FAIL, and exits 2 within 2 minutes;
#  4. with a fake nvidia-smi of an old driver, the machine row is a FAIL
#     naming the driver's and the runtime's versions;
#  5. on a fake GPU (nvidia-smi and check_kernels faked), a kernel group
#     that crashes or hangs is a FAIL and the 60 s deadline holds.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
work=${1:?usage: check_kit.sh WORKDIR [KIT]}
mkdir -p "$work"
work=$(cd "$work" && pwd)
kit=${2:-}
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
fails=0
fail() { echo "FAIL $*"; fails=$((fails + 1)); }
t0=$(date +%s)

if [ -z "$kit" ]; then
  if [ ! -x "$CUDA_HOME/bin/nvcc" ]; then
    echo "check_kit: no CUDA toolkit at $CUDA_HOME: skipped"
    exit 77
  fi
  kit=$work/kit
  HEXIC_GPU_BUILD=$work/build HEXIC_GPU_JOBS=${HEXIC_GPU_JOBS:-2} \
    bash "$root/tests/gpu/run.sh" prepare "$kit" >"$work/prepare.out" 2>&1
  rc=$?
  tail -n 25 "$work/prepare.out"
  [ $rc = 0 ] || { echo "FAIL prepare exited $rc (see $work/prepare.out)"; exit 1; }
  echo "== prepare: $(($(date +%s) - t0)) s"
fi
kit=$(cd "$kit" && pwd)
size=$(du -sb "$kit/kit.tar.xz" | cut -f1)
echo "== kit: $kit, $((size / 1024 / 1024)) MiB"
[ "$size" -le $((48 * 1024 * 1024)) ] || fail "the kit is $size bytes, more than 48 MiB"

# The functions of run.sh (kit_env, find_nccl) and prepare.sh ($kit_allowed).
HEXIC_GPU_SOURCE_ONLY=1 . "$root/tests/gpu/run.sh"
k=$(mktemp -d /tmp/hexic-kit-check.XXXXXX)
trap 'rm -rf "$k"' EXIT
xz -dc "$kit/kit.tar.xz" | tar -C "$k" -xf - || { echo "FAIL cannot unpack"; exit 1; }

# 1. ldd of every ELF file.
stage=$k
n=0
while read -r f; do
  n=$((n + 1))
  while read -r name arrow path _; do
    [ "$arrow" = "=>" ] || continue
    [[ $name =~ $kit_allowed ]] && continue
    case $path in
    "$k"/*) ;;
    not) fail "${f#"$k"/}: $name not found" ;;
    *) fail "${f#"$k"/}: $name from $path, outside the kit" ;;
    esac
  done < <(LD_LIBRARY_PATH=$k/lib:$CUDA_HOME/lib64 ldd "$f" 2>/dev/null)
done < <(elf_files "$k")
echo "== ldd: $n ELF files checked"
[ "$n" -gt 20 ] || fail "only $n ELF files in the kit"

# 2. The kit's mpirun and what the loader opened under it.
find_nccl
(
  kit_env "$k"
  which=$(command -v mpirun)
  [ "$which" = "$k/sys/usr/bin/mpirun" ] || { echo "FAIL mpirun is $which"; exit 1; }
  mkdir -p "$work/ld"
  rm -f "$work"/ld/ld.*
  LD_DEBUG=libs LD_DEBUG_OUTPUT=$work/ld/ld timeout 120 "$k/sets/cpu2/launch.sh" --steps 2 \
    --data "$k/data/text.bin" >"$work/cpu2.out" 2>&1
  rc=$?
  grep -c '^step' "$work/cpu2.out" | grep -qx 2 || { echo "FAIL the kit's 2-rank CPU program: exit $rc"; tail -5 "$work/cpu2.out"; exit 1; }
  echo "== the kit's mpirun ($which) ran 2 CPU ranks"
) || fails=$((fails + 1))
# The loader's trace of mpirun and the ranks (not of bash and coreutils,
# which launch.sh runs from the machine): each library it initialised.
opened=$(grep -l -E "initialize program: (mpirun|$k/)" "$work"/ld/ld.* 2>/dev/null | xargs -r cat |
  sed -n 's/.*calling init: \(.*\)$/\1/p' | sort -u)
nfiles=$(grep -c . <<<"$opened")
plugins=$(grep -c '/openmpi3/mca_' <<<"$opened")
echo "== the loader initialised $nfiles libraries in mpirun and the ranks, $plugins of them Open MPI plugins"
[ "$plugins" -gt 5 ] || fail "only $plugins Open MPI plugins opened: not the kit's?"
while read -r f; do
  [ -n "$f" ] || continue
  case $f in "$k"/*) continue ;; esac
  real=$(readlink -f "$f" 2>/dev/null || echo "$f")
  case $real in "$k"/*) continue ;; esac
  [[ $(basename "$f") =~ $kit_allowed ]] || fail "opened under the kit's mpirun: $f"
done <<<"$opened"

# 3. run KIT without a GPU.
if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
  t=$(date +%s)
  timeout 120 bash "$root/tests/gpu/run.sh" run "$kit" >"$work/run.out" 2>&1
  rc=$?
  sed -n '/^== summary/,$p' "$work/run.out"
  echo "== run KIT: exit $rc in $(($(date +%s) - t)) s"
  [ $rc = 2 ] || fail "run KIT without a GPU exited $rc, want 2"
  grep -q '^kit: its Open MPI runs 2 CPU ranks  *PASS' "$work/run.out" || fail "the kit row is not PASS"
  ! grep -q '  FAIL  ' "$work/run.out" || fail "a FAIL row without a GPU"
fi
# 4. A driver older than the CUDA 13 runtime (a fake nvidia-smi of a 535
#    driver, CUDA 12.2; the CUDA runtime here finds no driver new enough):
#    the machine row is a FAIL naming both versions, the GPU rows SKIP.
if ! command -v nvidia-smi >/dev/null 2>&1; then
  mkdir -p "$work/fakebin"
  cat >"$work/fakebin/nvidia-smi" <<'FAKE'
#!/usr/bin/env bash
case "$*" in
*name*) echo "NVIDIA H200" ;;
*compute_cap*) echo "9.0" ;;
*driver_version*) echo "535.104.05" ;;
*memory.total*) echo "143771" ;;
-L) echo "GPU 0: NVIDIA H200 (UUID: GPU-0)" ;;
*) echo "| NVIDIA-SMI 535.104.05   Driver Version: 535.104.05   CUDA Version: 12.2 |" ;;
esac
FAKE
  chmod +x "$work/fakebin/nvidia-smi"
  PATH=$work/fakebin:$PATH timeout 120 bash "$root/tests/gpu/run.sh" run "$kit" >"$work/run-old-driver.out" 2>&1
  rc=$?
  row=$(grep -m 1 '^machine ' "$work/run-old-driver.out")
  echo "== run KIT with an old driver: exit $rc: $row"
  [ $rc = 1 ] || fail "run KIT with an old driver exited $rc, want 1"
  [[ $row == *FAIL*535.104.05*12.2*older*13.* ]] || fail "the machine row does not name both versions: $row"
fi
# 5. The GPU rows' bookkeeping on a fake GPU: the kit with a check_kernels
#    whose groups pass, crash (SIGSEGV), fail and hang, a fake nvidia-smi of
#    an H200, and a 60 s budget: the crash and the hang are FAILs, the hang
#    is cut at the deadline, and what is left SKIPs naming the deadline.
if ! command -v nvidia-smi >/dev/null 2>&1; then
  mkdir -p "$work/fakegpu/bin" "$work/fakekit"
  cat >"$work/fakegpu/bin/nvidia-smi" <<'FAKE'
#!/usr/bin/env bash
case "$*" in
*name*) echo "NVIDIA H200" ;;
*compute_cap*) echo "9.0" ;;
*driver_version*) echo "580.65" ;;
-L) echo "GPU 0: NVIDIA H200 (UUID: GPU-0)" ;;
*) echo "| NVIDIA-SMI 580.65   Driver Version: 580.65   CUDA Version: 13.0 |" ;;
esac
FAKE
  cat >"$k/bin/check_kernels" <<'FAKE'
#!/usr/bin/env bash
case $1 in
--list) printf '%s\n' alpha beta gamma delta ;;
--probe) echo "check_kernels: NVIDIA H200 (sm_90), CPU reference kernels/cpu/" ;;
alpha) echo "PASS  a.x  fp32  err 1e-06  tol 1e-05" ;;
beta) echo "PASS  b.x  fp32  err 1e-06  tol 1e-05"; kill -SEGV $$ ;;
gamma) printf 'PASS  g.x  fp32  err 1e-06  tol 1e-05\nFAIL  g.y  bf16  err 1e-01  tol 1e-02\n'; exit 1 ;;
delta) [ "${FAKE_HANG:-1}" = 0 ] || sleep 1000; echo "PASS  d.x  fp32  err 1e-06  tol 1e-05" ;;
esac
FAKE
  cat >"$work/fakegpu/bin/compute-sanitizer" <<'FAKE'
#!/usr/bin/env bash
while [ "${1#-}" != "$1" ]; do shift; [ "$1" = memcheck ] || [ "$1" = 99 ] && shift; done
"$@"
rc=$?
echo "========= ERROR SUMMARY: 0 errors"
exit $rc
FAKE
  chmod +x "$work/fakegpu/bin/nvidia-smi" "$work/fakegpu/bin/compute-sanitizer" "$k/bin/check_kernels"
  tar -C "$k" -cf - . | xz -0 -T2 >"$work/fakekit/kit.tar.xz"
  cp "$kit/manifest.txt" "$work/fakekit/"
  t=$(date +%s)
  PATH=$work/fakegpu/bin:$PATH HEXIC_GPU_BUDGET_S=60 timeout 120 \
    bash "$root/tests/gpu/run.sh" run "$work/fakekit" >"$work/run-fake-gpu.out" 2>&1
  rc=$?
  took=$(($(date +%s) - t))
  echo "== run KIT on a fake GPU, 60 s budget: exit $rc in $took s"
  sed -n '/^== summary/,$p' "$work/run-fake-gpu.out" | grep -E '^(machine|kernels|memcheck|1.3B)'
  [ $rc = 1 ] || fail "the fake GPU run exited $rc, want 1"
  [ $took -le 75 ] || fail "the fake GPU run took $took s with a 60 s budget"
  want=('^kernels: alpha  *PASS' '^kernels: beta  *FAIL  *killed by SIGSEGV' \
    '^kernels: gamma  *FAIL  *1 of 2 failed' '^kernels: delta  *FAIL  *timed out' \
    'SKIP  *not run: the 60 s deadline left')
  for w in "${want[@]}"; do
    grep -Eq "$w" "$work/run-fake-gpu.out" || fail "no row matching '$w' in $work/run-fake-gpu.out"
  done
  # Again without the hang and the whole budget: every row after the
  # kernels runs (the sets stop at once: the CUDA runtime finds no GPU) and
  # says why on the row.
  t=$(date +%s)
  PATH=$work/fakegpu/bin:$PATH FAKE_HANG=0 CUDA_HOME=$work/fakegpu timeout 300 \
    bash "$root/tests/gpu/run.sh" run "$work/fakekit" >"$work/run-fake-gpu2.out" 2>&1
  rc=$?
  echo "== run KIT on a fake GPU, no hang: exit $rc in $(($(date +%s) - t)) s"
  sed -n '/^== summary/,$p' "$work/run-fake-gpu2.out" | sed -n '/^memcheck/,/^1.3B/p'
  [ $rc = 1 ] || fail "the second fake GPU run exited $rc, want 1"
  want=('^memcheck: alpha  *PASS  *ERROR SUMMARY: 0 errors' '^memcheck: delta  *PASS' \
    '^tiny model, 1 GPU, fp32 vs CPU.*FAIL  *did not train: .*no CUDA device' \
    '^HexiSeq plan.*FAIL  *did not train' '^1.3B throughput.*FAIL  *did not run' \
    '^tiny, 1 GPU: NCCL vs staged.*(FAIL  *the one-GPU fp32 \(NCCL\) run did not train|SKIP  *no NCCL)')
  for w in "${want[@]}"; do
    grep -Eq "$w" "$work/run-fake-gpu2.out" || fail "no row matching '$w' in $work/run-fake-gpu2.out"
  done
fi
echo "== check_kit: $(($(date +%s) - t0)) s"
[ $fails = 0 ] && echo "check_kit: the kit is self-contained"
exit $((fails > 0))
