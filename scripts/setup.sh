#!/usr/bin/env bash
# Installs whatever Debian packages hexic needs and are missing. Idempotent:
# a machine that has everything runs no apt-get at all. Prints one line per
# step; apt-get's and pip's own output goes to a log ($HEXIC_SETUP_LOG, else
# build/setup.log), whose tail is printed when a step fails (exit 1).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
log=${HEXIC_SETUP_LOG:-$root/build/setup.log}
mkdir -p "$(dirname "$log")"
: > "$log"

# step MESSAGE COMMAND...: runs COMMAND with its output in the log, on one
# line "setup: MESSAGE ... done"; on failure the log's last 25 lines and exit 1.
step() {
  local message=$1 rc=0
  shift
  printf 'setup: %s ... ' "$message"
  printf '\n== %s: %s\n' "$message" "$*" >> "$log"
  "$@" >> "$log" 2>&1 || rc=$?
  if [ $rc -eq 0 ]; then
    echo done
    return 0
  fi
  echo "failed (exit $rc)"
  echo "setup: the last lines of $log:" >&2
  tail -n 25 "$log" | sed 's/^/  | /' >&2
  exit 1
}

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
  step "installing NCCL into $cuda from PyPI (nvidia-nccl-cu$major)" \
    python3 -m pip install --no-deps --target "$tmp" "nvidia-nccl-cu$major"
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

# pip refuses a Debian-managed python3 (PEP 668) unless told it may.
pip_install() {
  python3 -m pip install "$@" || python3 -m pip install --break-system-packages "$@"
}

# tests/ckpt reads hexic-ckpt's exports with Hugging Face's own safetensors
# reader (and numpy): from PyPI when python3 lacks them, after the packages.
install_python_modules() {
  if python3 -c 'import safetensors, numpy' 2>/dev/null; then
    echo "setup: python safetensors and numpy present"
    return 0
  fi
  step "installing safetensors and numpy from PyPI" pip_install safetensors numpy
}

# Optional: hexic-tokenize's tokenizers (and pyarrow for Parquet input) and
# hexic-plot-metrics' matplotlib; tests/tokenize skips without tokenizers and
# exec.eval_options draws no PNG without matplotlib, so a failed install
# stops nothing.
install_optional_python_modules() {
  if python3 -c 'import tokenizers, pyarrow, matplotlib' 2>/dev/null; then
    echo "setup: python tokenizers, pyarrow and matplotlib present"
    return 0
  fi
  printf 'setup: installing tokenizers, pyarrow and matplotlib from PyPI (optional) ... '
  printf '\n== optional: pip install tokenizers pyarrow matplotlib\n' >> "$log"
  if pip_install tokenizers pyarrow matplotlib >> "$log" 2>&1; then
    echo done
  else
    echo "not installed: hexic-tokenize, hexic-plot-metrics and their tests unavailable (see $log)"
  fi
}

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all packages present"
else
  echo "setup: missing ${missing[*]} (apt-get's output: $log)"
  export DEBIAN_FRONTEND=noninteractive
  step "apt-get update" $SUDO apt-get update
  step "apt-get install (${#missing[@]} packages)" \
    $SUDO apt-get install -y --no-install-recommends "${missing[@]}"
fi
# both use pip, which the packages bring
install_nccl
install_python_modules
install_optional_python_modules
