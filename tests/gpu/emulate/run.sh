#!/usr/bin/env bash
# Runs tests/gpu/check_kernels.cu -- every CUDA kernel against the CPU
# kernels -- on the host emulator of cuda_emu.h, on a machine without a GPU:
# the kernels' own source, rewritten only where a launch or dynamic shared
# memory needs host syntax (transform.py), compiled by g++. It checks the
# kernels' indexing, masking, reductions, fragment use and the cuBLASLt
# mapping against the CPU reference; the tolerances are those of the GPU run.
# It cannot tell speed, and it cannot stand in for tests/gpu/run.sh.
#
#   bash tests/gpu/emulate/run.sh [GROUP...]     (groups: check_kernels --list)
#
# Builds into build-emu/ (HEXIC_EMU_BUILD overrides); exit status that of
# check_kernels (0 all passed, 1 some failed, 4 an emulated deadlock).
set -euo pipefail
cd "$(dirname "$0")/../../.."
root=$PWD
out=${HEXIC_EMU_BUILD:-$root/build-emu}
cuda=${CUDA_HOME:-/usr/local/cuda}
emu=$root/tests/gpu/emulate
mkdir -p "$out/src"

# The CPU kernels (the reference), built by the project's CMake without CUDA.
cmake -S . -B "$out/cpu" -DCMAKE_BUILD_TYPE=Release -DHEXIC_CUDA=OFF \
  -DHEXIC_TESTS=OFF >/dev/null
cmake --build "$out/cpu" --target hexic_kernels -j2 >/dev/null

compile() { # SOURCE OBJECT
  g++ -std=c++17 -O2 -g -include "$emu/cuda_emu.h" -I"$root" -I"$cuda/include" \
    -Wall -Wno-attributes -Wno-unused-function -Wno-unknown-pragmas -c "$1" -o "$2"
}
objs=()
for cu in kernels/cuda/*.cu tests/gpu/check_kernels.cu; do
  name=$(basename "$cu" .cu)
  python3 "$emu/transform.py" "$cu" "$out/src/$name.cpp"
  objs+=("$out/src/$name.o")
done
for name in "${objs[@]}"; do echo "${name%.o}.cpp $name"; done |
  xargs -P 2 -n 2 bash -c "$(declare -f compile); emu=$emu root=$root cuda=$cuda compile \"\$0\" \"\$1\""
compile "$emu/emu_runtime.cpp" "$out/src/emu_runtime.o"
g++ -o "$out/check_kernels_emu" "${objs[@]}" "$out/src/emu_runtime.o" \
  "$out/cpu/libhexic_kernels.a" -lopenblas -lm
OPENBLAS_NUM_THREADS=1 exec "$out/check_kernels_emu" "$@"
