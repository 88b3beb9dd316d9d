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
)

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

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all packages present"
  install_python_modules
  exit 0
fi

echo "setup: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO=sudo; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
install_python_modules
