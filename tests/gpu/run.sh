#!/usr/bin/env bash
# The GPU checks, in two phases (tests/gpu/README.md):
#
#   bash tests/gpu/run.sh prepare KIT   # here: CUDA toolkit + project packages, no GPU
#   bash tests/gpu/run.sh run KIT       # the GPU machine: KIT, the driver, the toolkit, NCCL
#   bash tests/gpu/run.sh               # a machine with everything: both, KIT=build-gpu-kit
#
# prepare (tests/gpu/prepare.sh) builds hexic, check_kernels and
# gpu_bench for sm_80/89/90, generates and builds every program set the
# checks run, computes their CPU references at the same --steps, and packs
# them with Open MPI's and OpenBLAS's runtime from Debian's packages into
# KIT/kit.tar.xz. run unpacks KIT into /tmp, uses nothing of the machine's
# but the driver, the CUDA toolkit (libcublasLt, libcudart, compute-sanitizer)
# and an NCCL it finds ($NCCL_HOME, the system's, python3's nvidia.nccl), and
# writes only under KIT/run/ and /tmp.
#
# run ends within HEXIC_GPU_BUDGET_S (540 s) on one H200. Each check has a
# share of it (printed at the start, in this order): kit, kernels, cudnn,
# sanitizer, fp32, bf16, multirank, hexiseq, nccl, multigpu,
# throughput; a check's time limit is what is left less the later checks'
# shares, so time saved passes on and no check eats a later one's share.
# Every row says PASS, FAIL or SKIP with its reason on the row. A kernel
# group that dies of a signal or its time limit is a FAIL. The throughput
# row's status is about the run (PASS: it trained and gave figures); its
# MFU against the GPU's dense bf16 peak is a figure that reads "below
# target (40%)" when under 40%, never a FAIL on its own.
#
# Exit 0 nothing failed, 1 a check failed (a driver older than the CUDA
# runtime is a FAIL), 2 no GPU and nothing failed. The table logic is in
# tests/gpu/table.sh (tests/gpukit/ drives it without a GPU).
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
root=$PWD
jobs=${HEXIC_GPU_JOBS:-$(nproc 2>/dev/null || echo 4)}
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
# --steps of the GPU runs and of their CPU references (prepare and run agree).
steps_fp32=20 steps_bf16=50 steps_seq=10 steps_13b=8
# shellcheck source=tests/gpu/table.sh
. "$root/tests/gpu/table.sh"
# shellcheck source=tests/gpu/prepare.sh
. "$root/tests/gpu/prepare.sh"

# ---- run: the kit on a GPU machine ----------------------------------------------
# kit_env K: the environment that makes K's Open MPI, OpenBLAS and programs
# the ones that run (K/lib first; Open MPI and PMIx relocated into K/sys).
kit_env() {
  local k=$1
  export PATH=$k/sys/usr/bin:$PATH
  export LD_LIBRARY_PATH=$k/lib${nccl_dir:+:$nccl_dir}:$CUDA_HOME/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  export OPAL_PREFIX=$k/sys/usr OPAL_SYSCONFDIR=$k/etc OPAL_PKGDATADIR=$k/sys/usr/share/openmpi
  export OPAL_LIBDIR=$k/sys/usr/lib/x86_64-linux-gnu/openmpi/lib
  export OMPI_MCA_mca_base_component_path=$OPAL_LIBDIR/openmpi3
  # PMIx (Debian's prefix /usr/lib/x86_64-linux-gnu/pmix2) finds its plugins in
  # PMIX_PKGLIBDIR (PMIX_PREFIX alone does not move it: tests/gpukit checks).
  export PMIX_PREFIX=$k/sys/usr/lib/x86_64-linux-gnu/pmix2
  export PMIX_LIBDIR=$PMIX_PREFIX/lib PMIX_PKGLIBDIR=$PMIX_PREFIX/lib/pmix
  export HWLOC_PLUGINS_PATH=$k/etc
  export OMPI_MCA_btl=self,vader,tcp OMPI_MCA_pml=ob1 OMPI_MCA_btl_vader_single_copy_mechanism=none
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
}

