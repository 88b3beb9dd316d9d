#!/usr/bin/env bash
# The GPU's figures for the 1.3B Llama (bf16, one GPU): each CUDA kernel's
# TFLOP/s and achieved GB/s at the model's shapes, the attention's forward
# and backward TFLOP/s (head dims 64 and 128, T 2048 and 8192, causal), and,
# given a measured run, tokens/s, MFU and the simulator's predicted step
# beside the measured one. Figures, never assertions. tests/gpu/run.sh's
# throughput row calls it with its kit and the 1.3B set's run:
#
#   bash bench/gpu_throughput.sh [--kit DIR | --bench BIN] [--plan plan.json
#        --steps STEPS] [--peak T --cluster-peak T] [--quick] [--limit S]
#
#   --kit DIR     an unpacked kit (tests/gpu/run.sh prepare): DIR/bin/gpu_bench
#   --bench BIN   the kernels' bench program (target gpu_bench); default the
#                 kit's, else build-gpu/tests/gpu_bench, else build/tests/gpu_bench
#   --plan, --steps  the 1.3B set's plan.json and its steps file (one line a
#                 step, the third field its milliseconds; the first 2 left out)
#   --peak, --cluster-peak  this GPU's dense bf16 TFLOP/s (HEXIC_GPU_PEAK_TFLOPS)
#                 and the cluster file's the plan used: the MFU is against
#                 --peak when both are given, else against the cluster's
#   --quick       fewer repetitions, no T = 8192 (what run.sh's share allows)
#   --limit S     the bench program's time limit (default 300 s)
#   --cudnn-dir DIR  the folder of libcudnn.so.9 for cuDNN's attention rows
#                 (gpu_bench_cudnn beside the bench program); default the
#                 first of $CUDNN_HOME/lib{64,}, python3's nvidia.cudnn,
#                 torch/lib, ldconfig's, $CUDA_HOME/lib{64,}; none found: the
#                 rows say so, the rest runs
#   --find-cudnn  print that folder (empty when none) and exit
#   -h, --help    print this text
# Exit status: 0 figures printed; 2 no GPU (it says it needs one); 1 else.
# The last line, "throughput: ...", is the summary run.sh puts on its row.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
kit= bench= plan= steps= peak=${HEXIC_GPU_PEAK_TFLOPS:-} cluster_peak= quick= limit=300
cudnn_dir= find_cudnn=
while [ $# -gt 0 ]; do
  case $1 in
  --kit) kit=$2; shift 2 ;;
  --bench) bench=$2; shift 2 ;;
  --plan) plan=$2; shift 2 ;;
  --steps) steps=$2; shift 2 ;;
  --peak) peak=$2; shift 2 ;;
  --cluster-peak) cluster_peak=$2; shift 2 ;;
  --quick) quick=--quick; shift ;;
  --limit) limit=$2; shift 2 ;;
  --cudnn-dir) cudnn_dir=$2; shift 2 ;;
  --find-cudnn) find_cudnn=1; shift ;;
  -h | --help) sed -n '2,/^# The last line/s/^# \{0,1\}//p' "$0"; exit 0 ;;
  *) echo "gpu_throughput.sh: unknown argument '$1' (--help lists them)" >&2; exit 1 ;;
  esac
done
py=${HEXIC_PYTHON:-$(command -v python3 || echo /opt/torch/.venv/bin/python3)}

# The folder of a cuDNN 9 (libcudnn.so.9 with its engine libraries beside
# it): the kit carries none (cuDNN's libraries are far over its size), so
# the machine's, or the one PyTorch's wheels ship.
cudnn_search() {
  local d py cuda=${CUDA_HOME:-/usr/local/cuda} cands=()
  [ -z "${CUDNN_HOME:-}" ] || cands+=("$CUDNN_HOME/lib64" "$CUDNN_HOME/lib")
  for py in ${HEXIC_PYTHON:-} python3 /opt/torch/.venv/bin/python3; do
    d=$("$py" -c 'import nvidia.cudnn; print(list(nvidia.cudnn.__path__)[0])' 2>/dev/null) &&
      cands+=("$d/lib")
    d=$("$py" -c 'import importlib.util, os; print(os.path.dirname(importlib.util.find_spec("torch").origin))' 2>/dev/null) &&
      cands+=("$d/lib")
  done
  d=$(ldconfig -p 2>/dev/null | awk '$1 == "libcudnn.so.9" { print $NF; exit }')
  [ -z "$d" ] || cands+=("$(dirname "$d")")
  cands+=("$cuda/lib64" "$cuda/lib")
  for d in "${cands[@]}"; do
    if [ -e "$d/libcudnn.so.9" ]; then echo "$d"; return; fi
  done
}
if [ -n "$find_cudnn" ]; then cudnn_search; exit 0; fi

needs_gpu() {
  echo "gpu_throughput.sh: needs a GPU ($1); nothing measured"
  exit 2
}

if [ -z "$bench" ]; then
  for b in ${kit:+"$kit/bin/gpu_bench"} "$root/build-gpu/tests/gpu_bench" "$root/build/tests/gpu_bench"; do
    [ -x "$b" ] && { bench=$b; break; }
  done
fi
if [ -z "$bench" ]; then
  # No program to probe with: nvidia-smi decides.
  if ! nvidia-smi -L 2>/dev/null | grep -q '^GPU'; then
    needs_gpu "nvidia-smi finds none"
  fi
  echo "gpu_throughput.sh: no gpu_bench: prepare a kit (bash tests/gpu/run.sh prepare KIT) and pass --kit, or build the gpu_bench target" >&2
  exit 1
