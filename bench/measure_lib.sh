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

# kind_table SIMULATED MEASURED [SKIP]: per kind of event (forward,
# backward, recv, all-reduce, ...), the seconds of one step summed over the
# ranks, simulated (hexic's trace.json) against measured (the program's
# HEXIC_TRACE file: the mean over its steps after the first SKIP (3), a
# rank's step ending with its optimizer event). A measured recv spans the
# receive's post to its data's arrival (posted ahead: under the compute
# before it) where the simulated one is the link's time; a measured send is
# the sender's time to start it.
kind_table() {
  python3 - "$1" "$2" "${3:-3}" <<'PY'
import json, sys
from collections import defaultdict
def spans(path):
    return [e for e in json.load(open(path))["traceEvents"] if e.get("ph") == "X"]
sim = defaultdict(float)
for e in spans(sys.argv[1]):
    sim[e["cat"]] += e["dur"] * 1e-6
skip = int(sys.argv[3])
per_rank = defaultdict(list)
for e in spans(sys.argv[2]):
    per_rank[e["tid"]].append(e)
meas, kept = defaultdict(float), None
for tid, evs in per_rank.items():
    ends = sorted(e["ts"] + e["dur"] for e in evs if e["cat"] == "optimizer")
    steps = [s for s in range(len(ends)) if s >= skip]
    kept = len(steps) if kept is None else min(kept, len(steps))
    for e in evs:
        step = sum(1 for t in ends if t < e["ts"] + e["dur"])  # optimizer ends before it
        if step >= skip and step < len(ends):
            meas[e["cat"]] += e["dur"] * 1e-6
if not kept:
    print("          per kind: no step after the first %d in %s" % (skip, sys.argv[2]))
    sys.exit(0)
print("          per kind, one step over every rank:  simulated s   measured s   error")
for kind in sorted(set(sim) | set(meas)):
    s, m = sim.get(kind, 0.0), meas.get(kind, 0.0) / kept
    err = "%+6.1f%%" % (100 * (s - m) / m) if m > 0 else "     -"
    print("          %-36s %11.4f  %11.4f  %s" % (kind, s, m, err))
PY
}
