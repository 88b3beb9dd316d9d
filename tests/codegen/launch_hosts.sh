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
# unbound variable, exit 1. A FIFO or /dev/zero was read forever, even with
# --dry-run: only a regular file is opened.
mkfifo fifo
for special in fifo /dev/zero "$PWD"; do
  timeout 10 mix/launch.sh --hostfile "$special" --dry-run >special.out 2>special.err
  status=$?
  [ $status = 124 ] && fail "launch.sh --hostfile $special hangs"
  [ $status = 2 ] && grep -qx "launch.sh: the hostfile $special is not a regular file (a folder, FIFO or device)" \
    special.err || { cat special.err; fail "$special as the hostfile: exit $status"; }
done
# Bounds: a host name of 253 characters at most and a part between dots of
# 63 (a 100000-character name was taken), empty parts refused; a hostfile
# of 16 MiB and 1000000 lines at most, its size checked before reading.
label=$(printf 'b%.0s' $(seq 64))
part=${label:1}
long=$part.$part.$part.$part # 255 characters, parts of 63
huge=$(head -c 100000 /dev/zero | tr '\0' h)
n=0
for bad in "$long" "x.$label" "$huge" 'a..b' '.a' 'a.-b' 'a-.b'; do
  n=$((n + 1))
  printf 'good\n%s\n' "$bad" >"long$n"
  dry "long$n" --hostfile "long$n" --dry-run
  [ $status = 2 ] || fail "host name of ${#bad} characters '${bad:0:70}' accepted"
  grep -q "launch.sh: long$n:2: .* \(is not a host name\|is longer than a host name may be (253 characters)\|has a part between dots longer than 63 characters\)" "long$n.err" ||
    { cat "long$n.err"; fail "no message for '${bad:0:70}'"; }
  [ "$(wc -c <"long$n.err")" -lt 300 ] || fail "the message for '${bad:0:70}' is not one short line"
done
grep -q "is longer than a host name may be (253 characters)" long1.err || fail "255 characters: wrong message"
grep -q "has a part between dots longer than 63" long2.err || fail "a 64-character part: wrong message"
printf '%s\n' "$part.$part.$part.${part:2}" "ok.$part" >fit # 253 characters; 63
dry fit --hostfile fit --dry-run
[ $status = 0 ] || { cat fit.err; fail "a 253-character host name with parts of 63 refused"; }
truncate -s 16777217 sparse
dry sparse --hostfile sparse --dry-run
[ $status = 2 ] && grep -qx "launch.sh: the hostfile sparse has 16777217 bytes; the most read is 16777216 (16 MiB)" \
  sparse.err || { cat sparse.err; fail "a hostfile over 16 MiB"; }
head -c 1000001 /dev/zero | tr '\0' '\n' >blank_lines
dry lines --hostfile blank_lines --dry-run
[ $status = 2 ] && grep -qx "launch.sh: blank_lines has more than 1000000 lines (the most read)" lines.err ||
  { cat lines.err; fail "a hostfile of 1000001 lines"; }
# 300000 lines (plus the plan's two machines first) took 24 s in a bash loop.
{ printf 'first\nsecond\n'; seq -f 'node-%g.example.org slots=8' 300000; } >big
start=$SECONDS
timeout 20 mix/launch.sh --hostfile big --dry-run >big.out 2>big.err || { cat big.err; fail "300000 lines"; }
[ $((SECONDS - start)) -le 5 ] || fail "300000 hostfile lines took $((SECONDS - start)) s"
has big "--host second $here/rank_0003"
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

