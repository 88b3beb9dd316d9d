#!/usr/bin/env bash
# launch.sh and slurm.sbatch accept the rank programs' options and refuse
# every other one before anything starts (issue 24, item 11), so their list
# (codegen/emit_scripts.c's rank_options) must be the one the rank programs
# parse (rtlib/rt_exec.c's parse_args). The ranks' list is read from their
# usage: a program that runs hx_rt_main as a generated rank does
# (rt_backend_cpu) is given an option it does not know and says which it
# does. The two lists, with whether each option takes a value, must be the
# same; then each option goes through launch.sh --dry-run to the ranks (a
# value option with its value, and refused without one).
#   rank_options.sh HEXIC RANK_PROGRAM SRCDIR WORKDIR
set -uo pipefail
hexic=$1 rank_program=$2 src=$3 work=$4
rm -rf "$work" && mkdir -p "$work" && cd "$work" || exit 1
fail() { echo "FAIL: $*" >&2; exit 1; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

# "--data FILE  --steps N  --resume ..." -> one line per option: "--data
# value", "--resume flag", sorted.
options_of() {
  awk '{ for (i = 1; i <= NF; i++) if ($i ~ /^--/) {
           if (i < NF && $(i + 1) !~ /^--/) print $i, "value"; else print $i, "flag" } }' | sort
}

"$rank_program" --no-such-option >usage.txt 2>&1
grep -o "unknown or incomplete option '--no-such-option'; options: .*" usage.txt |
  sed 's/.*; options: //' | options_of >ranks.txt
[ -s ranks.txt ] || { cat usage.txt; fail "the rank program printed no options"; }

"$hexic" "$src/examples/models/tiny.hx" "$src/examples/clusters/mixed-h100-4090.hx" \
  --plan="$src/tests/codegen/plans/tp2_pp2_uneven.json" -o out >hexic.txt 2>&1 ||
  { cat hexic.txt; fail "hexic"; }
for script in launch.sh slurm.sbatch; do
  bash "out/$script" --help >"$script.help" 2>&1 || { cat "$script.help"; fail "$script --help"; }
  sed -n '/^Rank options/,/^[^ ]/p' "$script.help" | grep '^  --' | options_of >"$script.txt"
  diff ranks.txt "$script.txt" >"$script.diff" ||
    { cat "$script.diff"; fail "$script's rank options (>) are not the rank programs' (<)"; }
done

# Each option through launch.sh to every rank's command line.
n=0
while read -r option kind; do
  n=$((n + 1))
  if [ "$kind" = value ]; then
    out/launch.sh --dry-run "$option" "v$n" >"o$n.out" 2>&1 || { cat "o$n.out"; fail "launch.sh refused $option v$n"; }
    grep -q -- "rank_0003 $option v$n *\$" "o$n.out" || { cat "o$n.out"; fail "$option v$n did not reach the ranks"; }
    out/launch.sh --dry-run "$option" >"o$n.out" 2>&1 && fail "launch.sh took $option without its value"
    grep -qx "launch.sh: $option needs a value (--help lists the options)" "o$n.out" ||
      { cat "o$n.out"; fail "$option without its value: wrong message"; }
  else
    out/launch.sh --dry-run "$option" >"o$n.out" 2>&1 || { cat "o$n.out"; fail "launch.sh refused $option"; }
    grep -q -- "rank_0003 $option *\$" "o$n.out" || { cat "o$n.out"; fail "$option did not reach the ranks"; }
  fi
done <ranks.txt
echo "rank options: the ranks' $n, launch.sh's and slurm.sbatch's are the same; each reaches the ranks"
