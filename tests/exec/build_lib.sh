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

# The two below need the sourcing script's $steps, $wcmp (weights_cmp),
# $fixture (emit_fixture) and its own run DIR, which trains DIR into
# DIR.losses and DIR.w.

# same REF DIR WHAT: losses within 1e-5 relative, weights within 1e-5.
same() {
  local ref=$1 dir=$2 what=$3
  awk 'NR == FNR { a[$1] = $2; next } ($1 in a) { n++; r = (a[$1] - $2) / a[$1]; if (r < 0) r = -r
         if (r > 1e-5) bad++ } END { exit bad > 0 || n != '$steps' }' "$ref.losses" "$dir.losses" ||
    { paste "$ref.losses" "$dir.losses"; fail "$what: losses differ from one rank"; }
  local cmp
  cmp=$("$wcmp" "$ref.w" "$dir.w" 1e-5) || { echo "$cmp"; fail "$what: weights differ from one rank"; }
  echo "  $what: $steps losses within 1e-5; ${cmp#weights_cmp: }"
}

# fixture NAME PLAN [flags]: emit_fixture's hand-built plan, trained.
fixture() {
  local dir=$1
  shift
  rm -rf "$dir"
  "$fixture" "$dir" "$@" || fail "emit_fixture $*"
  build "$dir"
  run "$dir"
}