# Options neither launch.sh's nor the ranks' are refused before mpirun
# starts (--dry-run=1 and --dryrun started every rank, which then refused
# them), in one line, exit 2; so are a rank option without its value, an
# option where a value should be, and ':' (mpirun's MPMD separator).
mkdir -p fakebin
printf '#!/usr/bin/env bash\ntouch "%s/mpirun.ran"\n' "$PWD" >fakebin/mpirun
chmod +x fakebin/mpirun
refused() { # refused NAME MESSAGE ARGS...: launch.sh ARGS exits 2 with MESSAGE, mpirun not run
  local name=$1 message=$2
  shift 2
  PATH="$PWD/fakebin:$PATH" dry "$name" "$@"
  [ $status = 2 ] || { cat "$name.err"; fail "launch.sh $*: exit $status, not 2"; }
  grep -qxF -- "launch.sh: $message (--help lists the options)" "$name.err" ||
    { cat "$name.err"; fail "launch.sh $*: no '$message'"; }
  [ -e mpirun.ran ] && fail "launch.sh $* started mpirun"
  [ -s "$name.out" ] && { cat "$name.out"; fail "launch.sh $* printed a command"; }
  return 0
}
refused opt1 "unknown option --dry-run=1" --steps 2 --dry-run=1
refused opt2 "unknown option --dryrun" --dryrun
refused opt3 "unknown option -n" -n 2 --dry-run
refused opt4 "stray is not an option" --steps 2 stray --dry-run
refused opt5 "--steps needs a value" --dry-run --steps
refused opt6 "--data needs a value, not the option --dry-run" --data --dry-run
refused opt7 "--data needs a value, not the option --resume" --data --resume --dry-run
refused opt8 "--hostfile needs a value" --dry-run --hostfile
refused opt9 "--data ':': mpirun would split its command there; write ./:" --data : --dry-run
echo "launch.sh: 9 wrong command lines refused before mpirun"