# find_nccl: the folder of libnccl.so.2 in $nccl_dir ($NCCL_HOME, the
# system's, python3's nvidia.nccl package), else empty.
find_nccl() {
  nccl_dir=
  local d py cands=()
  [ -z "${NCCL_HOME:-}" ] || cands+=("$NCCL_HOME/lib" "$NCCL_HOME/lib64" "$NCCL_HOME")
  d=$(ldconfig -p 2>/dev/null | awk '$1 == "libnccl.so.2" { print $NF; exit }')
  [ -z "$d" ] || cands+=("$(dirname "$d")")
  cands+=("$CUDA_HOME/lib64" "$CUDA_HOME/lib")
  for py in ${HEXIC_PYTHON:-} python3 /opt/torch/.venv/bin/python3; do
    # __path__: nvidia.* are namespace packages in newer wheels (__file__ None)
    d=$("$py" -c 'import nvidia.nccl; print(list(nvidia.nccl.__path__)[0])' 2>/dev/null) &&
      cands+=("$d/lib")
  done
  for d in "${cands[@]}"; do
    if [ -e "$d/libnccl.so.2" ]; then nccl_dir=$d; return; fi
  done
}

# run_set NAME STEPS LIMIT ARGS...: K/sets/NAME/launch.sh; "STEP LOSS MS"
# lines into $out/NAME.steps; true when every step printed. run_rc: its status.
run_set() {
  local name=$1 steps=$2 limit=$3
  shift 3
  timeout -k 10 "$limit" "$k/sets/$name/launch.sh" --steps "$steps" "$@" >"$out/$name.out" 2>&1
  run_rc=$?
  cat "$out/$name.out" >>"$log"
  steps_of "$out/$name.out" >"$out/$name.steps"
  [ $run_rc -eq 0 ] && [ "$(wc -l <"$out/$name.steps")" -eq "$steps" ]
}
# why NAME: what stopped a set, in one line.
why() {
  local dead
  dead=$(died "$run_rc" "$run_limit")
  if [ -n "$dead" ]; then echo "$dead"; return; fi
  grep -m 1 -o 'launch.sh: rank [0-9]* ([a-z_0-9]*) failed.*' "$out/$1.out" | cut -c1-160 ||
    tail -n 1 "$out/$1.out" | cut -c1-120
}
# can_run ROW SHARE NAME...: records a SKIP/FAIL and is false when the row
# cannot run: no GPU, the driver, a set not built at prepare, no NCCL for a
# set built with it, the deadline. Sets run_limit.
can_run() {
  local row=$1 check=$2 name
  shift 2
  if [ "$gpu_state" != ok ]; then record "$row" SKIP "$gpu_skip"; return 1; fi
  for name in "$@"; do
    if [ -f "$k/sets/$name.failed" ]; then
      record "$row" FAIL "not built at prepare: $(cat "$k/sets/$name.failed")"
      return 1
    fi
    if [ -z "$nccl_dir" ] && grep -qx "$name" "$k/nccl-sets"; then
      record "$row" SKIP "no NCCL found (\$NCCL_HOME, ldconfig, $CUDA_HOME, python3 nvidia.nccl): $name is built with it"
      return 1
    fi
  done
  run_limit=$(allot "$check")
  if [ "$run_limit" = 0 ]; then record "$row" SKIP "$(past_deadline "$check")"; return 1; fi
}
# maxrel A B N: the largest |b - a| / a over steps 1..N of A and B (files
# of "STEP LOSS MS"; "missing" when either lacks one).
maxrel() {
  awk -v n="$3" 'NR == FNR { a[$1] = $2; next } ($1 in a) && $1 <= n { c++
      r = ($2 - a[$1]) / a[$1]; if (r < 0) r = -r; if (r > m) m = r }
    END { if (c < n) print "missing"; else printf "%.2e\n", m }' "$1" "$2"
}
within() { [ "$1" != missing ] && awk -v x="$1" -v t="$2" 'BEGIN { exit !(x <= t) }'; }
# mean FILE FIRST LAST: the mean loss over those steps.
mean() { awk -v a="$2" -v b="$3" '$1 >= a && $1 <= b { s += $2; n++ } END { if (n) printf "%.4f", s / n }' "$1"; }
# ref NAME STEPS: the CPU reference's steps file; false with a FAIL reason.
ref() {
  if [ -f "$k/ref/$1-$2.failed" ]; then echo "the CPU reference ($1, $2 steps) at prepare: $(cat "$k/ref/$1-$2.failed")"; return 1; fi
  if [ ! -s "$k/ref/$1-$2.steps" ]; then echo "the kit has no CPU reference $1 at $2 steps"; return 1; fi
  echo "$k/ref/$1-$2.steps"
}
fact() { sed -n "s/^$1=\([^ ]*\).*/\1/p; s/.* $1=\([^ ]*\).*/\1/p" "$k/facts" | head -1; }

