# `run.sh prepare KIT`, sourced by tests/gpu/run.sh: on a machine with the
# CUDA toolkit and the project's packages (no GPU needed), build everything
# the GPU checks run, compute their CPU references, and pack into KIT what a
# GPU machine without MPI, OpenBLAS, flex/bison or a network lacks.
#
# KIT holds kit.tar.xz (the stage below, symlinks kept) and manifest.txt.
# The stage ($build/kit-stage):
#   bin/        check_kernels, gpu_bench (sm_80, sm_89, sm_90 + PTX),
#               gpu_throughput.sh (bench/'s, for the throughput row), and
#               where cuDNN was found check_kernels_cudnn, gpu_bench_cudnn
#               (linked against libcudnn.so.9, which the kit does not carry)
#   sets/NAME/  each generated program set's launch.sh, rank binaries, plan.json
#   ref/        the CPU reference losses (NAME-STEPS.steps: "STEP LOSS MS")
#   data/       text.bin (hexic-shard of the licence texts)
#   sys/        Debian's packages unpacked (dpkg -x): Open MPI, PMIx, hwloc,
#               libevent, OpenBLAS, ... pruned of MCA plugins whose libraries
#               are not shipped (ucx, ofi, psm, verbs)
#   lib/        one link per shipped library name, into sys/
#   etc/        openmpi-mca-params.conf (btl self,vader,tcp; pml ob1)
#   facts       KEY=VALUE lines read by `run`: what was built, for which GPU
#
# The CPU references take the same --steps as the GPU runs they are compared
# with (the cosine schedule spreads over --steps): steps_* below are shared
# with run.sh.

# The libraries a kit may take from the GPU machine: glibc, the C++ runtime,
# the driver, the CUDA toolkit's and NCCL's (tests/gpukit/check_kit.sh too).
kit_allowed='^(linux-vdso\.so|ld-linux-x86-64\.so|libc\.so|libm\.so|libdl\.so|libpthread\.so|librt\.so|libstdc\+\+\.so|libgcc_s\.so|libcuda\.so|libcudart\.so|libcublas\.so|libcublasLt\.so|libnccl\.so|libnvidia-[a-z-]*\.so|libnvrtc[a-z-]*\.so|libnvJitLink\.so|libcudnn[a-z_]*\.so)'

# the_sets: "NAME TARGET TRANSPORT MODEL CLUSTER [PLAN]" lines, CPU sets first.
the_sets() {
  cat <<EOF
cpu1 cpu - $tiny $root/examples/clusters/cpu1.hx
cpuseq cpu - $seqtiny $root/examples/clusters/cpu8.hx $seqplan
cpu2 cpu - $tiny $work/cpu2.hx
g32 cuda nccl $tiny $one
g32s cuda mpi $tiny $one
g16 cuda mpi $work/tiny-bf16.hx $one
gmr cuda nccl $tiny $work/four.hx $root/tests/codegen/plans/tp2_pp2_uneven.json
gseq cuda nccl $seqtiny $work/eight.hx $seqplan
g13 cuda mpi $work/llama-1.3b.hx $one
dp2 cuda nccl $tiny $work/two.hx $root/tests/codegen/plans/tiny_dp2.json
tp2 cuda nccl $tiny $work/two.hx $root/tests/codegen/plans/tiny_tp2.json
pp2 cuda nccl $tiny $work/two.hx $root/tests/codegen/plans/tiny_pp2.json
dp2z cuda nccl $tiny $work/two.hx $root/tests/codegen/plans/tiny_dp2z.json
EOF
}

# The model and cluster files the sets use, in $work.
write_inputs() {
  one=$root/examples/clusters/one-h200.hx
  local gpu_name gpu_cc mem
  gpu_name=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)
  gpu_cc=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1)
  # Prepared on a GPU machine that is no H200: one GPU of its own name,
  # memory and compute capability (HEXIC_GPU_PEAK_TFLOPS its dense bf16 peak).
  if [[ $gpu_cc =~ ^([0-9]+)\.([0-9]+)$ ]] && [[ $gpu_name != *H200* ]]; then
    one=$work/this-gpu.hx
    mem=$(nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits | head -1 | tr -cd 0-9)
    printf 'gpu "%s" { tflops = %s; memory = %s MiB; cuda_arch = %s }\nnode "gpu0" { gpu = "%s"; gpus = 1 }\n' \
      "$(tr -cd 'A-Za-z0-9 ._-' <<<"$gpu_name")" "${HEXIC_GPU_PEAK_TFLOPS:-989}" "${mem:-81920}" \
      "${BASH_REMATCH[1]}${BASH_REMATCH[2]}" "$(tr -cd 'A-Za-z0-9 ._-' <<<"$gpu_name")" >"$one"
  fi
  local n
  for n in two:2 four:4 eight:8; do
    { grep '^gpu ' "$one"; sed -n "s/^gpu \\(\"[^\"]*\"\\).*/node \"gpu0\" { gpu = \\1; gpus = ${n#*:}; bandwidth = 100 GB\\/s }/p" "$one"; } >"$work/${n%:*}.hx"
  done
  printf 'gpu "cpu" { tflops = 0.02; memory = 8 GiB; efficiency = 1; mem_bandwidth = 10 GB/s }\nnode "host" { gpu = "cpu"; gpus = 2; bandwidth = 10 GB/s }\n' >"$work/cpu2.hx"
  sed 's/precision = fp32/precision = bf16/' "$tiny" >"$work/tiny-bf16.hx"
  cat >"$work/llama-1.3b.hx" <<'EOF'
