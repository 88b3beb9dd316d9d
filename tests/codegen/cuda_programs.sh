#!/usr/bin/env bash
# --target=cuda on a machine without a GPU (issue 12, items 4 and 6): what
# hexic writes must build with nvcc and mpicc, warnings as errors, and
# launch.sh must say what it finds. Run by ctest (label cuda) when CMake
# found nvcc; the GPU runs are tests/gpu/run.sh's.
#   cuda_programs.sh WORKDIR SRCDIR HEXIC PARSE_CHECK
# 1. A plan of TP 2 + PP 2 + uneven batches (tests/codegen/plans/
#    tp2_pp2_uneven.json) over H100s and RTX 4090s (sm_90 and sm_89): the
#    same bytes twice, formatted, parsed; every rank compiles and links; each
#    kernel source is compiled once per architecture and each library
#    archived once; each rank links its own GPU's library; the ranks carry
#    the plan's GPU type, memory and precision.
# 2. The issue's "Done when": tiny.hx on one-h200.hx, --target=cuda, make;
#    and a HexiSeq plan (PP x TP x CP x HP, tests/exec's hand-written one)
#    on 8 H200s: every rank compiles and links against the runtime that
#    carries rtlib/seq and its CUDA kernel table (issue 14 item 5).
# 3. launch.sh's GPU check with a stand-in nvidia-smi, and a rank started
#    on this GPU-less machine stopping with a message.
#    --cuda-attention=cudnn: the Makefile, plan.json and ranks say cudnn;
#    the runtime compiles cuDNN's attention in and the ranks link libcudnn,
#    where the default set has neither; fp32 and the CPU target refused.
# 4. Architectures read off GPU names; shapes and GPUs the kernels refuse.
set -uo pipefail
work=$1 src=$2 hexic=$3 parse_check=$4
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
export HEXIC_TIMEOUT_S=${HEXIC_TIMEOUT_S:-20}
rm -rf "$work"
mkdir -p "$work"
cd "$work" || exit 1
fail() { echo "FAIL: $*" >&2; exit 1; }
tiny=$src/examples/models/tiny.hx
plan=$src/tests/codegen/plans/tp2_pp2_uneven.json

