#!/usr/bin/env bash
# The whole test suite: installs what is missing, builds hexic with ASan+UBSan
# and -Werror, runs every test with ctest, then fuzzes the parser for a
# bounded time. This is the README's test command; .ci/run calls it.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
jobs=$(nproc 2>/dev/null || echo 2)

bash scripts/setup.sh

# Open MPI refuses root without these; tests start more ranks than cores.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1
# MPI libraries keep allocations until exit; leaks are checked on hexic's own
# code by the fuzzer and the front-end tests, which run without MPI.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

echo "== build (ASan + UBSan, -Wall -Wextra -Werror)"
cmake -S . -B build-test -DCMAKE_BUILD_TYPE=Debug -DHEXIC_SANITIZE=ON >/dev/null
cmake --build build-test -j"$jobs"

echo "== ctest"
(cd build-test && ctest --output-on-failure -j"$jobs" --timeout 900) | tee build-test/ctest.log

if [ -f tests/fuzz/fuzz_parser.c ]; then
  echo "== fuzz the parser (libFuzzer, bounded)"
  CC=clang cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=Debug -DHEXIC_FUZZ=ON -DHEXIC_TESTS=OFF >/dev/null
  cmake --build build-fuzz -j"$jobs" --target fuzz_parser
  mkdir -p build-fuzz/corpus
  ./build-fuzz/fuzz_parser -max_total_time="${HEXIC_FUZZ_SECONDS:-60}" -max_len=65536 \
    -timeout=10 -rss_limit_mb=4096 build-fuzz/corpus tests/fuzz/corpus
fi
# One plain closing line: ctest's count plus the fuzzing run, when it ran.
# A test that exits 77 (a GPU test on a machine without one) is skipped, not
# passed: ctest prints it as "***Skipped", and it is counted apart.
ran=$(sed -n 's/.*tests passed, \([0-9]*\) tests failed out of \([0-9]*\)$/\2/p' build-test/ctest.log)
skipped=$(grep -c '\*\*\*Skipped' build-test/ctest.log || true)
passed=$((ran - skipped))
[ -f tests/fuzz/fuzz_parser.c ] && passed=$((passed + 1))
echo "== all tests passed"
echo "tests: $passed passed, 0 failed, $skipped skipped"