model "llama-1.3b" {
  layers = 24; hidden = 2048; ffn = 5504; heads = 16
  vocab = 32000; seq_len = 2048
}
train {
  global_batch = 32; micro_batch = 8
  precision = bf16; recompute = none
  lr = 3e-4; warmup_steps = 2; steps = 8; seed = 1
}
EOF
}

# build_set NAME TRANSPORT: generate and make one set; the first CUDA set
# compiles the runtime and the kernel library, later ones get copies (make
# then only relinks their ranks). A failure is written to NAME.failed.
cuda_built=
build_set() {
  local name=$1 transport=$2 target=$3 model=$4 cluster=$5 plan=${6:-} dir=$work/$1
  local args=("$model" "$cluster" --target="$target" -o "$dir")
  [ -z "$plan" ] || args+=(--plan="$plan")
  if ! "$hexic" "${args[@]}" >"$dir.hexic.txt" 2>&1; then
    echo "hexic: $(grep -m 1 error "$dir.hexic.txt" | cut -c1-120)" >"$dir.failed"
    return 1
  fi
  local make_args=()
  if [ "$target" = cuda ]; then
    make_args+=(TRANSPORT="$transport")
    [ -z "$cuda_built" ] || cp -rp "$cuda_built"/obj "$cuda_built"/*.a "$dir"/
  fi
  if ! make -C "$dir" -j"$jobs" "${make_args[@]}" >"$dir.make.log" 2>&1; then
    echo "make failed: $(grep -m 1 'error' "$dir.make.log" | cut -c1-120)" >"$dir.failed"
    return 1
  fi
  if [ "$target" = cuda ] && [ -z "$cuda_built" ]; then cuda_built=$dir; fi
}

# cpu_reference NAME STEPS: the CPU set's losses at STEPS into ref/.
cpu_reference() {
  local name=$1 steps=$2 out=$stage/ref/$1-$2
  if [ -f "$work/$name.failed" ]; then
    cp "$work/$name.failed" "$out.failed"
    return
  fi
  echo "== CPU reference: $name, $steps steps"
  OMPI_MCA_rmaps_base_oversubscribe=1 timeout 900 "$work/$name/launch.sh" --steps "$steps" \
    --data "$work/text.bin" >"$out.out" 2>&1
  local rc=$?
  steps_of "$out.out" >"$out.steps"
  if [ $rc -ne 0 ] || [ "$(wc -l <"$out.steps")" -ne "$steps" ]; then
    echo "did not train (exit $rc): $(tail -n 1 "$out.out" | cut -c1-120)" >"$out.failed"
  fi
}

# ---- the runtime libraries from Debian's packages -----------------------------
# deb_unpack PKG...: apt-get download (the installed version) + dpkg -x into sys/; a package that
# cannot be downloaded falls back to copying its installed files (said in
# the facts and on stdout).
deb_unpack() {
  local pkg deb
  mkdir -p "$build/debs"
  for pkg in "$@"; do
    case " $unpacked " in *" $pkg "*) continue ;; esac
    unpacked+=" $pkg"
    deb=$(cd "$build/debs" && ls "${pkg}"_*.deb 2>/dev/null | head -1)
    if [ -z "$deb" ]; then
      # the installed version (what the programs were linked against), else the candidate
      local ver
      ver=$(dpkg-query -W -f='${Version}' "$pkg" 2>/dev/null)
      (cd "$build/debs" && { apt-get download "$pkg${ver:+=$ver}" || apt-get download "$pkg"; } >>"$log" 2>&1)
      deb=$(cd "$build/debs" && ls "${pkg}"_*.deb 2>/dev/null | head -1)
    fi
    if [ -n "$deb" ]; then
      dpkg -x "$build/debs/$deb" "$stage/sys"
      echo "deb $deb" >>"$stage/facts.debs"
    else
      echo "prepare: apt-get download $pkg failed: copying its installed files instead"
      echo "copied $pkg (apt-get download failed)" >>"$stage/facts.debs"
      dpkg -L "$pkg" | while read -r f; do
        if [ -f "$f" ] && [ ! -d "$f" ]; then
          mkdir -p "$stage/sys$(dirname "$f")"
          cp -a "$f" "$stage/sys$f"
        fi
      done
    fi
  done
}

# elf_files DIR: every ELF executable or shared library under DIR.
elf_files() {
  find "$1" -type f \( -perm -u+x -o -name '*.so*' \) -print0 |
    while IFS= read -r -d '' f; do
      [ "$(head -c 4 "$f" | od -An -c | tr -d ' ')" = '177ELF' ] && echo "$f"
    done
}

# link_libs: lib/NAME -> sys/... for every shared library unpacked (not the
# plugins, which Open MPI and PMIx find by their own paths).
link_libs() {
  local f
  mkdir -p "$stage/lib"
  find "$stage/sys" \( -path '*/openmpi/lib/openmpi3' -o -path '*/pmix2/lib/pmix' \) -prune -o \
    \( -name 'lib*.so.*' -o -name 'lib*.so' \) -print | while read -r f; do
    [ -e "$stage/lib/$(basename "$f")" ] || ln -s "../${f#"$stage"/}" "$stage/lib/$(basename "$f")"
  done
}

