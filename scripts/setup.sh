#!/usr/bin/env bash
# Installs whatever Debian packages hexic needs and are missing. Idempotent:
# a machine that has everything runs no apt-get at all.
set -euo pipefail

packages=(
  build-essential cmake pkg-config
  flex bison                       # front end
  libmetis-dev                     # graph partitioning (scheduler)
  libopenmpi-dev openmpi-bin       # CPU transport and launcher
  libopenblas-dev                  # CPU GEMM (cblas_sgemm)
  clang libclang-dev               # libFuzzer and checks of generated code
  libclang-rt-dev                  # sanitizer/fuzzer runtimes for clang
  clang-format                     # generated code is clang-format'ed
  python3                          # bench and test helpers
  python3-pip                      # PyPI's safetensors and numpy for tests/ckpt (below)
  procps                           # pgrep: the fault tests find a rank's process
  strace                           # tests/ckpt counts a tool's file reads and fsyncs
  librsvg2-bin                     # rsvg-convert: tests/codegen renders plan.svg
)

SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO=sudo; fi

# NCCL, the transport between GPUs of --target=cuda (rtlib/cuda/transport_nccl.c),
# only where the CUDA toolkit is and NCCL is not. NVIDIA's and Debian's apt
# repositories may be out of reach; PyPI's nvidia-nccl-cuNN wheel (NN: the
# toolkit's major version) ships nccl.h and libnccl.so.2, which go into the
# toolkit's include/ and lib/, where CMake and the generated Makefiles look.
install_nccl() {
  local cuda=${CUDA_HOME:-/usr/local/cuda} d major tmp header lib
  [ -x "$cuda/bin/nvcc" ] || return 0
  for d in "$cuda/include" /usr/include /usr/local/include ${NCCL_HOME:+"$NCCL_HOME/include"}; do
    if [ -e "$d/nccl.h" ]; then
      echo "setup: NCCL present ($d/nccl.h)"
      return 0
    fi
  done
  major=$("$cuda/bin/nvcc" --version | sed -n 's/.*release \([0-9][0-9]*\)\..*/\1/p')
  tmp=$(mktemp -d)
  echo "setup: installing NCCL into $cuda from PyPI (nvidia-nccl-cu$major)"
  python3 -m pip install --quiet --no-deps --target "$tmp" "nvidia-nccl-cu$major"
  header=$(find "$tmp" -name nccl.h | head -n 1)
  lib=$(find "$tmp" -name 'libnccl.so.2' | head -n 1)
  if [ -z "$header" ] || [ -z "$lib" ]; then
    echo "setup: nvidia-nccl-cu$major holds no nccl.h and libnccl.so.2" >&2
    exit 1
  fi
  $SUDO mkdir -p "$cuda/lib"
  $SUDO cp "$(dirname "$header")"/nccl*.h "$cuda/include/"
  $SUDO cp "$lib" "$cuda/lib/"
  $SUDO ln -sf libnccl.so.2 "$cuda/lib/libnccl.so"
  rm -rf "$tmp"
}

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done

# tests/ckpt reads hexic-ckpt's exports with Hugging Face's own safetensors
# reader (and numpy): from PyPI when python3 lacks them, after the packages.
install_python_modules() {
  if python3 -c 'import safetensors, numpy' 2>/dev/null; then
    echo "setup: python safetensors and numpy present"
    return 0
  fi
  echo "setup: installing safetensors and numpy from PyPI"
  python3 -m pip install --quiet safetensors numpy 2>/dev/null ||
    python3 -m pip install --quiet --break-system-packages safetensors numpy
}

# Optional: hexic-tokenize's tokenizers (and pyarrow for Parquet input);
# tests/tokenize skips without tokenizers, so a failed install stops nothing.
install_optional_python_modules() {
  if python3 -c 'import tokenizers, pyarrow' 2>/dev/null; then
    echo "setup: python tokenizers and pyarrow present"
    return 0
  fi
  echo "setup: installing tokenizers and pyarrow from PyPI (optional)"
  python3 -m pip install --quiet tokenizers pyarrow 2>/dev/null ||
    python3 -m pip install --quiet --break-system-packages tokenizers pyarrow 2>/dev/null ||
    echo "setup: tokenizers/pyarrow not installed: hexic-tokenize and tests/tokenize unavailable"
}

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all packages present"
else
  echo "setup: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
# both use pip, which the packages bring
install_nccl
install_python_modules
install_optional_python_modules
