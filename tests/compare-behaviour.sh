#!/bin/sh
# tests/compare-behaviour.sh -- does a change keep joulesim's behaviour?
#
#   tests/compare-behaviour.sh REF_BINARY [NEW_BINARY] [--full]
#
# Runs the same command lines with two binaries, from the repository root,
# each in its own scratch directory, and compares what they print (stdout
# and stderr, with the scratch path and wall-clock lines masked), their exit
# statuses and every HDF5 file they write (h5dump, with timestamps, run
# ids and the build's git revision masked;
# sweeps run with --jobs 1, whose row order is the points' order).  A refactor must
# leave all of it identical; issue 17's rule.  REF_BINARY is typically
# built from the commit before the change:
#
#   git worktree add /tmp/ref HEAD~1 && make -C /tmp/ref && \
#     tests/compare-behaviour.sh /tmp/ref/joulesim ./joulesim
#
# --full adds the slow scenarios (dvfs_granularity, sweep_parallelism; a few
# minutes).  Needs h5dump (Debian: hdf5-tools).  Not part of `make test`: it
# needs a second binary.  Prints one line per case and ends with
# "N same, N differ"; exit status 1 when anything differs.
set -u
REF=${1:?usage: tests/compare-behaviour.sh REF_BINARY [NEW_BINARY] [--full]}
NEW=./joulesim
FULL=0
shift
for a in "$@"; do
  case $a in
    --full) FULL=1 ;;
    *) NEW=$a ;;
  esac
done
command -v h5dump >/dev/null || { echo "compare-behaviour: needs h5dump (hdf5-tools)"; exit 2; }
case $REF in /*) ;; *) REF=$PWD/$REF ;; esac
case $NEW in /*) ;; *) NEW=$PWD/$NEW ;; esac
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
same=0; differ=0

# dump DIR OUT: a canonical text form of everything a case left in DIR
# (the binary's directory masked too: a script found beside the binary,
# tools/fidelity.lua, is recorded by its path).
dump() {
  bindir=$(cd "$(dirname "$bin")" && pwd)
  for f in $(cd "$1" && find . -type f | LC_ALL=C sort); do
    echo "== $f"
    case $f in
      *.h5)
        h5dump "$1/$f" 2>&1 | sed -e "s|$1|@DIR@|g" -e "s|$bindir|@BINDIR@|g" \
          -e 's|[0-9]\{4\}-[0-9][0-9]-[0-9][0-9]T[0-9:.]*Z|@TIME@|g' \
          -e 's|[0-9]\{8\}T[0-9.]*Z-[0-9]*|@RUNID@|g' \
          -e 's|(git [0-9a-f]*)|(git @REV@)|g' ;;
      *) sed -e "s|$1|@DIR@|g" "$1/$f" ;;
    esac
  done
}

# case NAME -- ARGS...: run "BINARY ARGS" with @OUT@ replaced by the case's
# scratch directory.
case_() {
  name=$1; shift 2
  for side in ref new; do
    bin=$REF; [ $side = new ] && bin=$NEW
    d=$T/$side/$name; mkdir -p "$d/out"
    set -- "$@"
    args=""
    for a in "$@"; do
      a=$(printf '%s' "$a" | sed "s|@OUT@|$d/out|g")
      args="$args '$a'"
    done
    eval "\"$bin\" $args" >"$d/stdout" 2>"$d/stderr"
    echo "exit $?" >"$d/status"
    { sed -e "s|$d/out|@OUT@|g" -e "s|$bin|@BIN@|g" "$d/stdout" "$d/stderr" |
        sed -e "s|(git [0-9a-f]*)|(git @REV@)|" |
        grep -vE '^(wall|elapsed)|[0-9.]+ s wall|took [0-9.]+ ?s|M=[0-9]+ +[0-9.]+ s$'
      cat "$d/status"; dump "$d/out"; } >"$d/all"
  done
  if cmp -s "$T/ref/$name/all" "$T/new/$name/all"; then
    echo "same   $name"; same=$((same+1))
  else
    echo "DIFFER $name"; differ=$((differ+1))
    diff "$T/ref/$name/all" "$T/new/$name/all" | head -20
  fi
}

P=tests/data/profiles
case_ version -- --version
case_ help -- --help
case_ run-help -- run --help
case_ gpus -- gpus
case_ gpus-a100 -- gpus A100-SXM4-40GB
case_ gpus-unknown -- gpus NOPE-GPU
case_ quickstart -- run scenarios/quickstart.lua @OUT@/q.h5
case_ quickstart-seed -- run --seed 7 scenarios/quickstart.lua @OUT@/q.h5 small
case_ perseus -- run scenarios/perseus_emulation.lua @OUT@/p.h5 small
case_ stragglers -- run scenarios/stragglers.lua @OUT@/s.h5 small
case_ validate-scen -- run scenarios/validate_profile.lua $P @OUT@/v.h5 quick
case_ dvfs-small -- run scenarios/dvfs_granularity.lua @OUT@/d.h5 small
case_ sweep-small -- run --jobs 1 scenarios/sweep_parallelism.lua @OUT@/w.h5 small
case_ validate -- validate $P/gpt3-175b+a100_sxm_bf16.csv --gpu A100-SXM4-40GB
case_ validate-out -- validate $P/bloom+a40_bf16.csv --gpu A40 --out @OUT@/v.h5
case_ validate-bad -- validate $P/nope.csv --gpu A40
case_ trace-help -- trace --help
case_ trace-gen -- trace gen --model gpt3-1.3b --dp 2 --tp 2 --pp 2 -o @OUT@/t.h5
case_ trace-info -- trace info tests/data/traces/two_rank_rank0.json tests/data/traces/two_rank_rank1.json
case_ trace-import -- trace import tests/data/traces/two_rank_rank0.json tests/data/traces/two_rank_rank1.json -o @OUT@/i.h5
case_ trace-kineto -- trace info tests/data/traces/a100_2rank_nccl_rank0.json.gz
case_ trace-chakra -- trace info tests/data/traces/pytorch_rank0.0.et
case_ trace-export -- trace export --chrome @OUT@/e.json --iterations 2 tests/data/traces/two_rank_rank0.json tests/data/traces/two_rank_rank1.json
case_ trace-bad -- trace gen --model nope -o @OUT@/x.h5
case_ fidelity-help -- fidelity --help
case_ fidelity-study -- fidelity --only kernel-dvfs-study
case_ fidelity-traces -- fidelity --only traces
case_ bench-help -- bench --help
case_ trace-gen-help -- trace gen --help
case_ validate-help -- validate --help
if [ $FULL = 1 ]; then
  case_ dvfs-full -- run scenarios/dvfs_granularity.lua @OUT@/d.h5
  case_ sweep-full -- run --jobs 1 scenarios/sweep_parallelism.lua @OUT@/w.h5
  case_ fidelity-all -- fidelity --out @OUT@/f.h5
fi
echo "$same same, $differ differ"
[ $differ -eq 0 ]