# machine: the GPU, the driver and the runtime; gpu_state ok | none | driver.
machine() {
  local name cc drv smi_cuda probe rc ename drv_api rt_api runtime
  name=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)
  cc=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1)
  drv=$(nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>/dev/null | head -1)
  smi_cuda=$(nvidia-smi 2>/dev/null | sed -n 's/.*CUDA Version: *\([0-9.]*\).*/\1/p' | head -1)
  ngpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
  gpu_name=${name:-none}
  probe=$(timeout 60 "$k/bin/check_kernels" --probe 2>&1)
  rc=$?
  echo "$probe" >>"$log"
  runtime=$(fact cuda_runtime)
  # check_kernels, when it finds no device: "(cudaErrorX: text; driver
  # CUDA D, runtime R)" (cudaDriverGetVersion / cudaRuntimeGetVersion).
  ename=$(grep -o 'cudaError[A-Za-z]*' <<<"$probe" | head -1)
  drv_api=$(sed -n 's/.*driver CUDA \([0-9.]*\).*/\1/p' <<<"$probe" | head -1)
  rt_api=$(sed -n 's/.*runtime CUDA \([0-9.]*\).*/\1/p' <<<"$probe" | head -1)
  local facts="driver ${drv:-?} (CUDA ${smi_cuda:-${drv_api:-?}}), kit runtime CUDA ${rt_api:-$runtime}, NCCL ${nccl_dir:-not found}"
  echo "GPU: $gpu_name  compute capability: ${cc:-?}  $facts"
  if [ $rc = 0 ]; then
    gpu_state=ok
    record "machine" PASS "$(grep -m 1 -o 'check_kernels: .*(sm_[0-9]*)' <<<"$probe" | sed 's/check_kernels: //'); $facts"
    local set_arch=$(fact set_arch) this=${cc/./}
    # The sets carry SASS for their cluster's cuda_arch and its PTX, which
    # only a GPU of that architecture or newer can run.
    if [[ $this =~ ^[0-9]+$ ]] && [[ $set_arch =~ ^[0-9]+$ ]] && [ "$this" -lt "$set_arch" ]; then
      record "kit's programs for this GPU" FAIL "the sets were built for sm_$set_arch ($(fact gpu_type)), this GPU is sm_$this: prepare on a machine with it"
    fi
  elif { [ "$ename" = cudaErrorInsufficientDriver ] && { [ -n "$drv" ] || [ "${drv_api:-0.0}" != 0.0 ]; }; } ||
    ver_lt "$smi_cuda" "${rt_api:-$runtime}"; then
    gpu_state=driver
    gpu_skip="not run: the driver is older than the CUDA runtime (see the machine row)"
    record "machine" FAIL "driver ${drv:-?} supports CUDA ${smi_cuda:-$drv_api}, older than the CUDA ${rt_api:-$runtime} runtime the kit's programs need ($ename)"
  elif [ $rc = 77 ] || [ $rc = 124 ] && [ -z "$name" ]; then
    gpu_state=none
    gpu_skip="no GPU: ${name:+the CUDA runtime sees none}${name:-no nvidia-smi or driver} (${ename:-exit $rc})"
    record "machine" SKIP "no GPU: nvidia-smi ${name:+sees $name}${name:-finds none}; CUDA runtime: ${ename:-$(tail -n 1 <<<"$probe" | cut -c1-80)}"
  else
    gpu_state=none
    gpu_skip="no GPU visible to the CUDA runtime (${ename:-exit $rc}; see the machine row)"
    record "machine" FAIL "nvidia-smi ${name:+sees $name}${name:-finds no GPU}, the CUDA runtime none (exit $rc, ${ename:-$(tail -n 1 <<<"$probe" | cut -c1-80)}); $facts"
  fi
}

