#!/usr/bin/env bash
# Launch across machines (issue 13, item 4): launch.sh --hostfile puts each
# plan machine's ranks on the host its line names, --dry-run prints the
# mpirun command and the rank -> host -> GPU table, NCCL_* and HEXIC_* go
# to every host, and what a hostfile, Slurm or the cluster file says never
# runs as code. slurm.sbatch runs under stand-in scontrol and srun.
#   launch_hosts.sh WORKDIR SRCDIR HEXIC
set -uo pipefail
work=$1 src=$2 hexic=$3
rm -rf "$work" && mkdir -p "$work" && cd "$work" || exit 1
fail() { echo "FAIL: $*" >&2; exit 1; }
tiny=$src/examples/models/tiny.hx
plan=$src/tests/codegen/plans/tp2_pp2_uneven.json
# Machines h100 (ranks 0, 1) and g4090 (ranks 2, 3); nothing is built.
"$hexic" "$tiny" "$src/examples/clusters/mixed-h100-4090.hx" --plan="$plan" --target=cuda \
  -o mix >/dev/null || fail "hexic --target=cuda"
grep -q "#   line 1: node h100 (2 ranks: 0 to 1)" mix/launch.sh || fail "launch.sh names no line 1"
# --transport sets the Makefile's default transport; only for --target=cuda.
"$hexic" "$tiny" "$src/examples/clusters/mixed-h100-4090.hx" --plan="$plan" --target=cuda \
  --transport=mpi -o staged >/dev/null || fail "hexic --transport=mpi"
grep -qx "TRANSPORT ?= mpi" staged/Makefile || fail "--transport=mpi: the Makefile's default is not mpi"
"$hexic" "$tiny" "$src/examples/clusters/mixed-h100-4090.hx" --plan="$plan" --target=cuda \
  --transport=nccl -o nccl >/dev/null || fail "hexic --transport=nccl"
grep -qx "TRANSPORT ?= nccl" nccl/Makefile || fail "--transport=nccl: the Makefile's default is not nccl"
for bad in "--target=cuda --transport=gloo" "--transport=mpi"; do
  # shellcheck disable=SC2086
  "$hexic" "$tiny" "$src/examples/clusters/mixed-h100-4090.hx" --plan="$plan" $bad -o bad >bad.txt 2>&1
  [ $? = 2 ] || { cat bad.txt; fail "hexic $bad: not a usage error"; }
done
grep -q "needs --target=cuda" bad.txt || { cat bad.txt; fail "--transport without --target=cuda: no message"; }
# NCCL's folders are paths make can use whichever build made this hexic: the
# ones its build found, else the toolkit's under CUDA_HOME (make text; once
# escaped as a path, the shell ran $(CUDA_HOME) and got -I/include).
dirs=$(make -s -C mix --no-print-directory --eval 'hx-nccl-dirs: ; @echo $(NCCL_INCLUDE) $(NCCL_LIB)' \
  hx-nccl-dirs CUDA_HOME=/opt/cu 2>dirs.err) || fail "make cannot print NCCL_INCLUDE and NCCL_LIB"
[ -s dirs.err ] && { cat dirs.err; fail "NCCL_INCLUDE or NCCL_LIB ran as a command"; }
[[ $dirs =~ ^/[^$]+\ /[^$]+$ ]] || fail "NCCL_INCLUDE and NCCL_LIB are not two folders: '$dirs'"
if grep -qx "TRANSPORT ?= mpi" mix/Makefile; then # built without NCCL
  [ "$dirs" = "/opt/cu/include /opt/cu/lib" ] || fail "NCCL's folders do not follow CUDA_HOME: '$dirs'"
fi
grep -q "#   line 2: node g4090 (2 ranks: 2 to 3)" mix/launch.sh || fail "launch.sh names no line 2"

# dry NAME ARGS...: launch.sh --dry-run, output in NAME.out, status in $status.
dry() {
  local name=$1
  shift
  mix/launch.sh "$@" >"$name.out" 2>"$name.err"
  status=$?
}
has() { grep -qF -- "$2" "$1.out" || { cat "$1.out" "$1.err"; fail "$1: no '$2'"; }; }

