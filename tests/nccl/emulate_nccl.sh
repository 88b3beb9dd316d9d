#!/usr/bin/env bash
# The CUDA backend's NCCL transport (rtlib/cuda/transport_nccl.c) run on a
# machine without a GPU: the host CUDA emulator's build of rtlib/cuda/
# (tests/rtlib/emulate_backend.sh build) with transport_nccl.c compiled in
# (-DHEXIC_HAVE_NCCL, NCCL the default transport) over the test-only NCCL of
# tests/nccl/nccl_shim.c (MPI underneath; it reports what NCCL would
# deadlock on). The emulator shows one device per rank of the machine (the
# shim's cudaGetDeviceCount over emu_runtime.cpp's one, weakened here), so
# transport_select.c's own rule picks NCCL. Each plan's --target=cpu rank
# programs are the reference; the same sources linked with the emulator
# must print "transport: nccl" and give the same fp32 losses (relative 1e-5)
# and weights (1e-5; HexiSeq's 1e-4, as emulate_backend.sh's):
#   dp2 tp2 pp2 dp2z   tiny.hx, tests/codegen/plans/tiny_*.json (DP 2, TP 2, PP 2,
#                      DP 2 with ZeRO-1: the uneven reduce-scatter/all-gather;
#                      TP 2 and tp2pp2 sequence parallel, the default)
#   tp2pp2             tiny.hx, tests/codegen/plans/tp2_pp2_uneven.json (a
#                      TP 2 stage feeding a one-rank stage beside a one-rank
#                      pipeline, uneven batches: the TP broadcasts of a
#                      pipeline hop, the links, DP 2 groups across a pipeline)
#   zero1pp            tiny8.hx, tests/exec/plans/zero1_tp2_dp_pp.json (ZeRO-1
#                      over TP 2 beside TP 1 + TP 1, 4 steps, 4 ranks) with a
#                      checkpoint every 2 steps, and its step-2 checkpoint
#                      resumed: the resumed run's weights as the CPU's
#   seq                seqtiny.hx, tests/exec/plans/seq_dp_hp_uneven.json
#                      (a one-rank pipeline beside an all-to-all group of 3
#                      units: alltoallv and sendrecv over NCCL, DP 2)
#   seq8               seqtiny.hx, tests/exec/plans/seq_pp_tp_cp_hp.json (8
#                      ranks: TP 2 x CP x HP feeding a CP ring across a hop)
#   sp                 test_sp_collectives.c on 3 ranks: the TP reduce-scatter
#                      and all-gather of sequence parallelism over this NCCL
#                      and the staged transport (uneven and empty blocks, fp32
#                      and bf16, exact), again with MPI's counts capped at 4
#                      (HEXIC_MPI_MAX_COUNT: the staged transport's blocks one
#                      by one)
# and, not in "all" (two minutes each): tp3tp2, tests/exec/plans/tp3_tp2_uneven.json
# on tiny6.hx (8 ranks: a TP 3 stage of 64 rows, 22 + 21 + 21, with
# recompute and its leader off TP rank 0, beside TP 2 stages), sequence
# parallel over NCCL as the CPU programs; bf16, tp2pp2's plan in bf16 (the TP sums
# widened to fp32 on the device), its NCCL run against HEXIC_TRANSPORT=mpi
# of the same programs (the staged transport): equal losses and weights.
#
#   bash tests/nccl/emulate_nccl.sh [build|dp2|tp2|pp2|dp2z|tp2pp2|zero1pp|seq|seq8|sp|tp3tp2|bf16|all]...
#   (builds into build-nccl-emu/, HEXIC_NCCL_EMU_BUILD overrides;
#   HEXIC_CPU_BUILD=DIR takes the CPU side from an existing build;
#   HEXIC_NCCL_STEPS steps per run, default 3)
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
out=${HEXIC_NCCL_EMU_BUILD:-$root/build-nccl-emu}
cuda=${CUDA_HOME:-/usr/local/cuda}
steps=${HEXIC_NCCL_STEPS:-3}
parts=("$@")
[ ${#parts[@]} -gt 0 ] || parts=(all)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1 OPENBLAS_NUM_THREADS=1
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0} # hexic and weights_cmp of an ASan build
cpu=${HEXIC_CPU_BUILD:-$out/cpu}
lib=$out/nccl/libhexic_emu_nccl.a
# link DIR: the emulated programs' libraries, with the CPU kernels of the
# plan's own build in DIR (the generated Makefile's plain -O2 objects, so a
# sanitized build tree, as scripts/test.sh's, serves as HEXIC_CPU_BUILD).
link() {
  ar rcs "$1/kernels.a" "$1"/obj/kernels_*.o
  libs=("$lib" "$1/kernels.a" -lopenblas -lstdc++ -lm -lpthread)
}

# The emulator's library (emulate_backend.sh's build), then its NCCL variant:
# transport_nccl.c and transport_select.c with NCCL, the shim, and the
# emulator's one device weakened so that the shim's device per rank wins.
build() {
  HEXIC_EMU_BACKEND_BUILD=$out bash tests/rtlib/emulate_backend.sh build
  cmake --build "$cpu" -j2 --target hexic weights_cmp >/dev/null
  local n=$out/nccl flags=(-std=gnu11 -O1 -g -Wall -Wextra -Werror -I"$root" -I"$root/rtlib"
    -I"$cuda/include" -I/usr/include/x86_64-linux-gnu/openblas-pthread)
  mkdir -p "$n"
  mpicc "${flags[@]}" -DHEXIC_HAVE_NCCL '-DHEXIC_TRANSPORT="nccl"' -c rtlib/cuda/transport_nccl.c \
    -o "$n/rt_transport_nccl.o"
  mpicc "${flags[@]}" -DHEXIC_HAVE_NCCL '-DHEXIC_TRANSPORT="nccl"' -c rtlib/cuda/transport_select.c \
    -o "$n/rt_transport_select.o"
  mpicc "${flags[@]}" -c tests/nccl/nccl_shim.c -o "$n/nccl_shim.o"
  objcopy --weaken-symbol=cudaGetDeviceCount "$out/obj/emu_runtime.o" "$n/emu_runtime.o"
  cp "$out/libhexic_emu.a" "$lib.new"
  ar d "$lib.new" rt_transport_nccl.o rt_transport_select.o emu_runtime.o
  ar rcs "$lib.new" "$n/rt_transport_nccl.o" "$n/rt_transport_select.o" "$n/nccl_shim.o" \
    "$n/emu_runtime.o"
  mv "$lib.new" "$lib"
}

# The plans of tests/gpu/run.sh's multi-GPU checks, on two CPU "devices".
plans() {
  local w=$out/plans
  mkdir -p "$w"
  printf '%s\n' 'gpu "cpu" { tflops = 0.02; memory = 4 GiB; efficiency = 1 }' \
    'node "host" { gpu = "cpu"; gpus = 2; bandwidth = 100 GB/s; latency = 1 us }' >"$w/two.hx"
}

losses() { sed -n 's/^step [0-9]*\/[0-9]* | loss \([0-9.]*\) .*/\1/p' "$1"; }

# case NAME MODEL CLUSTER PLAN: the plan's CPU programs and their emulated
# CUDA + NCCL builds, run and compared.
case_() {
  local name=$1 model=$2 cluster=$3 plan=$4 d=$out/$1 t0=$SECONDS
  rm -rf "$d"
  "$cpu/hexic" "$model" "$cluster" --plan="$plan" --target=cpu -o "$d" >"$out/$name.hexic.txt" 2>&1 ||
    { cat "$out/$name.hexic.txt"; echo "FAIL: $name: hexic"; exit 1; }
  make -s -C "$d" -j2 >/dev/null
  mkdir -p "$d/emu"
  link "$d"
  local app=() emu=() src r
  for src in "$d"/rank_*.c; do
    r=$(basename "$src" .c)
    mpicc -std=gnu11 -I"$root" -I"$root/rtlib" "$src" "${libs[@]}" -o "$d/emu/$r"
    app+=(${app[@]:+:} -np 1 "$d/$r" --steps "$steps" --dump-weights "$d/cpu.w")
    emu+=(${emu[@]:+:} -np 1 "$d/emu/$r" --steps "$steps" ${emu_args[@]+"${emu_args[@]}"}
      --dump-weights "$d/emu.w")
  done
  [ "$name" != dp2z ] || grep -q '_shards\[\] = {' "$d"/rank_*.c ||
    { echo "FAIL: dp2z: the rank programs carry no optimizer shards"; exit 1; }
  # TP stages train sequence parallel (the train block's default): the CUDA
  # layer's reduce-scatter and all-gather over NCCL
  case $name in tp2 | tp2pp2 | tp3tp2)
    grep -q '\.sequence_parallel = true' "$d"/rank_0000.c ||
      { echo "FAIL: $name: the TP stage does not run sequence parallel"; exit 1; } ;;
  esac
  timeout 600 mpirun --oversubscribe "${app[@]}" >"$d/cpu.log" 2>&1 || { cat "$d/cpu.log"; echo "FAIL: $name: the CPU run"; exit 1; }
  timeout 600 mpirun --oversubscribe "${emu[@]}" >"$d/emu.log" 2>&1 || { cat "$d/emu.log"; echo "FAIL: $name: the emulated NCCL run"; exit 1; }
  grep -q "transport: nccl" "$d/emu.log" ||
    { grep "transport:" "$d/emu.log"; echo "FAIL: $name: not the NCCL transport"; exit 1; }
  paste <(losses "$d/cpu.log") <(losses "$d/emu.log") | awk -v name="$name" -v steps="$steps" '
    { n++; d = $1 - $2; if (d < 0) d = -d; if (d > 1e-5 * $1) bad++; if (d / $1 > m) m = d / $1
      printf "%s step %d: cpu %s, emulated cuda + nccl %s\n", name, n, $1, $2 }
    END { printf "%s: max rel. loss diff %.2e (tol 1e-5)\n", name, m; exit !(n == steps && bad == 0) }' ||
    { echo "FAIL: $name: losses differ"; exit 1; }
  # HexiSeq's weights within emulate_backend.sh's 1e-4: its CUDA attention by
  # positions differs from the CPU's by ~6e-6 already on the staged transport
  local wtol=1e-5
  case $name in seq*) wtol=1e-4 ;; esac
  "$cpu/tests/weights_cmp" "$d/cpu.w" "$d/emu.w" $wtol || { echo "FAIL: $name: weights differ"; exit 1; }
  echo "emulate_nccl: $name over the NCCL transport agrees with the CPU backend ($((SECONDS - t0)) s)"
}

