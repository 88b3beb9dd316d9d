#!/usr/bin/env bash
# Gradient sync overlapped with the backward (issue 13, items 2 and 5), on
# the CPU backend's non-blocking MPI all-reduces:
#   run_sync_overlap.sh WORKDIR FIXTURE
# A DP x TP x PP plan of the tiny model (pipeline 0: layers [0,2) on TP 2,
# then [2,4); pipeline 1: all 4 layers on one rank) trains 3 steps with
# HEXIC_SYNC_TRACE=1, which makes every rank print per step the order in
# which its last backward passed its layers (B: it starts, bL: layer L done,
# E: it ends, W: the GRAD_SYNC op) and started its gradient buckets (sG@L:
# group G's bucket of layer L; @head, @emb). check_order requires every
# bucket of layer L to start right after bL, before the next layer's
# backward; head buckets after B; tok_emb buckets after E; and some bucket
# to start before a later backward (real overlap). The same plan with
# HEXIC_SYNC_OVERLAP=0 (every bucket at GRAD_SYNC, the blocking path) must
# give the same losses and byte-identical weights, and its trace must FAIL
# check_order: the check tells the two schedules apart.
set -uo pipefail
work=$1 fixture=$2
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0} OPENBLAS_NUM_THREADS=1
export HEXIC_TIMEOUT_S=${HEXIC_TIMEOUT_S:-30}
rm -rf "$work" && mkdir -p "$work" && cd "$work" || exit 1

fail() { echo "FAIL: $*" >&2; exit 1; }

"$fixture" p "2x2@2:2,4;4x1@4" >/dev/null || fail "emit_fixture"
make -s -C p -j2 >make.log 2>&1 || { cat make.log; fail "make"; }

# train NAME [ENV...]: 3 steps, output in NAME.out, weights in NAME.w.
train() {
  local name=$1
  shift
  env "$@" HEXIC_SYNC_TRACE=1 p/launch.sh --steps 3 --dump-weights "$PWD/$name.w" \
    >"$name.out" 2>&1 || { cat "$name.out"; fail "$name did not train"; }
  grep '^step ' "$name.out" | sed 's/ | [0-9.]* ms .*//' >"$name.losses"
  [ "$(wc -l <"$name.losses")" = 3 ] || { cat "$name.out"; fail "$name: not 3 step lines"; }
  grep -o 'sync trace step .*' "$name.out" >"$name.trace"
  [ "$(wc -l <"$name.trace")" = 12 ] || { cat "$name.out"; fail "$name: not 4 ranks x 3 traces"; }
}

# check_order FILE: the overlap rules above, over every trace line.
check_order() {
  awk '
    { cur = ""; waited = 0; started = 0
      for (i = 5; i <= NF; i++) {
        t = $i
        if (t == "B") { cur = "head"; continue }
        if (t == "E") { cur = "emb"; continue }
        if (t == "W") { waited = 1; continue }
        if (t ~ /^b[0-9]+$/) { cur = substr(t, 2); if (started) overlapped++; continue }
        if (t !~ /^s[0-9]+@/) { print "unknown item " t ": " $0; bad++; continue }
        at = substr(t, index(t, "@") + 1)
        if (waited || at != cur) { print "bucket " t " started at " (waited ? "GRAD_SYNC" : cur) ": " $0; bad++ }
        started = 1
      }
      if (!waited) { print "no GRAD_SYNC: " $0; bad++ } }
    END { if (!overlapped) { print "no bucket started before a later backward"; bad++ }
          exit bad > 0 }' "$1"
}

train overlap
check_order overlap.trace || fail "the overlapped run issued a sync out of order"
train blocking HEXIC_SYNC_OVERLAP=0
if check_order blocking.trace >/dev/null; then fail "check_order accepts the blocking schedule"; fi
diff overlap.losses blocking.losses || fail "losses differ between the overlapped and blocking sync"
cmp overlap.w blocking.w || fail "weights differ between the overlapped and blocking sync"
out=$(HEXIC_SYNC_OVERLAP=yes p/launch.sh --steps 1 2>&1) && fail "HEXIC_SYNC_OVERLAP=yes was accepted"
grep -q "HEXIC_SYNC_OVERLAP='yes' is neither 0 nor 1" <<<"$out" || fail "wrong message: $out"
echo "overlap: $(grep -c . overlap.trace) traces in order; losses and weights equal to the blocking path"
sed -n '1p' overlap.trace