printf '# machines of the plan, in order\nnode-a.example.org slots=2\n\n10.0.0.7\n' >hosts
NCCL_DEBUG=INFO NCCL_SOCKET_IFNAME=eth0 HEXIC_TIMEOUT_S=30 dry two --hostfile hosts --dry-run --steps 3
[ $status = 0 ] || { cat two.err; fail "dry run with a hostfile: exit $status"; }
here=$PWD/mix
has two "-np 1 --host node-a.example.org $here/rank_0000 --steps 3 : -np 1 --host node-a.example.org $here/rank_0001 --steps 3 : -np 1 --host 10.0.0.7 $here/rank_0002 --steps 3 : -np 1 --host 10.0.0.7 $here/rank_0003 --steps 3"
for v in NCCL_DEBUG NCCL_SOCKET_IFNAME HEXIC_TIMEOUT_S; do has two "-x $v "; done
grep -q -- "-x NCCL_DEBUG=\|INFO" two.out && fail "values travel in the command line"
# The table: rank, program, host, GPU (local rank on that host), plan device.
awk 'NR > 2 { print $1, $2, $3, $4, $5 }' two.out >table
printf '%s\n' "0 rank_0000 node-a.example.org 0 h100:0" "1 rank_0001 node-a.example.org 1 h100:1" \
  "2 rank_0002 10.0.0.7 0 g4090:0" "3 rank_0003 10.0.0.7 1 g4090:1" | diff - table ||
  fail "wrong rank -> host -> GPU table"
[[ $(sed -n 2p two.out) =~ ^rank\ +program\ +host\ +gpu\ +plan\ device$ ]] || fail "table head"

# Both machines on one host: local ranks, so GPUs, 0 to 3.
printf 'solo\nsolo\n' >same
dry same --hostfile same --dry-run
[ "$(awk 'NR > 2 { printf "%s ", $4 }' same.out)" = "0 1 2 3 " ] || { cat same.out; fail "one host: GPUs not 0..3"; }
# launch.sh's own options after the ranks' (they were passed to the ranks, so
# `--steps 3 --dry-run` started the job), an argument with a space kept whole,
# and --help printing the header without starting anything.
dry late --steps 3 --data "a b.bin" --hostfile hosts --dry-run
[ $status = 0 ] || { cat late.err; fail "launch.sh options after the ranks': exit $status"; }
has late "--host 10.0.0.7 $here/rank_0003 --steps 3 --data a\\ b.bin"
grep -q -- "--dry-run\|--hostfile" late.out && fail "launch.sh's own options reached the ranks"
dry help --steps 3 --help
[ $status = 0 ] && grep -q "^usage: ./launch.sh \[--hostfile FILE\] \[--dry-run\] \[--help\]" help.out ||
  { cat help.out help.err; fail "launch.sh --help"; }
grep -q "^mpirun" help.out && fail "launch.sh --help ran mpirun"
# Without a hostfile everything is local and no --host is given.
dry here --dry-run
has here "localhost"
grep -q -- "--host" here.out && fail "--host without a hostfile"

# Too few lines, an unreadable file, and hostile names: refused, exit 2,
# nothing run (no file named pwned appears).
printf 'only-one\n' >short
dry short --hostfile short --dry-run
[ $status = 2 ] && grep -q "launch.sh: short names 1 host(s); the plan has 2 machine(s)" short.err ||
  { cat short.err; fail "a short hostfile was not refused"; }
dry none --hostfile /nonexistent/hosts --dry-run
[ $status = 2 ] && grep -q "cannot read the hostfile /nonexistent/hosts" none.err || fail "unreadable hostfile"
# A folder passes [ -r ]; bash's read then failed with 'Is a directory' and an
# unbound variable, exit 1.
dry folder --hostfile "$PWD" --dry-run
[ $status = 2 ] && grep -qx "launch.sh: cannot read the hostfile $PWD" folder.err ||
  { cat folder.err; fail "a folder as the hostfile"; }
n=0
for bad in '$(touch pwned)' '`touch pwned`' 'a;touch pwned' '-oProxyCommand=touch' "h'x" 'a|b' \
  'a&&b' 'host.' '../x' 'a\b' '*'; do
  n=$((n + 1))
  printf 'good\n%s slots=1\n' "$bad" >"bad$n"
  dry "bad$n" --hostfile "bad$n" --dry-run
  [ $status = 2 ] || { cat "bad$n.out"; fail "host name '$bad' accepted"; }
  grep -q "launch.sh: bad$n:2: .* is not a host name" "bad$n.err" ||
    { cat "bad$n.err"; fail "no message for '$bad'"; }
