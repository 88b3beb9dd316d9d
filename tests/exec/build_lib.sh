# Sourced by the scripts that build many generated program sets in one work
# folder (tests/exec/run_exec.sh, run_zero1.sh, tests/ckpt/run_ckpt.sh); they
# define fail(). The runtime library is the same for every plan: build DIR
# builds it once (in the first plan's folder) and copies it, timestamps kept,
# into the others, so make only compiles and links the rank files.
lib_ready=
build() {
  local dir=$1
  if [ -n "$lib_ready" ]; then cp -rp lib/obj lib/libhexic.a "$dir"/; fi
  make -s -C "$dir" -j2 >"$dir.make.log" 2>&1 || { cat "$dir.make.log"; fail "make in $dir"; }
  if [ -z "$lib_ready" ]; then
    rm -rf lib && mkdir lib && cp -rp "$dir"/obj "$dir"/libhexic.a lib/ && lib_ready=1
  fi
}
