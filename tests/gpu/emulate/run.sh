#!/usr/bin/env bash
# Runs tests/gpu/check_kernels.cu -- every CUDA kernel against the CPU
# kernels -- on the host emulator of cuda_emu.h, on a machine without a GPU:
# the kernels' own source, rewritten only where a launch or dynamic shared
# memory needs host syntax (transform.py), compiled by g++ (CMake target
# check_kernels_emu). ctest's gpu.emulated runs a few cases; this runs them
# all (a few minutes: the emulator is slow) or the groups named:
#
#   bash tests/gpu/emulate/run.sh [GROUP...]     (groups: --list)
#
# HEXIC_CHECK_ONLY=NAME,... keeps only those attention/layer cases. Builds
# into build-emu/ (HEXIC_EMU_BUILD overrides). Exit status that of
# check_kernels: 0 all passed, 1 some failed, 4 an emulated deadlock or a
# warp whose lanes are in different collectives.
set -euo pipefail
cd "$(dirname "$0")/../../.."
out=${HEXIC_EMU_BUILD:-$PWD/build-emu}
cmake -S . -B "$out" -DCMAKE_BUILD_TYPE=Release -DHEXIC_CUDA=ON >/dev/null
cmake --build "$out" -j2 --target check_kernels_emu >/dev/null
OPENBLAS_NUM_THREADS=1 exec "$out/tests/check_kernels_emu" "$@"
