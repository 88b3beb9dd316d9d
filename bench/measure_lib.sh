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

# profile_figures FILE: hexic-profile's figures in FILE as tflops, eff, beff and
# heff (the backward's and the LM head's efficiency), membw and copybw (MB/s),
# netbw (MB/s) and netlat (us), for a bench to write its clusters with
profile_figures() {
  tflops=$(profile_value 's/^gpu .* tflops = \([0-9.]*\);.*/\1/p' "$1")
  eff=$(profile_value 's/^gpu .*; efficiency = \([0-9.]*\);.*/\1/p' "$1")
  beff=$(profile_value 's/^gpu .* backward_efficiency = \([0-9.]*\);.*/\1/p' "$1")
  heff=$(profile_value 's/^gpu .* head_efficiency = \([0-9.]*\);.*/\1/p' "$1")
  membw=$(profile_value 's/^gpu .* mem_bandwidth = \([0-9.]*\) MB\/s.*/\1/p' "$1")
  copybw=$(profile_value 's/^gpu .* copy_bandwidth = \([0-9.]*\) MB\/s.*/\1/p' "$1")
  netbw=$(profile_value 's/^network { bandwidth = \([0-9.]*\) MB\/s;.*/\1/p' "$1")
  netlat=$(profile_value 's/^network .* latency = \([0-9.]*\) us.*/\1/p' "$1")
}

# profile_value SED-SCRIPT FILE: the first line the script prints
profile_value() { sed -n "$1" "$2" | head -n 1; }

# kind_table SIMULATED MEASURED [SKIP]: per kind of event (forward,
# backward, all-reduce, ...), the seconds of one step summed over the
# ranks, simulated (hexic's trace.json) against measured (the program's
# HEXIC_TRACE file: the mean over its steps after the first SKIP (3), a
# rank's step ending with its optimizer event). The ranks of an emulated
# cluster share one clock, so a collective is measured as the simulator
# prices it: each instance (matched across its members by step, group and
# order) from its LAST member's arrival (on its link, queued behind the
# member's earlier buckets, where --emulate records it) to its completion
# (the first member's end, or the emulated completion the trace records),
# once per member; the time a member spent before that arrival, waiting
# for its peers (each second once, however many buckets wait), is a row of
# its own. A pipeline hop is matched from its send (sender, receiver,
# micro-batch, step) to its receive: from the send's start to the data's
# arrival, against the simulator's transfer; and the part of it not under
# the receiver's compute (forward, backward), with how many hops were
# wholly hidden. An optimizer op's wait for the loss and norm all-reduce
# over every rank (--emulate records it) is a row of its own. Under
# --emulate the compute kinds get two more columns: the ops' compute at the
# devices' speed from CPU seconds (the trace's "emulated"), and the
# simulator's error against it, which another load on the machine does
# not move.
kind_table() {
  python3 "$(dirname "${BASH_SOURCE[0]}")/kind_table.py" "$1" "$2" "${3:-3}"
}