# zero1pp: tests/exec's ZeRO-1 plan (TP 2 beside a two-stage pipeline,
# uneven optimizer shards) with a checkpoint every 2 steps, then the step-2
# checkpoint resumed to the end: the resumed weights as the CPU's too.
zero1pp() {
  local d=$out/zero1pp src r app=() steps=4 # whatever HEXIC_NCCL_STEPS says
  emu_args=(--checkpoint-dir "$d/ck" --checkpoint-every 2)
  case_ zero1pp tests/exec/models/tiny8.hx tests/exec/clusters/four.hx \
    tests/exec/plans/zero1_tp2_dp_pp.json
  emu_args=()
  [ -f "$d/ck/step_00000002/MANIFEST" ] || { echo "FAIL: zero1pp: no step-2 checkpoint"; exit 1; }
  mkdir -p "$d/ck2" && cp -r "$d/ck/step_00000002" "$d/ck2/"
  for src in "$d"/rank_*.c; do
    r=$(basename "$src" .c)
    app+=(${app[@]:+:} -np 1 "$d/emu/$r" --steps "$steps" --checkpoint-dir "$d/ck2" --resume
      --dump-weights "$d/resumed.w")
  done
  timeout 600 mpirun --oversubscribe "${app[@]}" >"$d/resumed.log" 2>&1 ||
    { cat "$d/resumed.log"; echo "FAIL: zero1pp: the resumed run"; exit 1; }
  grep -q "^step 3/4 " "$d/resumed.log" && ! grep -q "^step 1/4 " "$d/resumed.log" ||
    { cat "$d/resumed.log"; echo "FAIL: zero1pp: the run did not resume at step 3"; exit 1; }
  "$cpu/tests/weights_cmp" "$d/cpu.w" "$d/resumed.w" 1e-5 ||
    { echo "FAIL: zero1pp: the resumed run's weights differ"; exit 1; }
  echo "emulate_nccl: zero1pp resumed from its step-2 checkpoint over NCCL ends as the CPU run"
}

