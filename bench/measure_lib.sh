# Sourced by bench/measured.sh and bench/hexiseq_measured.sh: the pieces of
# "compile a plan, build it, train it, compare with the simulator" they share.
# They set work (a scratch folder) first.

# build_plan DIR: make DIR; the runtime library is built once (in the first
# plan's folder) and copied, timestamps kept, into the others. The cache is
# known by its files, not a variable: callers run plans in $(...) subshells,
# where a variable set by the first would be lost and every plan rebuilt it.
build_plan() {
  local dir=$1
  if [ -e "$work/lib/libhexic.a" ]; then cp -rp "$work/lib/obj" "$work/lib/libhexic.a" "$dir"/; fi
  make -s -C "$dir" -j2 >"$dir.make.log" 2>&1 || { cat "$dir.make.log"; exit 1; }
  if [ ! -e "$work/lib/libhexic.a" ]; then
    mkdir -p "$work/lib" && cp -rp "$dir/obj" "$dir/libhexic.a" "$work/lib"/
  fi
}

# sim_and_median DIR LOG [SKIP]: "simulated measured" seconds: plan.json's
# simulated step and the median of the logged steps after the first SKIP (2).
sim_and_median() {
  local skip=${3:-2}
  local sim meas
  sim=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["simulated"]["iteration_s"])' \
    "$1/plan.json")
  meas=$(sed -n 's/^step \([0-9]*\)\/[0-9]* | .* | \([0-9.]*\) ms | .*/\1 \2/p' "$2" |
    awk -v skip="$skip" '$1 > skip { print $2 / 1000 }' | sort -g |
    awk '{ v[NR] = $1 } END { print NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }')
  echo "$sim $meas"
}

# report NAME "SIM MEAS" PLAN-LINE: one aligned line with the error
report() {
  awk -v n="$1" -v s="${2% *}" -v m="${2#* }" -v p="$3" 'BEGIN {
    printf "%-9s simulated %.3f s  measured %.3f s (median)  error %+.1f%%   %s\n",
           n, s, m, 100 * (s - m) / m, p }'
}

# profile_figures FILE: hexic-profile's figures in FILE as tflops, eff, membw
# (MB/s), netbw (MB/s) and netlat (us), for a bench to write its clusters with
profile_figures() {
  tflops=$(profile_value 's/^gpu .* tflops = \([0-9.]*\);.*/\1/p' "$1")
  eff=$(profile_value 's/^gpu .* efficiency = \([0-9.]*\);.*/\1/p' "$1")
  membw=$(profile_value 's/^gpu .* mem_bandwidth = \([0-9.]*\) MB\/s.*/\1/p' "$1")
  netbw=$(profile_value 's/^network { bandwidth = \([0-9.]*\) MB\/s;.*/\1/p' "$1")
  netlat=$(profile_value 's/^network .* latency = \([0-9.]*\) us.*/\1/p' "$1")
}

# profile_value SED-SCRIPT FILE: the first line the script prints
profile_value() { sed -n "$1" "$2" | head -n 1; }
