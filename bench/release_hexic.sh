# Sourced by the bench scripts after they set root: hexic is the script's
# first argument, else a Release build of the hexic target in build-bench
# (benchmarks time the optimised binary, never the sanitized test build);
# tmp is a scratch folder removed at exit.
hexic=${1:-}
if [ -z "$hexic" ]; then
  cmake -S "$root" -B "$root/build-bench" -DCMAKE_BUILD_TYPE=Release -DHEXIC_TESTS=OFF >/dev/null
  cmake --build "$root/build-bench" -j2 --target hexic >/dev/null
  hexic=$root/build-bench/hexic
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