# bf16: one set of emulated programs, through NCCL and then the staged
# transport; the two must agree exactly (both sum in fp32 and round once).
bf16() {
  local d=$out/bf16 t0=$SECONDS src r nccl=() staged=()
  rm -rf "$d" && mkdir -p "$d/emu"
  sed 's/precision = fp32/precision = bf16/' "$tiny" >"$d/tiny-bf16.hx"
  "$cpu/hexic" "$d/tiny-bf16.hx" tests/exec/clusters/four.hx \
    --plan=tests/codegen/plans/tp2_pp2_uneven.json --target=cpu -o "$d/p" >/dev/null
  make -s -C "$d/p" -j2 >/dev/null
  link "$d/p"
  for src in "$d"/p/rank_*.c; do
    r=$(basename "$src" .c)
    mpicc -std=gnu11 -I"$root" -I"$root/rtlib" "$src" "${libs[@]}" -o "$d/emu/$r"
    nccl+=(${nccl[@]:+:} -np 1 "$d/emu/$r" --steps "$steps" --dump-weights "$d/nccl.w")
    staged+=(${staged[@]:+:} -np 1 "$d/emu/$r" --steps "$steps" --dump-weights "$d/mpi.w")
  done
  timeout 600 mpirun --oversubscribe "${nccl[@]}" >"$d/nccl.log" 2>&1 || { cat "$d/nccl.log"; echo "FAIL: bf16: the NCCL run"; exit 1; }
  HEXIC_TRANSPORT=mpi timeout 600 mpirun --oversubscribe "${staged[@]}" >"$d/mpi.log" 2>&1 ||
    { cat "$d/mpi.log"; echo "FAIL: bf16: the staged run"; exit 1; }
  grep -q "transport: nccl" "$d/nccl.log" && grep -q "transport: mpi-staged" "$d/mpi.log" ||
    { echo "FAIL: bf16: not NCCL, then staged"; exit 1; }
  paste <(losses "$d/mpi.log") <(losses "$d/nccl.log") |
    awk '{ n++; print "bf16 step " n ": staged " $1 ", nccl " $2; if ($1 != $2) bad++ } END { exit !(n > 0 && !bad) }' ||
    { echo "FAIL: bf16: NCCL's losses differ from the staged transport's"; exit 1; }
  "$cpu/tests/weights_cmp" "$d/mpi.w" "$d/nccl.w" 0 || { echo "FAIL: bf16: weights differ"; exit 1; }
  echo "emulate_nccl: bf16 TP 2 + PP 2 over NCCL equals the staged transport ($((SECONDS - t0)) s)"
}