done
[ -e pwned ] && fail "a host name ran as code"
echo "hostfile: placement and table right; $n hostile host names refused"

# Hostile node names in the cluster file: printed literally in the table.
cat >hostile.hx <<'EOF'
gpu "H100" { tflops = 989; memory = 80 GiB }
node "n'$(touch pwned)`x` \"q\"" { gpu = "H100"; gpus = 2; bandwidth = 450 GB/s }
node "m;touch pwned" { gpu = "H100"; gpus = 2; bandwidth = 450 GB/s }
network { bandwidth = 25 Gbps }
EOF
"$hexic" "$tiny" hostile.hx --plan="$plan" --target=cuda -o hostile >/dev/null 2>hostile.txt ||
  { cat hostile.txt; fail "hexic on hostile node names"; }
bash -n hostile/launch.sh || fail "launch.sh syntax with hostile node names"
hostile/launch.sh --hostfile hosts --dry-run >hostile.out 2>/dev/null || fail "dry run, hostile node names"
grep -qF "n'\$(touch pwned)\`x\` \"q\":0" hostile.out || { cat hostile.out; fail "node name not printed as written"; }
grep -qF "m;touch pwned:1" hostile.out || { cat hostile.out; fail "second node name not printed as written"; }
[ -e pwned ] && fail "a node name ran as code"

# slurm.sbatch: the k-th node Slurm lists runs the plan's k-th machine, a
# host per task (SLURM_HOSTFILE, --distribution=arbitrary).
grep -qx "#SBATCH --nodes=2" mix/slurm.sbatch || fail "slurm.sbatch asks for no 2 nodes"
grep -qx "#SBATCH --ntasks=4" mix/slurm.sbatch || fail "slurm.sbatch asks for no 4 tasks"
mkdir -p fakebin
cat >fakebin/scontrol <<'EOF'
#!/usr/bin/env bash
printf '%s\n' $FAKE_NODES
EOF
cat >fakebin/srun <<'EOF'
#!/usr/bin/env bash
echo "srun $*"
echo "hosts: $(tr '\n' ' ' <"$SLURM_HOSTFILE")"
conf=${!#}
cat "$conf"
EOF
chmod +x fakebin/scontrol fakebin/srun
(cd mix && PATH="$PWD/../fakebin:$PATH" SLURM_JOB_NODELIST="gpu[1-2]" FAKE_NODES="gpu1 gpu2" \
  bash slurm.sbatch --steps 2) >slurm.out 2>&1 || { cat slurm.out; fail "slurm.sbatch failed"; }
grep -q "^srun --mpi=pmix --distribution=arbitrary --multi-prog " slurm.out || fail "srun arguments"
grep -qx "hosts: gpu1 gpu1 gpu2 gpu2 " slurm.out || { cat slurm.out; fail "tasks not placed by machine"; }
grep -qx "3 ./rank_0003 --steps 2" slurm.out || { cat slurm.out; fail "multi-prog line of rank 3"; }
(cd mix && PATH="$PWD/../fakebin:$PATH" SLURM_JOB_NODELIST=x FAKE_NODES="gpu1" bash slurm.sbatch) \
  >slurm1.out 2>&1 && fail "slurm.sbatch ran on 1 node for 2 machines"
grep -q "slurm.sbatch: the job has 1 node(s); the plan has 2 machine(s)" slurm1.out || fail "no message"
(cd mix && PATH="$PWD/../fakebin:$PATH" SLURM_JOB_NODELIST=x FAKE_NODES='gpu1 $(touch${IFS}pwned)' \
  bash slurm.sbatch) >slurm2.out 2>&1 && fail "slurm.sbatch took a hostile node name"
grep -q "is not a host name" slurm2.out || { cat slurm2.out; fail "no message for a hostile Slurm name"; }
[ -e pwned ] || [ -e mix/pwned ] && fail "a Slurm node name ran as code"
echo "slurm: 4 tasks on gpu1 gpu1 gpu2 gpu2; short and hostile node lists refused"
