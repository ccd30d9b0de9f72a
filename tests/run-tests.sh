#!/bin/sh
# tests/run-tests.sh DIR JOULESIM -- runs every GTest binary in DIR (TAP
# output) and every scenario test (tests/scenario-*.sh, given the joulesim
# binary JOULESIM), each under a time limit, and prints the totals.
#
# Counting:
# - a GTest case is passed ("ok N"), skipped ("ok N ... # SKIP", from
#   g_test_skip), a known bug ("not ok N ... # TODO", from
#   g_test_incomplete: the case found a bug that is written down and not
#   fixed; counted and printed, not a failure) or failed ("not ok N"); a
#   binary that exits non-zero with no failed case (a crash, an abort
#   between cases) counts one failure;
# - a scenario script is passed (exit 0) or failed (any other exit); it is
#   skipped as a whole when it exits 0 after printing "ok # SKIP reason"
#   (scenario-mpi.sh without MPI), and the checks it skipped while passing
#   -- lines "skip NAME (reason)" or TAP "ok N ... # SKIP" -- are counted
#   as skipped, the script itself still as one pass;
# - a binary or script still running after TEST_TIMEOUT seconds (default
#   600) is killed, with its children, and counts as failed.
#
# The last two lines are "K skipped" (with ", J known bugs" when there are
# any) and "N passed, N failed" (the form the README promises).  Exit status 1 when anything failed.
dir=$1
bin=$2
limit=${TEST_TIMEOUT:-600}
pass=0
fail=0
skip=0
todo=0
log=$(mktemp)
trap 'rm -f "$log"' EXIT

# run_limited CMD...: CMD under the time limit, output in $log; sets rc
# (124 when the limit killed it).
run_limited() {
  timeout -k 10 "$limit" "$@" >"$log" 2>&1
  rc=$?
  [ "$rc" -eq 137 ] && rc=124
}

for t in "$dir"/test-*; do
  [ -x "$t" ] || continue
  name=$(basename "$t")
  run_limited "$t" --tap
  p=$(grep '^ok ' "$log" | grep -vc '# SKIP')
  s=$(grep '^ok ' "$log" | grep -c '# SKIP')
  k=$(grep '^not ok ' "$log" | grep -c '# TODO')
  f=$(grep '^not ok ' "$log" | grep -vc '# TODO')
  if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then f=1; fi
  pass=$((pass + p))
  fail=$((fail + f))
  skip=$((skip + s))
  todo=$((todo + k))
  grep '^not ok .*# TODO' "$log" | sed "s/^/known bug in $name: /"
  if [ "$rc" -eq 124 ]; then
    echo "FAIL $name (killed after $limit s)"
    grep -v '^ok ' "$log" | tail -40
  elif [ "$f" -ne 0 ]; then
    echo "FAIL $name (exit $rc)"
    grep -v '^ok ' "$log" | tail -40
  elif [ "$s" -ne 0 ]; then
    echo "ok   $name ($p, $s skipped)"
  else
    echo "ok   $name ($p)"
  fi
done

for sc in tests/scenario-*.sh; do
  [ -f "$sc" ] || continue
  name=$(basename "$sc")
  run_limited env JOULESIM="$bin" sh "$sc"
  if [ "$rc" -eq 0 ] && grep -q '^ok # SKIP' "$log"; then
    skip=$((skip + 1))
    echo "skip $name: $(grep -m1 '^ok # SKIP' "$log" | sed 's/^ok # SKIP *//')"
  elif [ "$rc" -eq 0 ]; then
    pass=$((pass + 1))
    s=$(grep -cE '^skip |^ok [0-9]+ .*# SKIP' "$log")
    skip=$((skip + s))
    if [ "$s" -ne 0 ]; then
      echo "ok   $name ($s checks skipped)"
    else
      echo "ok   $name"
    fi
  else
    fail=$((fail + 1))
    if [ "$rc" -eq 124 ]; then
      echo "FAIL $name (killed after $limit s)"
    else
      echo "FAIL $name (exit $rc)"
    fi
    tail -40 "$log"
  fi
done

if [ "$todo" -ne 0 ]; then
  echo "$skip skipped, $todo known bugs"
else
  echo "$skip skipped"
fi
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