# sp: the two collectives by themselves, on the emulator's library and the
# CPU kernels emulate_backend.sh built for it.
sp() {
  local d=$out/sp max
  mkdir -p "$d"
  mpicc -std=gnu11 -O1 -g -Wall -Wextra -Werror -I"$root" -I"$root/rtlib" -I"$cuda/include" \
    tests/nccl/test_sp_collectives.c "$lib" "$out/libhexic_kernels_cpu.a" -lopenblas -lstdc++ -lm \
    -lpthread -o "$d/test_sp_collectives"
  for max in 2147483647 4; do
    HEXIC_MPI_MAX_COUNT=$max timeout 120 mpirun --oversubscribe -np 3 "$d/test_sp_collectives" ||
      { echo "FAIL: sp: the sequence-parallel collectives (HEXIC_MPI_MAX_COUNT=$max)"; exit 1; }
  done
  echo "emulate_nccl: sp's reduce-scatter and all-gather agree over NCCL and the staged transport"
}

tiny=examples/models/tiny.hx
emu_args=()
[ "${parts[*]}" != all ] || parts=(build dp2 tp2 pp2 dp2z tp2pp2 zero1pp seq seq8 sp)
for part in "${parts[@]}"; do
  case $part in
  build) build ;;
  dp2 | tp2 | pp2 | dp2z) plans && case_ "$part" "$tiny" "$out/plans/two.hx" "tests/codegen/plans/tiny_$part.json" ;;
  tp2pp2) case_ tp2pp2 "$tiny" tests/exec/clusters/four.hx tests/codegen/plans/tp2_pp2_uneven.json ;;
  seq) case_ seq tests/exec/models/seqtiny.hx tests/exec/clusters/four.hx tests/exec/plans/seq_dp_hp_uneven.json ;;
  zero1pp) zero1pp ;;
  seq8) case_ seq8 tests/exec/models/seqtiny.hx examples/clusters/cpu8.hx tests/exec/plans/seq_pp_tp_cp_hp.json ;;
  sp) sp ;;
  tp3tp2) case_ tp3tp2 tests/exec/models/tiny6.hx examples/clusters/cpu8.hx tests/exec/plans/tp3_tp2_uneven.json ;;
  bf16) bf16 ;;
  *) echo "emulate_nccl.sh: unknown part '$part'" >&2; exit 2 ;;
  esac
done