# ---- 1. two architectures ---------------------------------------------
gen_mix() {
  "$hexic" "$tiny" "$src/examples/clusters/mixed-h100-4090.hx" --plan="$plan" --target=cuda \
    -o "$1" >"$1.plan.txt" || fail "hexic --target=cuda -o $1"
}
gen_mix mix
gen_mix again
diff -r mix again || fail "two compilations differ"
for f in mix/*.c; do
  clang-format --style=file "$f" | cmp -s - "$f" || fail "clang-format changes $f"
done
"$parse_check" -I "$src/rtlib" mix/*.c || fail "libclang diagnostics"
bash -n mix/launch.sh || fail "launch.sh syntax"
grep -qx "#SBATCH --gpus-per-task=1" mix/slurm.sbatch || fail "slurm.sbatch asks for no GPU per task"
# The same plan for --target=cpu knows nothing of GPUs.
"$hexic" "$tiny" "$src/examples/clusters/mixed-h100-4090.hx" --plan="$plan" -o cpu >/dev/null ||
  fail "hexic --target=cpu"
grep -q "nvcc\|cuda" cpu/Makefile && fail "the CPU Makefile mentions CUDA"
grep -q "gpus-per-task\|nvidia-smi" cpu/slurm.sbatch cpu/launch.sh && fail "CPU scripts ask for GPUs"
grep -q "device_type\|GPU:" cpu/rank_0000.c && fail "a CPU rank carries GPU fields"

# The GPU fields: type, the memory plan.json gives the device, precision.
python3 - mix <<'EOF' || fail "the ranks' GPU fields"
import json, re, sys
d = sys.argv[1]
plan = json.load(open(d + "/plan.json"))
peak = plan["simulated"]["peak_memory_bytes"]
for dev in plan["devices"]:
    r = dev["rank"]
    text = open("%s/rank_%04d.c" % (d, r)).read()
    want = {"device_type": '"%s"' % dev["gpu"], "device_memory_bytes": str(int(peak[r]))}
    for field, value in want.items():
        got = re.search(r"\.%s = (.*),\n" % field, text)
        assert got and got.group(1) == value, (r, field, got and got.group(1), value)
    assert ".precision = HX_RT_FP32," in text, r
    arch = "sm_90" if dev["gpu"] == "H100" else "sm_89"
    assert "GPU: %s, %s (known from its name); kernels: libhexic_cuda_%s.a" % (
        dev["gpu"], arch, arch.replace("_", "")) in text, r
EOF

start=$(date +%s)
make -C mix -j2 >mix.make.log 2>&1 || { cat mix.make.log; fail "make in mix"; }
echo "two architectures: make -j2 took $(($(date +%s) - start)) s"
ncu=$(find "$src/kernels/cuda" -name '*.cu' | wc -l)
for arch in 89 90; do
  n=$(grep -c -- "-gencode arch=compute_$arch,code=sm_$arch" mix.make.log)
  [ "$n" -eq "$ncu" ] || fail "sm_$arch: $n nvcc runs for $ncu kernel sources"
  n=$(grep -c "^ar rcs libhexic_cuda_sm$arch.a" mix.make.log)
  [ "$n" -eq 1 ] || fail "libhexic_cuda_sm$arch.a archived $n times"
done
[ "$(grep -c -- '-gencode arch=compute_[0-9]*,code=sm_' mix.make.log)" -eq $((2 * ncu)) ] ||
  fail "nvcc ran for an architecture the plan does not have"
grep -q -- '--Werror=all-warnings -Xcompiler=-Wall,-Wextra,-Werror' mix.make.log ||
  fail "nvcc ran without warnings as errors"
for r in 0 1 2 3; do
  lib=sm90
  [ $r -ge 2 ] && lib=sm89
  [ -x "mix/rank_000$r" ] || fail "rank_000$r was not linked"
  grep -q "rank_000$r.c libhexic.a libhexic_cuda_$lib.a .*-lcublasLt -lcudart" mix.make.log ||
    fail "rank_000$r is not linked against libhexic_cuda_$lib.a and cuBLASLt"
done
left=$(make --no-print-directory -C mix -n 2>&1)
grep -q "nvcc\|mpicc\|ar rcs" <<<"$left" && { echo "$left"; fail "a second make would build again"; }
# NCCL between the GPUs (issue 13): the default transport when this hexic was
# built with NCCL; the runtime then carries transport_nccl.c and every rank
# of this 4-rank set links libnccl. TRANSPORT=mpi builds without NCCL.
if grep -qx "TRANSPORT ?= nccl" mix/Makefile; then
  grep -q -- "-DHEXIC_HAVE_NCCL -DHEXIC_TRANSPORT=.*nccl.* -c .*rtlib/cuda/transport_nccl.c" \
    mix.make.log || fail "transport_nccl.c was not compiled against NCCL"
  # (grep -q would end the pipe early: pipefail would see nm's SIGPIPE)
  nm mix/libhexic.a >mix.nm && grep -q " T rt_cuda_nccl_open$" mix.nm ||
    fail "libhexic.a has no NCCL transport"
  for r in 0 1 2 3; do
    grep -q "rank_000$r.c libhexic.a .* -lnccl" mix.make.log || fail "rank_000$r is not linked with -lnccl"
    readelf -d "mix/rank_000$r" >"mix.dyn$r" && grep -q "NEEDED.*libnccl" "mix.dyn$r" ||
      fail "rank_000$r does not load libnccl"
  done
  mpi=$(make --no-print-directory -C mix -n TRANSPORT=mpi 2>&1)
  grep -q "transport_select.c" <<<"$mpi" || fail "TRANSPORT=mpi does not rebuild the runtime"
  grep -q -- "-lnccl\|HEXIC_HAVE_NCCL" <<<"$mpi" && fail "TRANSPORT=mpi still builds with NCCL"
  grep -q 'HEXIC_TRANSPORT=.*mpi' <<<"$mpi" || fail "TRANSPORT=mpi does not make mpi the default"
  echo "NCCL: transport_nccl.c in libhexic.a, 4 ranks linked with libnccl; TRANSPORT=mpi leaves it out"
else
  grep -qx "TRANSPORT ?= mpi" mix/Makefile || fail "the Makefile names no transport"
  echo "NCCL: not found when hexic was built; the programs use the staged MPI transport"
fi

# ---- 2. the issue's command on one H200 ---------------------------------
# The runtime and the sm_90 library come from mix (same rules and flags,
# timestamps kept), so make here only compiles and links the rank.
"$hexic" "$tiny" "$src/examples/clusters/one-h200.hx" --target=cuda -o out >out.plan.txt ||
  fail "hexic tiny.hx one-h200.hx --target=cuda"
cp -rp mix/obj mix/libhexic.a mix/libhexic_cuda_sm90.a out/
make -C out >out.make.log 2>&1 || { cat out.make.log; fail "make -C out"; }
grep -q nvcc out.make.log && fail "make -C out compiled the kernels again"
[ -x out/rank_0000 ] || fail "out/rank_0000 was not linked"
grep -q "GPU: H200, sm_90 (its cuda_arch)" out/rank_0000.c || fail "rank_0000.c: no GPU line"
echo "one H200: hexic --target=cuda -o out && make -C out"
# HexiSeq on the GPU: seqtiny's ring x all-to-all plan, each rank carrying
# its sequence table, linked against libhexic.a with rtlib/seq and the
# device's kernel table for it (rtlib/cuda/seq_cuda.c).
cat >h200x8.hx <<'EOF'
gpu "H200" { tflops = 989; memory = 141 GB; mem_bandwidth = 4.8 TB/s; cuda_arch = 90 }
node "gpu0" { gpu = "H200"; gpus = 8; bandwidth = 900 GB/s }
EOF
"$hexic" "$src/tests/exec/models/seqtiny.hx" h200x8.hx --plan="$src/tests/exec/plans/seq_pp_tp_cp_hp.json" \
  --target=cuda -o seq >seq.plan.txt 2>&1 || { cat seq.plan.txt; fail "hexic HexiSeq --target=cuda"; }
cp -rp mix/obj mix/libhexic.a mix/libhexic_cuda_sm90.a seq/
make -C seq -j2 >seq.make.log 2>&1 || { cat seq.make.log; fail "make -C seq"; }
grep -q nvcc seq.make.log && fail "make -C seq compiled the kernels again"
for r in 0 1 2 3 4 5 6 7; do
  [ -x "seq/rank_000$r" ] || fail "seq/rank_000$r was not linked"
  grep -q "^    \.seq = &seq_table,$" "seq/rank_000$r.c" || fail "seq/rank_000$r.c has no sequence table"
done
nm seq/libhexic.a >seq.nm && grep -q " T rt_cuda_seq_kernels$" seq.nm && grep -q " T rt_seq_open$" seq.nm ||
  fail "libhexic.a lacks rtlib/seq or its CUDA kernel table"
echo "HexiSeq on 8 H200s (PP x TP x CP x HP): 8 ranks linked with rtlib/seq's CUDA table"

# cuDNN's fused attention (issue 26 item 2): --cuda-attention=cudnn makes
# ATTENTION=cudnn the Makefile's default, says so in plan.json and the
# ranks, compiles attention_cudnn.c's cuDNN part and links libcudnn; the
# default build above has none of it. fp32 plans and a target other than
# cuda are refused.
sed 's/precision = fp32/precision = bf16/' "$tiny" >tiny-bf16.hx
"$hexic" tiny-bf16.hx "$src/examples/clusters/one-h200.hx" --target=cuda --cuda-attention=cudnn \
  -o dnn >dnn.plan.txt 2>&1 || { cat dnn.plan.txt; fail "hexic --cuda-attention=cudnn"; }
grep -qx "ATTENTION ?= cudnn" dnn/Makefile || fail "the cudnn Makefile does not default to ATTENTION=cudnn"
grep -qx "ATTENTION ?= hexic" out/Makefile || fail "the default Makefile does not say ATTENTION ?= hexic"
grep -q '"cuda_attention": "cudnn"' dnn/plan.json || fail "plan.json does not say cudnn"
grep -q cuda_attention out/plan.json && fail "the default plan.json names an attention"
# The plan prices cuDNN's attention (passes/cost/cost_memory.c): tiny in
# bf16 on one H200 runs 2 micro-batches of 16 sequences of 64 tokens, 4
# heads of 16; rows = 16 x 4 x 64 = 4096. hexic's attention scratch, the
# kernels' context's largest part (4096 fp32 row sums, dq's fp32
# accumulator at hd 128, flags: 16384 + 2097152 + 768 bytes) gives way to
# RMSNorm's (512 rows of 64 fp32: 131072), and cuDNN's dQ accumulator
# (4096 x 16 fp32) and D (4096 fp32) come on top: 278528 - 1983232.
"$hexic" tiny-bf16.hx "$src/examples/clusters/one-h200.hx" --target=cuda -o dnn_default \
  >dnn_default.txt 2>&1 || { cat dnn_default.txt; fail "hexic tiny-bf16 (default attention)"; }
python3 - dnn/plan.json dnn_default/plan.json <<'PY' || fail "cuDNN's attention is not priced as it allocates"
import json, sys
cudnn, hexic = (json.load(open(f)) for f in sys.argv[1:3])
p = cudnn["pipelines"][0]
assert (p["micro_batches"], p["micro_batch_size"]) == (2, 16), p
got = cudnn["memory_by_kind"][0]["workspace"] - hexic["memory_by_kind"][0]["workspace"]
if got != 278528 - 1983232:
    sys.exit(f"workspace cudnn - hexic: {got} bytes, want {278528 - 1983232}")
PY
grep -q "attention: cuDNN's fused attention" dnn/rank_0000.c || fail "rank_0000.c does not say cuDNN"
grep -q -- "^CPPFLAGS += -DHEXIC_ATTENTION_CUDNN" dnn/Makefile && grep -q -- "^LDLIBS.*-lcudnn$" dnn/Makefile ||
  fail "the Makefile's ATTENTION=cudnn does not define HEXIC_ATTENTION_CUDNN and link -lcudnn"
if [ -e /usr/local/cuda/include/cudnn.h ] && [ -e /usr/local/cuda/lib64/libcudnn.so ]; then
  cp -rp mix/obj mix/libhexic.a mix/libhexic_cuda_sm90.a dnn/
  make -C dnn >dnn.make.log 2>&1 || { cat dnn.make.log; fail "make -C dnn"; }
  grep -q nvcc dnn.make.log && fail "make -C dnn compiled the kernels again"
  grep -q -- "-DHEXIC_ATTENTION_CUDNN .* -c .*rtlib/cuda/attention_cudnn.c" dnn.make.log ||
    fail "attention_cudnn.c was not compiled with -DHEXIC_ATTENTION_CUDNN"
  nm dnn/libhexic.a >dnn.nm && grep -q " T rt_cudnn_attention_forward$" dnn.nm ||
    fail "libhexic.a has no cuDNN attention"
  readelf -d dnn/rank_0000 >dnn.dyn && grep -q "NEEDED.*libcudnn" dnn.dyn || fail "rank_0000 does not load libcudnn"
  nm out/libhexic.a >out.nm && grep -q "rt_cudnn_attention_forward" out.nm &&
    fail "the default libhexic.a carries cuDNN code"
  readelf -d out/rank_0000 >out.dyn && grep -q "NEEDED.*libcudnn" out.dyn && fail "the default rank loads libcudnn"
  echo "cuDNN attention: ATTENTION=cudnn compiled attention_cudnn.c against cuDNN and linked libcudnn"
else
  echo "cuDNN attention: no cuDNN in /usr/local/cuda here; the Makefile and plan checked, not built"
fi
"$hexic" "$tiny" "$src/examples/clusters/one-h200.hx" --target=cuda --cuda-attention=cudnn \
  -o dnn32 >dnn32.txt 2>&1 && fail "an fp32 plan with --cuda-attention=cudnn was accepted"
grep -q "cuDNN's fused attention runs bf16 only" dnn32.txt || { cat dnn32.txt; fail "fp32 + cudnn: no reason"; }
"$hexic" tiny-bf16.hx "$src/examples/clusters/one-h200.hx" --cuda-attention=cudnn -o dnncpu >dnncpu.txt 2>&1
[ $? = 2 ] && grep -q "it needs --target=cuda" dnncpu.txt || fail "--cuda-attention=cudnn on the CPU target was not a usage error"
bad=$(make --no-print-directory -C dnn -n ATTENTION=flash 2>&1)
grep -q "ATTENTION=flash: use hexic or cudnn" <<<"$bad" || fail "make ATTENTION=flash: $bad"

# ---- 3. launch.sh -------------------------------------------------------
# A stand-in nvidia-smi: $FAKE_GPUS names, or exit 9 as without a driver.
mkdir -p fakebin
cat >fakebin/nvidia-smi <<'EOF'
#!/usr/bin/env bash
[ "$FAKE_GPUS" = fail ] && { echo "NVIDIA-SMI has failed"; exit 9; }
for _ in $(seq "$FAKE_GPUS"); do echo "NVIDIA H200"; done
EOF
chmod +x fakebin/nvidia-smi
# launch NAME DIR [launch.sh args]: the ranks stop on the missing data file
# (on a GPU machine too); the launch.sh warnings are what is checked.
launch() {
  local name=$1 dir=$2
  shift 2
  PATH="$PWD/fakebin:$PATH" "$dir/launch.sh" "$@" --data /nonexistent/tokens.bin --steps 1 \
    >"$name.log" 2>&1 && fail "$name: the job succeeded without its data"
}
FAKE_GPUS=1 launch one mix
grep -q "launch.sh: warning: 4 ranks share this machine's 1 GPU(s)" one.log ||
  { cat one.log; fail "no warning for 4 ranks on 1 GPU"; }
FAKE_GPUS=4 launch four mix
grep -q "launch.sh: warning" four.log && { cat four.log; fail "a warning with a GPU per rank"; }
FAKE_GPUS=fail launch broken mix
grep -q "launch.sh: warning: no usable GPU here (nvidia-smi): the ranks will stop" broken.log ||
  { cat broken.log; fail "no warning when nvidia-smi fails"; }
FAKE_GPUS=4 CUDA_VISIBLE_DEVICES=1 launch hidden mix
grep -q "launch.sh: warning: 4 ranks share this machine's 1 GPU(s)" hidden.log ||
  { cat hidden.log; fail "CUDA_VISIBLE_DEVICES not counted"; }
# With a hostfile, a machine needs GPUs for the plan's ranks on one node (2).
echo "localhost slots=4" >hosts
FAKE_GPUS=2 launch hosts mix --hostfile hosts
grep -q "launch.sh: warning" hosts.log && { cat hosts.log; fail "a warning for 2 ranks per machine on 2 GPUs"; }
if ! command -v nvidia-smi >/dev/null 2>&1; then
  out/launch.sh --steps 1 >nogpu.log 2>&1 && fail "a cuda program ran on a machine without a GPU"
  grep -q "launch.sh: warning: nvidia-smi not found" nogpu.log || { cat nogpu.log; fail "no nvidia-smi warning"; }
  grep -q "launch.sh: rank 0 (rank_0000) failed: " nogpu.log || { cat nogpu.log; fail "the rank's failure is not named"; }
  echo "no GPU here: $(grep 'launch.sh: rank 0' nogpu.log)"
fi

# ---- 4. architectures and refusals ------------------------------------------
# Seven one-GPU machines named as vendors and clouds write them; a plan of
# seven one-rank pipelines (5+5+5+5+4+4+4 sequences) puts a rank on each.
cat >names.hx <<'EOF'
gpu "A100-SXM4-80GB" { tflops = 312; memory = 80 GiB }
gpu "NVIDIA RTX A6000" { tflops = 155; memory = 48 GiB }
gpu "GeForce RTX 3090 Ti" { tflops = 80; memory = 24 GiB }
gpu "L40S" { tflops = 362; memory = 48 GiB }
gpu "H100 SXM5" { tflops = 989; memory = 80 GiB }
gpu "GH200" { tflops = 989; memory = 96 GiB }
gpu "B200" { tflops = 2250; memory = 180 GiB }
node "a" { gpu = "A100-SXM4-80GB"; gpus = 1 }
node "b" { gpu = "NVIDIA RTX A6000"; gpus = 1 }
node "c" { gpu = "GeForce RTX 3090 Ti"; gpus = 1 }
node "d" { gpu = "L40S"; gpus = 1 }
node "e" { gpu = "H100 SXM5"; gpus = 1 }
node "f" { gpu = "GH200"; gpus = 1 }
node "g" { gpu = "B200"; gpus = 1 }
network { bandwidth = 10 GB/s }
EOF
python3 - >seven.json <<'EOF'
import json
pipes = [{"micro_batches": m, "micro_batch_size": 1, "stages": [
    {"ranks": [r], "tp": 1, "layers": [0, 4], "leader": r, "recompute": False}]}
    for r, m in enumerate([5, 5, 5, 5, 4, 4, 4])]
print(json.dumps({"strategy": "file", "description": "seven", "schedule": "1f1b", "pipelines": pipes}))
EOF
"$hexic" "$tiny" names.hx --plan=seven.json --target=cuda -o names >names.txt 2>&1 ||
  { cat names.txt; fail "hexic on names.hx"; }
for want in "RANKS_SM80 = rank_0000" "RANKS_SM86 = rank_0001 rank_0002" "RANKS_SM89 = rank_0003" \
  "RANKS_SM90 = rank_0004 rank_0005" "RANKS_SM100 = rank_0006"; do
  grep -qx "$want" names/Makefile || { grep RANKS_SM names/Makefile; fail "names: no '$want'"; }
done
# Names that are not those GPUs get no guess, and only --target=cuda asks.
sed -i 's/"B200"/"A1000"/g; s/"GH200"/"RTX 6000"/g' names.hx
"$hexic" "$tiny" names.hx --check --target=cuda >unknown.txt 2>&1
[ $? -eq 1 ] || { cat unknown.txt; fail "unknown GPU names accepted for --target=cuda"; }
[ "$(grep -c 'needs the CUDA architecture of GPU type "\(A1000\|RTX 6000\)"' unknown.txt)" -eq 2 ] ||
  { cat unknown.txt; fail "A1000 and RTX 6000 should each need cuda_arch"; }
"$hexic" "$tiny" names.hx --check >/dev/null 2>&1 || fail "--target=cpu asked for a CUDA architecture"
# A head dimension the attention kernels have no instantiation for (96/4).
sed 's/hidden = 64/hidden = 96/' "$tiny" >hd24.hx
"$hexic" hd24.hx "$src/examples/clusters/one-h200.hx" --target=cuda -o hd24 >hd24.txt 2>&1
[ $? -eq 2 ] || { cat hd24.txt; fail "head dimension 24 should be refused with exit 2"; }
grep -q "the CUDA kernels run head dimensions 16, 32, 64 and 128; the model's hidden/heads is 24" \
  hd24.txt || { cat hd24.txt; fail "wrong head-dimension message"; }
# Grid limits (issue 23, defect 7): a micro-batch past gridDim.z's 65535
# sequences is accepted (the attention kernels split it into launches of at
# most 65535 sequences: tests/gpu/check_kernels.cu's *.split cases); the
# heads, gridDim.y, stay at most 16384 / 16 = 1024 because a hidden size
# past 16384 is refused.
sed 's/global_batch = 32/global_batch = 65536; micro_batch = 65536/' "$tiny" >mb65536.hx
"$hexic" mb65536.hx "$src/examples/clusters/one-h200.hx" --target=cuda -o mb65536 >mb65536.txt 2>&1 ||
  { cat mb65536.txt; fail "a micro-batch of 65536 sequences refused for --target=cuda"; }
grep -q ".micro_batch_size = 65536," mb65536/rank_0000.c || fail "mb65536: the rank's micro-batch"
sed 's/layers = 4; hidden = 64; ffn = 176; heads = 4/layers = 1; hidden = 32768; ffn = 176; heads = 256/;
  s/global_batch = 32/global_batch = 1/' "$tiny" >wide.hx
"$hexic" wide.hx "$src/examples/clusters/one-h200.hx" --target=cuda -o wide >wide.txt 2>&1
[ $? -eq 2 ] || { cat wide.txt; fail "hidden 32768 should be refused with exit 2"; }
grep -q "the CUDA kernels take hidden sizes up to 16384; the model's is 32768" wide.txt ||
  { cat wide.txt; fail "wrong hidden-size message"; }
# bf16: the ranks say so.
sed 's/precision = fp32/precision = bf16/' "$tiny" >bf16.hx
"$hexic" bf16.hx "$src/examples/clusters/one-h200.hx" --target=cuda -o bf16 >/dev/null ||
  fail "hexic bf16.hx"
grep -q ".precision = HX_RT_BF16," bf16/rank_0000.c || fail "bf16 plan without HX_RT_BF16"
grep -q "bf16 on the GPU (fp32 master weights, gradients and AdamW moments)" bf16/rank_0000.c ||
  fail "bf16 plan without its comment"
echo "cuda programs: 2 architectures built once each, every rank linked, launch.sh warnings," \
  "7 GPU names, refusals"
