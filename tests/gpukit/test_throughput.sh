#!/usr/bin/env bash
# bench/gpu_throughput.sh on a machine without a GPU: it must say it needs
# one and exit 2, both when it probes with the kernels' bench program ($1,
# CUDA builds: it finds no device and exits 77) and when it has none to
# probe with (nvidia-smi decides). Skipped (77) where a GPU is visible:
# there the script measures, and tests/gpu/run.sh runs it. Then its tables
# from stand-in bench programs: cuDNN's attention rows beside hexic's.
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
script=$root/bench/gpu_throughput.sh
if nvidia-smi -L 2>/dev/null | grep -q '^GPU'; then
  echo "a GPU is visible: gpu_throughput.sh would measure (tests/gpu/run.sh runs it)"
  exit 77
fi
fail=0
expect_no_gpu() {
  local what=$1 out rc
  shift
  out=$(bash "$script" "$@" 2>&1)
  rc=$?
  echo "$what: exit $rc: $out"
  if [ $rc != 2 ]; then
    echo "FAIL: $what: exit $rc, expected 2"
    fail=1
  fi
  if ! grep -q 'needs a GPU' <<<"$out"; then
    echo "FAIL: $what: no 'needs a GPU' in its output"
    fail=1
  fi
}
if [ $# -ge 1 ]; then
  expect_no_gpu "with gpu_bench" --bench "$1" --quick
fi
# An empty kit: nvidia-smi decides (or a gpu_bench of build-gpu/ or build/).
empty=$(mktemp -d /tmp/gpukit-throughput.XXXXXX)
trap 'rm -rf "$empty"' EXIT
expect_no_gpu "with an empty kit" --kit "$empty"

# cuDNN's rows (gpu_bench_cudnn beside the bench program) with stand-in
# programs: its rows join the attention table and the summary, with the
# cuDNN folder given first on LD_LIBRARY_PATH; without the program, or when
# it fails, a line says so and hexic's figures still come (exit 0).
mkdir -p "$empty/bin" "$empty/dnn"
cat >"$empty/bin/gpu_bench" <<'EOS'
#!/usr/bin/env bash
echo "gpu_bench: Stand-in GPU (sm_90), bf16 in, fp32 accumulation"
echo "kernel qkv ms 1.000 tflops 100.0 gbs 0"
echo "attention tc hd 128 T 2048 nseq 8 heads 16 fwd_ms 1.000 fwd_tflops 300.0 bwd_ms 2.000 bwd_tflops 200.0"
EOS
cat >"$empty/bin/gpu_bench_cudnn" <<EOS
#!/usr/bin/env bash
[ "\$1" = --cudnn-only ] || { echo "called without --cudnn-only: \$*"; exit 1; }
case \$LD_LIBRARY_PATH in "$empty/dnn"*) ;; *) echo "LD_LIBRARY_PATH=\$LD_LIBRARY_PATH"; exit 1 ;; esac
[ -z "\${DNN_FAIL:-}" ] || { echo "ERROR stand-in failure"; exit 3; }
echo "gpu_bench: Stand-in GPU (sm_90), bf16 in, fp32 accumulation"
echo "gpu_bench: cuDNN 91900"
echo "attention cudnn hd 128 T 2048 nseq 8 heads 16 fwd_ms 0.900 fwd_tflops 333.3 bwd_ms 1.800 bwd_tflops 222.2"
EOS
chmod +x "$empty/bin/gpu_bench" "$empty/bin/gpu_bench_cudnn"
expect_table() {
  local what=$1 want=$2 out rc
  shift 2
  out=$(bash "$script" --bench "$empty/bin/gpu_bench" --cudnn-dir "$empty/dnn" --quick 2>&1)
  rc=$?
  echo "$what: exit $rc"
  echo "$out" | sed 's/^/  /'
  if [ $rc != 0 ] || ! grep -q -- "$want" <<<"$out"; then
    echo "FAIL: $what: exit $rc, expected 0 and '$want'"
    fail=1
  fi
}
expect_table "cuDNN's rows" "attention cudnn hd 128 T 2048: fwd 333.3, bwd 222.2 TFLOP/s"
expect_table "cuDNN's rows in the table" "^cudnn         128  2048     8      0.900    333.3"
DNN_FAIL=1 expect_table "gpu_bench_cudnn failing" "attention cudnn: failed (exit 3"
DNN_FAIL=1 expect_table "hexic's rows still" "attention tc hd 128 T 2048: fwd 300.0"
rm "$empty/bin/gpu_bench_cudnn"
expect_table "no gpu_bench_cudnn" "attention cudnn: skipped (no gpu_bench_cudnn"
exit $fail