fi
[ -x "$bench" ] || { echo "gpu_throughput.sh: $bench is not an executable" >&2; exit 1; }

out=$(timeout -k 5 "$limit" "$bench" $quick 2>&1)
rc=$?
[ $rc != 77 ] || needs_gpu "$(head -1 <<<"$out")"
if [ $rc != 0 ]; then
  echo "$out"
  echo "gpu_throughput.sh: $bench exited $rc$([ $rc = 124 ] && echo " (past its ${limit} s)")" >&2
  echo "throughput: the kernels' bench failed (exit $rc)"
  exit 1
fi

# cuDNN's attention rows: gpu_bench_cudnn beside the bench program, with a
# cuDNN found here; without either a line says why, and nothing else changes.
cudnn_bench=$(dirname "$bench")/gpu_bench_cudnn
if [ ! -x "$cudnn_bench" ]; then
  out+=$'\n'"attention cudnn: skipped (no gpu_bench_cudnn beside $bench: hexic was built without cuDNN)"
else
  [ -n "$cudnn_dir" ] || cudnn_dir=$(cudnn_search)
  if [ -z "$cudnn_dir" ]; then
    out+=$'\n'"attention cudnn: skipped (no libcudnn.so.9 found: \$CUDNN_HOME, python3's nvidia.cudnn or torch, ldconfig, \$CUDA_HOME)"
  else
    cout=$(LD_LIBRARY_PATH=$cudnn_dir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} timeout -k 5 "$limit" \
      "$cudnn_bench" --cudnn-only $quick 2>&1)
    crc=$?
    if [ $crc = 0 ]; then
      out+=$'\n'"$(grep -E '^(attention cudnn |gpu_bench: cuDNN)' <<<"$cout")"
    else
      out+=$'\n'"attention cudnn: failed (exit $crc, cuDNN from $cudnn_dir): $(tail -1 <<<"$cout" | cut -c1-200)"
    fi
  fi
fi

# The kernels, then attention, as tables.
"$py" - "$out" "${plan:-}" "${steps:-}" "${peak:-}" "${cluster_peak:-}" <<'EOF'
import json, sys
text, plan_path, steps_path, peak, cluster_peak = sys.argv[1:6]
lines = text.splitlines()
print(lines[0])
def fields(l):
    f = l.split()
    return f[0], f[1], dict(zip(f[2::2], f[3::2]))
print("%-30s %9s %8s %8s" % ("kernel (1.3B shapes)", "ms", "TFLOP/s", "GB/s"))
for l in lines:
    if l.startswith("kernel "):
        _, name, v = fields(l)
        tf = float(v["tflops"])
        print("%-30s %9s %8s %8s" % (name, v["ms"], "%.1f" % tf if tf > 0 else "-", v["gbs"]))
print("%-12s %4s %5s %5s  %9s %8s  %9s %8s" % ("attention", "hd", "T", "nseq",
      "fwd ms", "TFLOP/s", "bwd ms", "TFLOP/s"))
att = []
for l in lines:
    if l.startswith("attention cudnn:") or l.startswith("gpu_bench: cuDNN"):
        print(l)  # why cuDNN's rows are missing, or its version
    elif l.startswith("attention "):
        _, impl, v = fields(l)
        att.append((impl, v))
        print("%-12s %4s %5s %5s  %9s %8s  %9s %8s" % (impl, v["hd"], v["T"], v["nseq"],
              v["fwd_ms"], v["fwd_tflops"], v["bwd_ms"], v["bwd_tflops"]))
summary = []
for impl, v in att:
    if v["hd"] == "128" and v["T"] == "2048":
        summary.append("attention %s hd 128 T 2048: fwd %s, bwd %s TFLOP/s"
                       % (impl, v["fwd_tflops"], v["bwd_tflops"]))
if plan_path and steps_path:
    plan = json.load(open(plan_path))
    ms = [float(s.split()[2]) for s in open(steps_path) if len(s.split()) > 2][2:]
    if not ms:
        print("1.3B: no steps past the first 2 in %s" % steps_path)
        summary.append("no 1.3B steps")
    else:
        sim = plan["simulated"]
        tokens = plan["model"]["global_batch"] * plan["model"]["seq_len"]
        step = sum(ms) / len(ms) / 1000
        tps = tokens / step
        # The simulator's MFU is against the cluster file's peak: the model's
        # FLOPs a token are its mfu x that peak / its tokens/s, so the measured
        # MFU is its mfu x measured / simulated tokens/s, rescaled to --peak.
        mfu = sim["mfu"] * tps / sim["tokens_per_s"]
        against = "the cluster file's peak"
        if peak and cluster_peak:
            mfu *= float(cluster_peak) / float(peak)
            against = "%s TFLOP/s" % peak
        print("1.3B: %.0f tokens/s, MFU %.1f%% of %s; %.1f ms/step measured (mean of %d "
              "steps); simulated %.1f ms/step (%.0f tokens/s, MFU %.1f%%): measured / "
              "simulated step = %.2f"
              % (tps, 100 * mfu, against, 1000 * step, len(ms), 1000 * sim["iteration_s"],
                 sim["tokens_per_s"], 100 * sim["mfu"], step / sim["iteration_s"]))
        summary.append("%.0f tokens/s, MFU %.1f%%, %.0f ms/step (simulated %.0f)"
                       % (tps, 100 * mfu, 1000 * step, 1000 * sim["iteration_s"]))
print("throughput: " + "; ".join(summary))
EOF
