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
  procps                           # pgrep: the fault tests find a rank's process
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all packages present"
  exit 0
fi

echo "setup: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO=sudo; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
