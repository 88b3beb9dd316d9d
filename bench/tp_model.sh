#!/bin/sh
# The TP cost model of issue 18 against the one before it, on the examples:
# per case, the plan hexic chooses under each model, the TP degrees of its
# stages, and each plan's simulated iteration under both models (a plan is
# re-simulated with `hexic simulate` against the other model's cluster).
#   new model: the gpu blocks as written (no tp_efficiency: the default curve
#              of passes/cost/cost.h, e(t) = (2/3)^(log2(t)/2); cpu8 gives
#              its measured one);
#   old model: every gpu block given tp_efficiency = [1] (TP scales
#              perfectly, no layer overhead): the layers' formula hexic used
#              before issue 18, FLOPs / (t x tflops x efficiency) + TP
#              all-reduces. Both price the embedding and LM head whole on
#              every TP rank (issue 18 too; the old code divided them by t).
# Nothing is asserted; the figures are printed with a summary line.
#   usage: bench/tp_model.sh [HEXIC]   (default: build-bench/hexic, built Release)
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
. "$root/bench/release_hexic.sh"

# The old model's cluster: tp_efficiency = [1] first in every gpu block
# (a curve the file gives is dropped).
old_cluster() { # in out
  python3 - "$1" "$2" <<'P'
import re, sys
text = open(sys.argv[1]).read()
text = re.sub(r';?\s*tp_efficiency\s*=\s*\[[^\]]*\]', '', text)
text = re.sub(r'^(\s*gpu\s+"[^"]*"\s*\{)', r'\1 tp_efficiency = [1];', text, flags=re.M)
open(sys.argv[2], "w").write(text)
P
}

# "tp a,b,... | dp=N" of a plan.json: the TP degree of every stage.
degrees() {
  python3 -c 'import json,sys
p = json.load(open(sys.argv[1]))
print(",".join(str(s["tp"]) for q in p["pipelines"] for s in q["stages"]))' "$1"
}

# The iteration seconds `hexic simulate` reports for plan.json on a cluster.
resim() { # plan model cluster
  "$hexic" simulate "$1" "$2" "$3" 2>/dev/null | awk '/^iteration:/{print $2; exit}'
}

cases=0 changed=0
compare() { # name model cluster
  name=$1 model=$2 new=$3 old=$tmp/old.hx
  old_cluster "$new" "$old"
  rm -rf "$tmp/n" "$tmp/o"
  if ! "$hexic" "$model" "$new" -o "$tmp/n" >/dev/null 2>&1 ||
     ! "$hexic" "$model" "$old" -o "$tmp/o" >/dev/null 2>&1; then
    printf '%-22s no plan under one of the models\n' "$name"
    return
  fi
  dn=$(degrees "$tmp/n/plan.json") do=$(degrees "$tmp/o/plan.json")
  nn=$(resim "$tmp/n/plan.json" "$model" "$new") no=$(resim "$tmp/n/plan.json" "$model" "$old")
  on=$(resim "$tmp/o/plan.json" "$model" "$new") oo=$(resim "$tmp/o/plan.json" "$model" "$old")
  cases=$((cases + 1))
  same=same
  if [ "$dn" != "$do" ]; then same=CHANGED; changed=$((changed + 1)); fi
  printf '%-22s TP degrees %-7s new plan [%s] vs old plan [%s]\n' "$name" "$same" "$dn" "$do"
  printf '%-22s   new plan: %9s s new model, %9s s old model\n' "" "$nn" "$no"
  printf '%-22s   old plan: %9s s new model, %9s s old model   (old plan / new plan under the new model: %s)\n' \
    "" "$on" "$oo" "$(awk -v a="$on" -v b="$nn" 'BEGIN{printf "%.3fx", a / b}')"
}

ex=$root/examples
cat > "$tmp/v100.hx" <<'C'
gpu "V100" { tflops = 125; memory = 32 GiB }
node "v" { gpu = "V100"; gpus = 4; bandwidth = 16 GB/s; latency = 2 us; replicas = 2 }
network { bandwidth = 17 GB/s; latency = 50 us }
C
cat > "$tmp/m13.hx" <<'M'
model "m1.3b" { layers = 24; hidden = 2048; ffn = 5504; heads = 16; vocab = 32000; seq_len = 2048 }
train { global_batch = 32; recompute = auto }
M
echo "== TP model of issue 18 (new) against TP scaling perfectly (old)"
compare "7B case-study" "$ex/models/llama2-7b.hx" "$ex/clusters/case-study.hx"
compare "13B case-study" "$ex/models/llama2-13b.hx" "$ex/clusters/case-study.hx"
compare "7B mixed-h100-4090" "$ex/models/llama2-7b.hx" "$ex/clusters/mixed-h100-4090.hx"
compare "7B one-h200" "$ex/models/llama2-7b.hx" "$ex/clusters/one-h200.hx"
compare "13B hetero-32" "$ex/models/llama2-13b.hx" "$ex/clusters/hetero-32.hx"
compare "30B hetero-64" "$ex/models/llama-30b.hx" "$ex/clusters/hetero-64.hx"
compare "70B hetero-128" "$ex/models/llama2-70b.hx" "$ex/clusters/hetero-128.hx"
compare "1.3B 2x4 V100" "$tmp/m13.hx" "$tmp/v100.hx"
compare "tiny cpu8" "$ex/models/tiny.hx" "$ex/clusters/cpu8.hx"
echo "TP degrees changed in $changed of $cases cases"
