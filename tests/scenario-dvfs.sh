#!/bin/sh
# scenarios/dvfs_granularity.lua end to end (small models): it runs, every
# budgeted policy keeps its slowdown within the budget, the tables are all
# there, and the same seed gives the same output, bit for bit.
set -u
J=${JOULESIM:-./joulesim}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fails=0
fail() { echo "FAIL $*"; fails=$((fails + 1)); }

if "$J" run --seed 7 scenarios/dvfs_granularity.lua "$T/a.h5" small \
    >"$T/out1" 2>&1; then
  echo "ok run"
else
  fail "run (exit $?)"; cat "$T/out1"
fi
for pat in "(a) gpt3-125m" "(b) gpt3-350m" "(c) switching latency" \
           "(d) transfer" "kernel/op" "powercap" "results written"; do
  grep -q -F -- "$pat" "$T/out1" || fail "output lacks '$pat'"
done
[ -s "$T/a.h5" ] || fail "no HDF5 file"

# Granularity rows: "NAME POLICY BUDGET% SAVING% SLOWDOWN% SWITCHES ...":
# the slowdown never exceeds the budget (+ 1e-6 relative, DVFS_SLOWDOWN_TOL).
G='$1 ~ /^(iteration|pass|kernel\/name|kernel\/op|powercap)$/ && $3 ~ /%$/'
bad=$(awk "$G"' {
             b = $3; s = $5; sub(/%/, "", b); sub(/%/, "", s);
             if (s + 0 > b + 0.0001 + 1e-4) print }' "$T/out1")
[ -z "$bad" ] || fail "slowdown over budget: $bad"
rows=$(awk "$G" "$T/out1" | wc -l)
[ "$rows" -eq 26 ] || fail "expected 26 granularity rows, got $rows"

# Kernel level saves at least as much as pass level, pass as iteration (and
# per op as per name), at every budget and configuration (rows in that
# order).
nest=$(awk "$G"' {
              v = $4; sub(/%/, "", v);
              if ($1 == "iteration") it = v + 0;
              if ($1 == "pass" && v + 0 < it - 1e-9) print "pass < iteration: " $0;
              if ($1 == "pass") pa = v + 0;
              if ($1 == "kernel/name" && v + 0 < pa - 1e-9) print "kernel < pass: " $0;
              if ($1 == "kernel/name") kn = v + 0;
              if ($1 == "kernel/op" && v + 0 < kn - 1e-9) print "op < name: " $0;
            }' "$T/out1")
[ -z "$nest" ] || fail "nesting: $nest"

# (e) the study's setup: runs; under the per-kernel cap every budget-0
# plan keeps its time and kernel level saves more than pass level, which
# saves at least as much as iteration level.
if "$J" run scenarios/dvfs_granularity.lua "$T/e.h5" study >"$T/oute" 2>&1
then
  echo "ok study"
  bad=$(awk '$1 == "per-kernel" { s = $4; sub(/%/, "", s);
                                  if (s + 0 > 1e-4) print }' "$T/oute")
  [ -z "$bad" ] || fail "study: slowdown over budget 0: $bad"
  order=$(awk '$1 == "per-kernel" { v = $3; sub(/%/, "", v); x[$2] = v + 0 }
               END { if (!(x["kernel"] > x["pass"] && x["pass"] >= x["iteration"] &&
                           x["iteration"] >= 0)) print "kernel", x["kernel"],
                           "pass", x["pass"], "iteration", x["iteration"] }' "$T/oute")
  [ -z "$order" ] || fail "study: savings out of order: $order"
else
  fail "study run (exit $?)"; cat "$T/oute"
fi

"$J" run --seed 7 scenarios/dvfs_granularity.lua "$T/b.h5" small \
    >"$T/out2" 2>&1 || fail "second run"
sed "s|$T/a.h5|X|" "$T/out1" >"$T/o1"
sed "s|$T/b.h5|X|" "$T/out2" >"$T/o2"
if cmp -s "$T/o1" "$T/o2"; then echo "ok deterministic"; else
  fail "same seed, different output"; diff "$T/o1" "$T/o2" | head; fi

if /usr/bin/python3 -c "import h5py" 2>/dev/null; then
  if /usr/bin/python3 - "$T/a.h5" <<'EOF'
import sys, h5py
f = h5py.File(sys.argv[1], "r")
for t in ("granularity", "latency", "transfer", "plan_summary"):
    assert t in f["results"], t
assert len(f["results/granularity"]) == 26
assert len(f["results/latency"]) == 4
assert len(f["results/plan_summary"]) > 20
EOF
  then echo "ok h5py"; else fail "h5py tables"; fi
fi

[ "$fails" -eq 0 ]
