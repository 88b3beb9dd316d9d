#!/usr/bin/env bash
# plan.svg (codegen/svg.c): hexic -o writes it for the tiny model on a
# two-node cluster whose node name holds <&"> (the test writes it), for the
# case study, for hetero-64 and for the case study at a batch of 2M sequences
# (its lanes drawn a pixel at a time). Each must render with rsvg-convert (librsvg,
# scripts/setup.sh) to a PNG, parse with xml.etree, name every device in its
# lane, hold the hostile name escaped, and two runs must write the same bytes.
# Skipped (77) only where rsvg-convert is absent.
#   plan_svg.sh HEXIC SRCDIR WORKDIR
set -uo pipefail
hexic=$1 src=$2 work=$3
if ! command -v rsvg-convert >/dev/null; then
  echo "plan_svg: rsvg-convert not found (Debian librsvg2-bin, scripts/setup.sh): skipped"
  exit 77
fi
rm -rf "$work"
mkdir -p "$work"
cd "$work" || exit 1
fail() { echo "FAIL: $*" >&2; exit 1; }

# In .hx strings \" is a quote.
cat >hostile-cluster.hx <<'HX'
gpu "G<1>" { tflops = 0.02; memory = 4 GiB; efficiency = 1; mem_bandwidth = 10 GB/s }
node "n<&\">'x" { gpu = "G<1>"; gpus = 2; bandwidth = 5 GB/s; latency = 2 us }
node "plain" { gpu = "G<1>"; gpus = 2; bandwidth = 5 GB/s; latency = 2 us }
network { bandwidth = 1 GB/s; latency = 20 us }
HX

compile() { # NAME MODEL CLUSTER: hexic -o NAME, quietly
  "$hexic" "$1" "$2" -o "$3" >"$3.out" 2>&1 || { cat "$3.out"; fail "hexic $1 $2 -o $3"; }
}
compile "$src/examples/models/tiny.hx" hostile-cluster.hx tiny
compile "$src/examples/models/tiny.hx" hostile-cluster.hx tiny2
compile "$src/examples/models/llama2-13b.hx" "$src/examples/clusters/case-study.hx" case &
compile "$src/examples/models/llama2-13b.hx" "$src/examples/clusters/case-study.hx" case2 &
wait
compile "$src/examples/models/llama2-13b.hx" "$src/examples/clusters/hetero-64.hx" h64
# A batch of 2M sequences on the case study: some 270,000 recorded events,
# every lane denser than a block a pixel (13 MB of blocks before they were
# drawn a pixel at a time). The rank programs are refused (exit 2, too many
# schedule rows); plan.svg and trace.json are written before them.
sed 's/global_batch = [0-9]*/global_batch = 2097152/' "$src/examples/models/llama2-13b.hx" >big.hx
for d in big big2; do
  "$hexic" big.hx "$src/examples/clusters/case-study.hx" -o "$d" >"$d.out" 2>&1
  [ -f "$d/plan.svg" ] || { cat "$d.out"; fail "hexic big.hx -o $d wrote no plan.svg"; }
done
cmp big/plan.svg big2/plan.svg || fail "two runs of the 2M-sequence batch wrote different plan.svg"
grep -q '8 lanes with more blocks than pixels drawn a pixel at a time' big/plan.svg ||
  fail "big/plan.svg does not say its dense lanes are drawn a pixel at a time"

cmp tiny/plan.svg tiny2/plan.svg || fail "two runs of the tiny plan wrote different plan.svg"
cmp case/plan.svg case2/plan.svg || fail "two runs of the case study wrote different plan.svg"
grep -qF '![plan](plan.svg)' case/report.md || fail "report.md does not show plan.svg"

for d in tiny case h64 big; do
  rsvg-convert "$d/plan.svg" -o "$d.png" || fail "rsvg-convert $d/plan.svg"
  [ "$(head -c 4 "$d.png" | od -An -c | tr -d ' ')" = '211PNG' ] || fail "$d.png is not a PNG"
  [ "$(stat -c %s "$d/plan.svg")" -lt 2000000 ] || fail "$d/plan.svg is over 2 MB"
  # Every device's lane says "RANK NAME", as trace.json names its track.
  python3 - "$d" <<'PY' || fail "$d/plan.svg"
import json, sys, xml.etree.ElementTree as ET
d = sys.argv[1]
root = ET.parse(d + "/plan.svg").getroot()
texts = ["".join(t.itertext()) for t in root.iter("{http://www.w3.org/2000/svg}text")]
trace = json.load(open(d + "/trace.json", encoding="utf-8"))["traceEvents"]
lanes = [e["args"]["name"] for e in trace if e.get("name") == "thread_name"]
missing = [n for n in lanes[:64] if not any(t == n or t.startswith(n + " (") for t in texts)]
if missing:
    sys.exit("no lane for " + ", ".join(missing))
print(f"{d}: {len(texts)} texts, {len(lanes)} lanes named")
PY
done

# The hostile node name: escaped in the file, itself once parsed.
grep -qF "n&lt;&amp;&quot;&gt;&apos;x" tiny/plan.svg || fail "the node name is not XML-escaped"
grep -qF 'n<&">' tiny/plan.svg && fail "the node name is in plan.svg unescaped"
python3 - <<'PY' || fail "the node name does not parse back"
import xml.etree.ElementTree as ET
texts = ["".join(t.itertext()) for t in ET.parse("tiny/plan.svg").getroot().iter()]
assert "n<&\">'x" in texts, "node box"
assert any(t.startswith("0 n<&\">'x:0") for t in texts), "lane 0"
PY
echo "plan_svg: ok"