run_kit() {
  local kitdir=$1
  if [ ! -f "$kitdir/kit.tar.xz" ]; then
    echo "run: $kitdir/kit.tar.xz not found: bash tests/gpu/run.sh prepare $kitdir first" >&2
    return 1
  fi
  kitdir=$(cd "$kitdir" && pwd)
  out=$kitdir/run
  rm -rf "$out"
  mkdir -p "$out"
  log=$out/gpu-run.log
  : >"$log"
  deadline_start "${HEXIC_GPU_BUDGET_S:-540}"
  # python3: the throughput figures, the unpacking without xz.
  py=${HEXIC_PYTHON:-$(command -v python3 || echo /opt/torch/.venv/bin/python3)}
  # Nothing outside KIT and /tmp: the programs' own temporary files too.
  export TMPDIR=/tmp
  k=$(mktemp -d /tmp/hexic-kit.XXXXXX)
  [ -n "${HEXIC_GPU_KEEP:-}" ] || trap 'rm -rf "$k"' EXIT
  if ! xz -dc "$kitdir/kit.tar.xz" 2>/dev/null | tar -C "$k" -xf - 2>/dev/null; then
    "$py" -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' \
      "$kitdir/kit.tar.xz" "$k" || { echo "run: cannot unpack $kitdir/kit.tar.xz" >&2; return 1; }
  fi
  echo "== kit $kitdir unpacked into $k in $(($(date +%s) - t_start)) s; log $log"
  grep -v '^#' "$kitdir/manifest.txt" | grep '=' | head -12
  find_nccl
  cudnn_dir=$(bash "$k/bin/gpu_throughput.sh" --find-cudnn)
  kit_env "$k"
  local groups ngroups
  groups=$("$k/bin/check_kernels" --list)
  ngroups=$(wc -w <<<"$groups")
  machine

  # The shares (seconds) of HEXIC_GPU_BUDGET_S, in the order the checks run.
  order=(kit kernels cudnn sanitizer fp32 bf16 multirank hexiseq nccl multigpu throughput)
  share=([kit]=15 [kernels]=140 [cudnn]=20 [sanitizer]=60 [fp32]=30 [bf16]=40 [multirank]=45
    [hexiseq]=60 [nccl]=25 [multigpu]=0 [throughput]=90)
  if [ "${ngpus:-0}" -ge 2 ]; then share[multigpu]=120; share[sanitizer]=0; fi
  order+=(close)
  share[close]=$((budget - 15 - 140 - 20 - 60 - 30 - 40 - 45 - 60 - 25 - 90))
  [ "${share[close]}" -ge 5 ] || share[close]=5
  echo "== budget ${budget} s: $(shares_line)"

  # [kit] its mpirun starts its 2-rank CPU program: the MPI runtime works here.
  local row="kit: its Open MPI runs 2 CPU ranks" lim which
  lim=$(allot kit)
  which=$(command -v mpirun)
  if [ -f "$k/sets/cpu2.failed" ]; then
    record "$row" FAIL "not built at prepare: $(cat "$k/sets/cpu2.failed")"
  elif [ "$which" != "$k/sys/usr/bin/mpirun" ]; then
    record "$row" FAIL "mpirun is $which, not the kit's"
  else
    run_limit=$lim
    if run_set cpu2 2 "$lim" --data "$k/data/text.bin"; then
      record "$row" PASS "loss $(mean "$out/cpu2.steps" 1 1) -> $(mean "$out/cpu2.steps" 2 2)"
    else
      record "$row" FAIL "exit $run_rc: $(why cpu2)"
    fi
  fi

  # [kernels] each group of check_kernels in its own process, within the
  # kernels' share: a group's limit is three times its fair part of what is
  # left (at least 30 s), never more than what is left less 5 s for each
  # group after it.
  local phase_end group i=0 glimit gout grc gt took=()
  if [ "$gpu_state" != ok ]; then
    record "kernels ($ngroups groups)" SKIP "$gpu_skip"
  else
    phase_end=$(($(date +%s) + $(allot kernels)))
    echo "== kernel checks ($ngroups groups; every line in $log)"
    for group in $groups; do
      i=$((i + 1))
      local phase_left=$((phase_end - $(date +%s)))
      glimit=$((3 * phase_left / (ngroups - i + 1)))
      [ "$glimit" -ge 30 ] || glimit=30
      [ "$glimit" -le $((phase_left - 5 * (ngroups - i))) ] || glimit=$((phase_left - 5 * (ngroups - i)))
      if [ "$glimit" -lt 10 ]; then
        record "kernels: $group" SKIP "not run: the kernels' ${share[kernels]} s share is spent"
        continue
      fi
      gt=$(date +%s)
      gout=$(timeout -k 5 "$glimit" "$k/bin/check_kernels" "$group" 2>&1)
      grc=$?
      echo "$gout" >>"$log"
      kernel_row "$group" "$grc" "$gout" "$glimit"
      [ $grc != 0 ] || took+=("$(($(date +%s) - gt)) $group")
    done
  fi

  # [cudnn] cuDNN's fused attention (--cuda-attention=cudnn): the cudnn
  # group of check_kernels_cudnn, against the CPU and hexic's tensor-core
  # kernel, on a cuDNN 9 found here (gpu_throughput.sh --find-cudnn: the kit
  # carries none). Without cuDNN or the program the row is a SKIP saying so.
  row="kernels: cudnn"
  if [ "$gpu_state" != ok ]; then
    record "$row" SKIP "$gpu_skip"
  elif [ ! -x "$k/bin/check_kernels_cudnn" ]; then
    record "$row" SKIP "not built at prepare (cuDNN there: $(fact cudnn_build))"
  elif [ -z "$cudnn_dir" ]; then
    record "$row" SKIP "no libcudnn.so.9 found (\$CUDNN_HOME, python3's nvidia.cudnn or torch, ldconfig, $CUDA_HOME)"
  else
    lim=$(allot cudnn)
    gout=$(LD_LIBRARY_PATH=$cudnn_dir:$LD_LIBRARY_PATH timeout -k 5 "$lim" "$k/bin/check_kernels_cudnn" cudnn 2>&1)
    grc=$?
    echo "$gout" >>"$log"
    kernel_row cudnn "$grc" "$gout" "$lim"
  fi

  # [sanitizer] compute-sanitizer --tool memcheck over the two quickest
  # groups that passed (HEXIC_GPU_SANITIZE overrides the list).
  local san=$CUDA_HOME/bin/compute-sanitizer sgroups
  command -v compute-sanitizer >/dev/null 2>&1 && [ ! -x "$san" ] && san=$(command -v compute-sanitizer)
  sgroups=${HEXIC_GPU_SANITIZE:-$(printf '%s\n' "${took[@]}" | sort -n | head -2 | awk '{print $2}' | tr '\n' ' ')}
  if [ "$gpu_state" != ok ]; then
    record "memcheck (compute-sanitizer)" SKIP "$gpu_skip"
  elif [ ! -x "$san" ]; then
    record "memcheck (compute-sanitizer)" SKIP "compute-sanitizer not found at $san"
  elif [ -z "${sgroups// /}" ]; then
    record "memcheck (compute-sanitizer)" SKIP "no kernel group passed to run under it"
  else
    local sl sout src nleft
    nleft=$(wc -w <<<"$sgroups")
    phase_end=$(($(date +%s) + $(allot sanitizer)))
    for group in $sgroups; do
      # an even part of what is left of the sanitizer's share
      sl=$(((phase_end - $(date +%s)) / nleft))
      nleft=$((nleft - 1))
      if [ "$sl" -lt 10 ]; then record "memcheck: $group" SKIP "not run: the sanitizer's ${share[sanitizer]} s share is spent"; continue; fi
      sout=$(timeout -k 5 "$sl" "$san" --tool memcheck --error-exitcode 99 "$k/bin/check_kernels" "$group" 2>&1)
      src=$?
      echo "$sout" >>"$log"
      if [ $src = 0 ]; then
        record "memcheck: $group" PASS "$(grep -m 1 -o 'ERROR SUMMARY: .*' <<<"$sout")"
      elif [ $src = 124 ] || [ $src = 137 ]; then
        record "memcheck: $group" SKIP "did not finish within ${sl} s (its share); nothing checked"
      else
        record "memcheck: $group" FAIL "exit $src: $(grep -m 1 -E 'ERROR SUMMARY|Invalid|========= [A-Z]' <<<"$sout" | cut -c1-120)"
      fi
    done
  fi

  local data=(--data "$k/data/text.bin") t d r
  # [tiny, fp32 and bf16 vs the CPU at the same --steps]
  local row32="tiny model, 1 GPU, fp32 vs CPU ($steps_fp32 steps)" g32=g32 via="NCCL build"
  [ -n "$nccl_dir" ] || { g32=g32s; via="staged build: no NCCL"; }
  t=$(date +%s)
  if ! can_run "$row32" fp32 $g32; then
    :
  elif ! r=$(ref cpu1 "$steps_fp32"); then
    record "$row32" FAIL "$r"
  else
    if ! run_set $g32 "$steps_fp32" "$run_limit" "${data[@]}"; then
      record "$row32" FAIL "did not train: $(why $g32)"
    else
      d=$(maxrel "$r" "$out/$g32.steps" "$steps_fp32")
      if within "$d" 1e-4; then
        record "$row32" PASS "max rel. diff $d (tol 1e-4); loss $(mean "$out/$g32.steps" 1 1) -> $(mean "$out/$g32.steps" "$steps_fp32" "$steps_fp32"); $via; $(($(date +%s) - t)) s"
      else
        record "$row32" FAIL "max rel. diff $d > 1e-4 ($via)"
        paste "$r" "$out/$g32.steps" | head -20
      fi
    fi
  fi
  local row16="tiny model, 1 GPU, bf16 vs CPU ($steps_bf16 steps)" first last figures
  t=$(date +%s)
  if ! can_run "$row16" bf16 g16; then
    :
  elif ! r=$(ref cpu1 "$steps_bf16"); then
    record "$row16" FAIL "$r"
  else
    if ! run_set g16 "$steps_bf16" "$run_limit" "${data[@]}"; then
      record "$row16" FAIL "did not train: $(why g16)"
    else
      d=$(maxrel "$r" "$out/g16.steps" "$steps_bf16")
      first=$(mean "$out/g16.steps" 1 10) last=$(mean "$out/g16.steps" $((steps_bf16 - 9)) "$steps_bf16")
      figures="max rel. diff $d (tol 2e-2); mean loss steps 1-10 $first, last 10 $last"
      if within "$d" 2e-2 && awk -v a="$first" -v b="$last" 'BEGIN { exit !(b < a - 0.5) }'; then
        record "$row16" PASS "$figures; $(($(date +%s) - t)) s"
      else
        record "$row16" FAIL "$figures (must fall by 0.5)"
      fi
    fi
  fi

  # [multi-rank plan on one GPU] TP 2 + PP 2 + uneven batches (20 and 12
  # sequences): four ranks share the GPU through the staged MPI transport
  # (built with NCCL: they find they share a GPU and fall back, saying so);
  # losses as the one-GPU fp32 run's, else the CPU run's, at the same steps.
  row="multi-rank plan on one GPU (TP2+PP2, uneven)"
  t=$(date +%s)
  if can_run "$row" multirank gmr; then
    if ! run_set gmr "$steps_fp32" "$run_limit" "${data[@]}"; then
      record "$row" FAIL "did not train: $(why gmr)"
    else
      r=$out/$g32.steps against="the one-GPU fp32 run"
      if [ ! -s "$r" ] || [ "$(wc -l <"$r")" -ne "$steps_fp32" ]; then
        against="the CPU run (the one-GPU run did not train)"
        r=$(ref cpu1 "$steps_fp32") || r=/dev/null
      fi
      d=$(maxrel "$r" "$out/gmr.steps" "$steps_fp32")
      if within "$d" 1e-4; then
        record "$row" PASS "max rel. diff $d vs $against (tol 1e-4); $(($(date +%s) - t)) s"
      else
        record "$row" FAIL "max rel. diff $d vs $against > 1e-4"
        paste "$r" "$out/gmr.steps" | head -20
      fi
    fi
  fi

  # [HexiSeq on one GPU, issue 14] seqtiny's PP x TP x CP x HP plan
  # (tests/exec/plans/seq_pp_tp_cp_hp.json) on eight ranks sharing the GPU
  # through the staged transport, against the same plan's CPU programs.
  row="HexiSeq plan on one GPU (8 ranks) vs CPU, fp32"
  t=$(date +%s)
  if ! can_run "$row" hexiseq gseq; then
    :
  elif ! r=$(ref cpuseq "$steps_seq"); then
    record "$row" FAIL "$r"
  else
    if ! run_set gseq "$steps_seq" "$run_limit" "${data[@]}"; then
      record "$row" FAIL "did not train: $(why gseq)"
    elif ! grep -q "transport: mpi-staged" "$out/gseq.out"; then
      record "$row" FAIL "eight ranks on one GPU did not take the staged transport"
    else
      d=$(maxrel "$r" "$out/gseq.steps" "$steps_seq")
      if within "$d" 1e-4; then
        record "$row" PASS "max rel. diff $d (tol 1e-4); loss $(mean "$out/gseq.steps" 1 1) -> $(mean "$out/gseq.steps" "$steps_seq" "$steps_seq"); $(($(date +%s) - t)) s"
      else
        record "$row" FAIL "max rel. diff $d > 1e-4"
        paste "$r" "$out/gseq.steps" | head -10
      fi
    fi
  fi

  # [NCCL, issue 13] the one-GPU fp32 NCCL set again with HEXIC_TRANSPORT=mpi:
  # the same losses as its NCCL run, and each run says which it took.
  row="tiny, 1 GPU: NCCL vs staged MPI ($steps_fp32 steps)"
  t=$(date +%s)
  if [ "$gpu_state" != ok ]; then
    record "$row" SKIP "$gpu_skip"
  elif [ -z "$nccl_dir" ]; then
    record "$row" SKIP "no NCCL found (\$NCCL_HOME, ldconfig, $CUDA_HOME, python3 nvidia.nccl)"
  elif [ ! -f "$out/g32.out" ]; then
    record "$row" SKIP "not run: the one-GPU fp32 (NCCL) run did not run (see its row)"
  elif [ ! -s "$out/g32.steps" ] || [ "$(wc -l <"$out/g32.steps")" -ne "$steps_fp32" ]; then
    record "$row" FAIL "the one-GPU fp32 (NCCL) run did not train"
  elif ! grep -q "transport: nccl" "$out/g32.out"; then
    record "$row" FAIL "the one-GPU run did not take NCCL: $(grep -m 1 'transport:' "$out/g32.out")"
  elif can_run "$row" nccl g32; then
    cp "$out/g32.steps" "$out/g32nccl.steps" && cp "$out/g32.out" "$out/g32nccl.out"
    HEXIC_TRANSPORT=mpi run_set g32 "$steps_fp32" "$run_limit" "${data[@]}"
    local staged=$?
    mv "$out/g32.steps" "$out/g32mpi.steps" && mv "$out/g32.out" "$out/g32mpi.out"
    cp "$out/g32nccl.steps" "$out/g32.steps" && cp "$out/g32nccl.out" "$out/g32.out"
    if [ $staged -ne 0 ]; then
      record "$row" FAIL "the staged run did not train: $(why g32mpi)"
    elif ! grep -q "transport: mpi-staged" "$out/g32mpi.out"; then
      record "$row" FAIL "HEXIC_TRANSPORT=mpi did not take the staged transport"
    else
      d=$(maxrel "$out/g32nccl.steps" "$out/g32mpi.steps" "$steps_fp32")
      if within "$d" 0; then
        record "$row" PASS "losses equal (max rel. diff $d); $(($(date +%s) - t)) s"
      else
        record "$row" FAIL "max rel. diff $d (want 0)"
      fi
    fi
  fi

  # [several GPUs, issue 13/16] DP 2, TP 2, PP 2 over NCCL against the
  # one-GPU fp32 run within 1e-5; DP 2 zero1 against DP 2. Two GPUs needed.
  local kind rowz="tiny, 2 GPUs over NCCL: DP2 zero1 vs DP2 unsharded (fp32)"
  for kind in dp2 tp2 pp2 dp2z; do
    row="tiny, 2 GPUs over NCCL: ${kind^^} vs 1 GPU (fp32)"
    [ $kind != dp2z ] || row=$rowz
    t=$(date +%s)
    if [ "$gpu_state" = ok ] && [ "${ngpus:-0}" -lt 2 ]; then
      record "$row" SKIP "this machine has ${ngpus:-0} GPU(s): multi-GPU checks need 2"
    elif can_run "$row" multigpu "$kind"; then
      local base=$out/g32nccl.steps
      [ $kind != dp2z ] || base=$out/dp2.steps
      if [ $kind = dp2z ] && [ "$(fact dp2z_shards)" != 1 ]; then
        record "$row" FAIL "the zero1 plan's rank programs carry no optimizer shards (read at prepare)"
      elif [ ! -s "$base" ]; then
        record "$row" FAIL "no reference run ($(basename "$base" .steps)) trained"
      elif ! run_set "$kind" "$steps_fp32" "$run_limit" "${data[@]}"; then
        record "$row" FAIL "did not train: $(why "$kind")"
      elif ! grep -q "transport: nccl" "$out/$kind.out"; then
        record "$row" FAIL "did not take NCCL: $(grep -m 1 'transport:' "$out/$kind.out")"
      else
        d=$(maxrel "$base" "$out/$kind.steps" "$steps_fp32")
        if within "$d" 1e-5; then
          record "$row" PASS "max rel. diff $d (tol 1e-5); $(($(date +%s) - t)) s"
        else
          record "$row" FAIL "max rel. diff $d > 1e-5"
        fi
      fi
    fi
  done

  # [throughput] the 1.3B Llama, bf16, micro-batches of 8, one GPU: 8
  # steps, the first 2 left out; then bench/gpu_throughput.sh (the kit's
  # bin/gpu_throughput.sh) adds the kernels' TFLOP/s and GB/s at its shapes,
  # the attention's at head dims 64/128 and T 2048, tokens/s, MFU (the
  # simulator's FLOPs a token over the dense bf16 peak, the cluster file's
  # 989 TFLOP/s for H100/H200 unless HEXIC_GPU_PEAK_TFLOPS) and the
  # simulated step beside the measured one; its figures go to the log.
  row="1.3B throughput, bf16, 1 GPU"
  t=$(date +%s)
  if can_run "$row" throughput g13; then
    if ! run_set g13 "$steps_13b" "$run_limit"; then
      record "$row" FAIL "did not run: $(why g13)"
    else
      local peak=${HEXIC_GPU_PEAK_TFLOPS:-$(fact peak_tflops)} tout trc fig mfu
      local blimit=$(($(left) - 10))
      [ "$blimit" -ge 10 ] || blimit=10
      tout=$(bash "$k/bin/gpu_throughput.sh" --kit "$k" --plan "$k/sets/g13/plan.json" \
        --steps "$out/g13.steps" --peak "$peak" --cluster-peak "$(fact peak_tflops)" \
        --quick --limit "$blimit" ${cudnn_dir:+--cudnn-dir "$cudnn_dir"} 2>&1)
      trc=$?
      echo "$tout" >>"$log"
      fig=$(sed -n 's/^throughput: //p' <<<"$tout" | tail -1)
      mfu=$(sed -n 's/.*MFU \([0-9.]*\)%.*/\1/p' <<<"$fig")
      if [ $trc = 0 ] && [ -n "$mfu" ]; then
        record "$row" PASS "$fig, $(mfu_verdict "$mfu" 40); $(($(date +%s) - t)) s"
      else
        record "$row" FAIL "gpu_throughput.sh exit $trc: $(tail -1 <<<"$tout" | cut -c1-120)"
      fi
    fi
  fi

  summary "tests/gpu/run.sh run on ${gpu_name:-an unknown GPU}, $(($(date +%s) - t_start)) s of ${budget} s (log: $log)"
  verdict
}

# Sourced with HEXIC_GPU_SOURCE_ONLY=1 (tests/gpukit/): the functions only.
[ -z "${HEXIC_GPU_SOURCE_ONLY:-}" ] || return 0
case ${1:-all} in
prepare)
  [ $# -eq 2 ] || { echo "usage: run.sh prepare KIT" >&2; exit 2; }
  prepare_kit "$2"
  ;;
run)
  [ $# -eq 2 ] || { echo "usage: run.sh run KIT" >&2; exit 2; }
  run_kit "$2"
  ;;
all)
  kit=${HEXIC_GPU_KIT:-$root/build-gpu-kit}
  prepare_kit "$kit" || exit 1
  run_kit "$kit"
  ;;
*)
  echo "usage: run.sh [prepare KIT | run KIT]" >&2
  exit 2
  ;;
esac