# Every argument reaches every rank as given: a stand-in mpirun runs each
# app context (Open MPI's MPMD syntax: -np 1 [--host H] PROGRAM ARGS, ':'
# between) and rank programs that write their arguments.
cat >fakebin/mpirun <<'EOF'
#!/usr/bin/env bash
rank=0
while [ $# -gt 0 ]; do
  case $1 in
  -x) shift 2 ;;
  --allow-run-as-root | --oversubscribe) shift ;;
  -np)
    shift 2
    if [ "$1" = --host ]; then shift 2; fi
    app=()
    while [ $# -gt 0 ] && [ "$1" != : ]; do app+=("$1"); shift; done
    [ $# -eq 0 ] || shift
    OMPI_COMM_WORLD_RANK=$rank "${app[@]}" || exit
    rank=$((rank + 1)) ;;
  *) echo "stand-in mpirun: unexpected $1" >&2; exit 1 ;;
  esac
done
EOF
chmod +x fakebin/mpirun
# The arguments: a space, quotes, %t and %o (srun expands them), '%',
# backslashes (one at the end), a newline, a tab, an empty string, a value
# that starts with '-', and UTF-8.
nl=$'\n' tab=$'\t'
hostile_args=(--data '/tmp/my data.bin' --checkpoint-dir "ck 'q' \"d\" %t%o %% \\n \\${nl}x${tab}y\\"
  --dump-weights '' --init-from '-w.safetensors' --steps 2 --resume --emulate --checkpoint-every 7
  --reschedule --checkpoint-overwrite --dump-weights 'é %t')
printf '%s\0' "${hostile_args[@]}" >args.want
cp -r mix job
for r in 0 1 2 3; do
  printf '#!/usr/bin/env bash\nout="%s/argv.${OMPI_COMM_WORLD_RANK:-$SLURM_PROCID}"\n: >"$out"\n%s\n' \
    "$PWD" '[ $# -eq 0 ] || printf "%s\0" "$@" >"$out"' >"job/rank_000$r"
  chmod +x "job/rank_000$r"
done
PATH="$PWD/fakebin:$PATH" job/launch.sh "${hostile_args[@]}" >mpi.out 2>&1 ||
  { cat mpi.out; fail "launch.sh under the stand-in mpirun"; }
for r in 0 1 2 3; do
  cmp -s args.want "argv.$r" || { od -c "argv.$r" | head; fail "launch.sh: rank $r did not get the arguments as given"; }
done
rm -f argv.*
echo "launch.sh: every rank got ${#hostile_args[@]} arguments as given"

# slurm.sbatch: the k-th node Slurm lists runs the plan's k-th machine, a
# host per task (SLURM_HOSTFILE, --distribution=arbitrary). The stand-in
# srun (stub_srun.py) reads the multi-prog file as srun documents it and
# runs each task's line; the arguments must reach every rank as given (they
# were written into the line unquoted: '/tmp/my data.bin' became two, %t
# the task id).
grep -qx "#SBATCH --nodes=2" mix/slurm.sbatch || fail "slurm.sbatch asks for no 2 nodes"
grep -qx "#SBATCH --ntasks=4" mix/slurm.sbatch || fail "slurm.sbatch asks for no 4 tasks"
cat >fakebin/scontrol <<'EOF'
#!/usr/bin/env bash
printf '%s\n' $FAKE_NODES
EOF
cat >fakebin/srun <<EOF
#!/usr/bin/env bash
echo "srun \$*"
echo "hosts: \$(tr '\n' ' ' <"\$SLURM_HOSTFILE")"
exec python3 "$src/tests/codegen/stub_srun.py" "\$@"
EOF
chmod +x fakebin/scontrol fakebin/srun
slurm() { # slurm OUT NODES ARGS...: slurm.sbatch in job/ under the stand-ins
  local out=$1 nodes=$2
  shift 2
  (cd job && PATH="$PWD/../fakebin:$PATH" SLURM_JOB_NODELIST="gpu[1-2]" FAKE_NODES=$nodes \
    bash slurm.sbatch "$@") >"$out" 2>&1
}
slurm slurm.out "gpu1 gpu2" "${hostile_args[@]}" || { cat slurm.out; fail "slurm.sbatch failed"; }
grep -q "^srun --mpi=pmix --distribution=arbitrary --multi-prog " slurm.out || fail "srun arguments"
grep -qx "hosts: gpu1 gpu1 gpu2 gpu2 " slurm.out || { cat slurm.out; fail "tasks not placed by machine"; }
for r in 0 1 2 3; do
  [ -e "argv.$r" ] || { cat slurm.out; fail "slurm.sbatch: task $r did not run"; }
  cmp -s args.want "argv.$r" ||
    { cat slurm.out; od -c "argv.$r" | head -n 20; fail "slurm.sbatch: rank $r did not get the arguments as given"; }
done
find job -name '.hexic-args*' | grep -q . && fail "slurm.sbatch left its argument file"
rm -f argv.*
slurm slurm0.out "gpu1 gpu2" || { cat slurm0.out; fail "slurm.sbatch without arguments"; }
[ -e argv.3 ] && [ ! -s argv.3 ] || { od -c argv.3; fail "slurm.sbatch without arguments: rank 3 got some"; }
slurm slurm3.out "gpu1 gpu2" --dry-run --steps 2 && fail "slurm.sbatch took --dry-run"
grep -qx "slurm.sbatch: unknown option --dry-run (--help lists the options)" slurm3.out ||
  { cat slurm3.out; fail "slurm.sbatch --dry-run: wrong message"; }
grep -q "^srun" slurm3.out && fail "slurm.sbatch ran srun with an unknown option"
slurm slurm4.out "gpu1 gpu2" --help || fail "slurm.sbatch --help"
grep -qx "  --checkpoint-dir DIR" slurm4.out || { cat slurm4.out; fail "slurm.sbatch --help lists no rank options"; }
grep -q "SBATCH\|^srun" slurm4.out && { cat slurm4.out; fail "slurm.sbatch --help printed more than its header"; }
slurm slurm1.out "gpu1" && fail "slurm.sbatch ran on 1 node for 2 machines"
grep -q "slurm.sbatch: the job has 1 node(s); the plan has 2 machine(s)" slurm1.out || fail "no message"
slurm slurm2.out 'gpu1 $(touch${IFS}pwned)' && fail "slurm.sbatch took a hostile node name"
grep -q "is not a host name" slurm2.out || { cat slurm2.out; fail "no message for a hostile Slurm name"; }
[ -e pwned ] || [ -e job/pwned ] && fail "a Slurm node name ran as code"
echo "slurm: 4 tasks on gpu1 gpu1 gpu2 gpu2, ${#hostile_args[@]} arguments as given; wrong options," \
  "short and hostile node lists refused"