# unresolved: "NAME PATH" for each library an ELF file of the stage takes
# from outside the stage and outside $kit_allowed ("NAME not" when not found).
unresolved() {
  elf_files "$stage" | while read -r f; do
    LD_LIBRARY_PATH=$stage/lib ldd "$f" 2>/dev/null | awk '$2 == "=>" { print $1, $3 }'
  done | sort -u | while read -r name path; do
    [[ $name =~ $kit_allowed ]] && continue
    case $path in "$stage"/*) continue ;; esac
    echo "$name $path"
  done
}

# owner_package PATH: the Debian package that installed the library (the
# path as resolved, or under /usr: Debian 12 merged /lib into /usr/lib).
owner_package() {
  local real p
  real=$(readlink -f "$1")
  for p in "$1" "$real" "/usr$real" "${real#/usr}"; do
    dpkg -S "$p" 2>/dev/null | head -1 | cut -d: -f1 | grep . && return
  done
  echo "prepare: no package owns $1" >&2
}

# prune: what the programs never load (OpenSHMEM, the Fortran bindings,
# LAPACK, plugins for other machines' schedulers and networks, docs).
prune() {
  local lib=$stage/sys/usr/lib/x86_64-linux-gnu plugdir=$stage/sys/usr/lib/x86_64-linux-gnu/openmpi/lib/openmpi3
  rm -f "$plugdir"/mca_*_monitoring.so "$plugdir"/mca_pmix_flux.so "$plugdir"/mca_schizo_flux.so \
    "$plugdir"/mca_ras_gridengine.so "$plugdir"/mca_reachable_netlink.so \
    "$plugdir"/mca_spml_*.so "$plugdir"/mca_sshmem_*.so "$plugdir"/mca_scoll_*.so \
    "$plugdir"/mca_atomic_*.so "$plugdir"/mca_memheap_*.so \
    "$lib"/liboshmem.so* "$lib"/libmpi_mpifh.so* "$lib"/libmpi_usempi*.so* "$lib"/libmpi_java.so* \
    "$lib"/openblas-pthread/liblapack.so* "$lib"/openblas-pthread/libblas.so* \
    "$stage"/sys/usr/bin/osh* "$stage"/sys/usr/bin/shmem*
  rm -rf "$stage/sys/usr/share/man" "$stage/sys/usr/share/doc" "$stage/sys/usr/share/lintian" \
    "$stage/sys/usr/lib/x86_64-linux-gnu/openmpi/include" "$stage/sys/usr/share/bug"
  find "$stage/sys" -xtype l -delete
  find "$stage/lib" -xtype l -delete 2>/dev/null || true
}

pack_runtime() {
  echo "== packing Open MPI, OpenBLAS and what they need (Debian packages, dpkg -x)"
  unpacked=
  : >"$stage/facts.debs"
  deb_unpack openmpi-bin openmpi-common libopenmpi3 libpmix2 libhwloc15
  # MCA plugins whose libraries the kit does not ship (and would not use:
  # one machine, shared memory and TCP).
  local plugdir=$stage/sys/usr/lib/x86_64-linux-gnu/openmpi/lib/openmpi3 f pass
  local fabric='NEEDED.*\[(libuc[pstm]|libfabric|libpsm|libibverbs|librdmacm|libnl-|libmca_common_(ucx|ofi|verbs)|libmca_common_monitoring)'
  for pass in 1 2; do
    for f in "$plugdir"/*.so "$stage"/sys/usr/lib/x86_64-linux-gnu/libmca_common_*.so.*; do
      [ -f "$f" ] || continue
      if readelf -d "$f" 2>/dev/null | grep -Eq "$fabric"; then rm -f "$f"; fi
    done
  done
  prune
  # Fixpoint: every library something in the stage takes from the system
  # comes from its Debian package, until nothing does.
  local round missing pkgs name path
  for round in 1 2 3 4 5 6; do
    link_libs
    missing=$(unresolved)
    [ -n "$missing" ] || break
    pkgs=
    while read -r name path; do
      if [ "$path" = not ]; then
        echo "prepare: $name is not found on this machine either" >&2
        continue
      fi
      pkgs+=" $(owner_package "$path")"
    done <<<"$missing"
    # shellcheck disable=SC2086
    deb_unpack $pkgs
  done
  prune
  # A plugin that still needs a library the kit lacks goes (say which).
  for f in "$plugdir"/*.so "$stage"/sys/usr/lib/x86_64-linux-gnu/pmix2/lib/pmix/*.so; do
    if LD_LIBRARY_PATH=$stage/lib ldd "$f" 2>/dev/null | grep -q 'not found'; then
      echo "prepare: dropping $(basename "$f"): $(LD_LIBRARY_PATH=$stage/lib ldd "$f" | grep -m 1 'not found' | awk '{print $1}') is not shipped" >>"$log"
      rm -f "$f"
    fi
  done
  # Debian's alternatives (not in any package) name the launcher mpirun.
  ln -sf orterun "$stage/sys/usr/bin/mpirun"
  ln -sf orterun "$stage/sys/usr/bin/mpiexec"
  mkdir -p "$stage/etc"
  cp -a "$stage"/sys/etc/openmpi/* "$stage/etc/" 2>/dev/null || true
  cat >>"$stage/etc/openmpi-mca-params.conf" <<'EOF'
# hexic's GPU kit: one machine, shared memory and TCP, only the plugins shipped
btl = self,vader,tcp
pml = ob1
mca_base_component_show_load_errors = 1
EOF
}

prepare_kit() {
  local kit=$1
  case $kit in "" | / | "$root" | "$HOME") echo "prepare: refusing KIT=$kit" >&2; return 2 ;; esac
  mkdir -p "$kit"
  kit=$(cd "$kit" && pwd)
  build=${HEXIC_GPU_BUILD:-$root/build-gpu}
  work=$build/gpu-programs
  stage=$build/kit-stage
  mkdir -p "$build"
  log=$build/prepare.log
  : >"$log"
  local t0 archs=${HEXIC_GPU_ARCHS:-80-real;89-real;90}
  t0=$(date +%s)
  echo "== prepare: build in $build (Release, CUDA for $archs), kit $kit; log $log"
  bash "$root/scripts/setup.sh" >>"$log" 2>&1 || echo "setup.sh could not install what is missing (see $log)"
  if ! cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DHEXIC_CUDA=ON \
    -DCMAKE_CUDA_ARCHITECTURES="$archs" >>"$log" 2>&1 ||
    ! cmake --build "$build" -j"$jobs" --target hexic hexic-shard check_kernels gpu_bench >>"$log" 2>&1; then
    tail -30 "$log"
    echo "prepare: the build failed (see $log)" >&2
    return 1
  fi
  hexic=$build/hexic
  rm -rf "$work" "$stage"
  mkdir -p "$work" "$stage"/{bin,sets,ref,data}
  : >"$stage/nccl-sets"
  cp "$build/tests/check_kernels" "$build/tests/gpu_bench" "$root/bench/gpu_throughput.sh" "$stage/bin/"
  # cuDNN's attention check and bench where CMake found cuDNN (they load it
  # from the GPU machine at run time: run.sh finds one, or says SKIP)
  if grep -q 'cudnn attention checks are built' "$log" &&
    cmake --build "$build" -j"$jobs" --target check_kernels_cudnn gpu_bench_cudnn >>"$log" 2>&1; then
    cp "$build/tests/check_kernels_cudnn" "$build/tests/gpu_bench_cudnn" "$stage/bin/"
    echo "cudnn_build=$(sed -n 's/^#define CUDNN_\(MAJOR\|MINOR\|PATCHLEVEL\) \([0-9]*\)$/\2/p' \
      "$(sed -n 's/^CUDNN_INCLUDE_DIR:PATH=//p' "$build/CMakeCache.txt")/cudnn_version.h" | paste -sd.)" >>"$stage/facts"
  else
    echo "cudnn_build=none" >>"$stage/facts"
  fi
  tiny=$root/examples/models/tiny.hx
  seqtiny=$root/tests/exec/models/seqtiny.hx
  seqplan=$root/tests/exec/plans/seq_pp_tp_cp_hp.json
  write_inputs
  if ls /usr/share/common-licenses/* >/dev/null 2>&1; then
    cat /usr/share/common-licenses/* >"$work/text.txt"
  else
    cat "$root"/docs/*.md "$root"/README.md >"$work/text.txt"
  fi
  "$build/hexic-shard" "$work/text.txt" "$stage/data/text.bin" >>"$log" 2>&1
  cp "$stage/data/text.bin" "$work/text.bin"

  echo "== generating and building the program sets"
  local name target transport model cluster plan
  while read -r name target transport model cluster plan; do
    local t
    t=$(date +%s)
    if build_set "$name" "$transport" "$target" "$model" "$cluster" "$plan"; then
      mkdir -p "$stage/sets/$name"
      cp "$work/$name"/launch.sh "$work/$name"/plan.json "$stage/sets/$name/"
      find "$work/$name" -maxdepth 1 -name 'rank_*' ! -name '*.c' -exec cp {} "$stage/sets/$name/" \;
      [ "$transport" != nccl ] || echo "$name" >>"$stage/nccl-sets"
      echo "$name: built ($target${transport:+ }${transport#-}, $(($(date +%s) - t)) s)"
    else
      cp "$work/$name.failed" "$stage/sets/$name.failed"
      echo "$name: $(cat "$work/$name.failed")"
    fi
  done < <(the_sets)
  # The zero1 plan's programs carry optimizer shards (read here: the kit has no sources).
  if cat "$work/dp2z"/rank_*.c 2>/dev/null | grep -q '_shards\[\] = {'; then
    echo "dp2z_shards=1" >>"$stage/facts"
  else
    echo "dp2z_shards=0" >>"$stage/facts"
  fi

  cpu_reference cpu1 "$steps_fp32"
  [ "$steps_bf16" = "$steps_fp32" ] || cpu_reference cpu1 "$steps_bf16"
  cpu_reference cpuseq "$steps_seq"

  pack_runtime
  {
    echo "built=$(date -u +%Y-%m-%dT%H:%MZ) on $(hostname)"
    echo "commit=$(git -C "$root" rev-parse --short HEAD 2>/dev/null)"
    echo "archs=$archs"
    echo "cluster=$(basename "$one")"
    echo "set_arch=$(sed -n 's/.*cuda_arch = \([0-9]*\).*/\1/p' "$one" | head -1)"
    echo "peak_tflops=$(sed -n 's/^gpu .*tflops = \([0-9.]*\).*/\1/p' "$one" | head -n 1)"
    echo "gpu_type=$(sed -n 's/^gpu "\([^"]*\)".*/\1/p' "$one" | head -n 1)"
    echo "steps_fp32=$steps_fp32 steps_bf16=$steps_bf16 steps_seq=$steps_seq"
    echo "cuda_runtime=$("$CUDA_HOME/bin/nvcc" --version | sed -n 's/.*release \([0-9.]*\).*/\1/p')"
  } >>"$stage/facts"
  local left
  left=$(unresolved)
  if [ -n "$left" ]; then
    echo "prepare: the kit still takes from this machine:" >&2
    echo "$left" >&2
  fi
  rm -f "$kit/kit.tar.xz" "$kit/manifest.txt"
  echo "== packing $kit/kit.tar.xz"
  tar -C "$stage" -cf - . | xz -T"$jobs" -6 >"$kit/kit.tar.xz"
  {
    echo "# hexic GPU kit: bash tests/gpu/run.sh run $kit"
    cat "$stage/facts" "$stage/facts.debs"
    (cd "$stage" && find . -type f -printf '%s %p\n' | sort -k2)
  } >"$kit/manifest.txt"
  echo "prepare: kit $(du -sh "$kit" | cut -f1) (stage $(du -sh "$stage" | cut -f1)), $(($(date +%s) - t0)) s"
}
