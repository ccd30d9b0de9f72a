#!/bin/sh
# Runs every GTest binary in $1 (TAP output) and every scenario test
# (tests/scenario-*.sh, given the joulesim binary $2), then prints the total
# as "N passed, N failed".  Exit status 1 when anything failed.
dir=$1
bin=$2
pass=0
fail=0
log=$(mktemp)
trap 'rm -f "$log"' EXIT
for t in "$dir"/test-*; do
  [ -x "$t" ] || continue
  name=$(basename "$t")
  "$t" --tap >"$log" 2>&1
  rc=$?
  p=$(grep -c '^ok ' "$log")
  f=$(grep -c '^not ok ' "$log")
  if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then f=1; fi
  pass=$((pass + p))
  fail=$((fail + f))
  if [ "$f" -ne 0 ]; then
    echo "FAIL $name (exit $rc)"
    grep -v '^ok ' "$log" | tail -40
  else
    echo "ok   $name ($p)"
  fi
done
for s in tests/scenario-*.sh; do
  [ -f "$s" ] || continue
  name=$(basename "$s")
  if JOULESIM="$bin" sh "$s" >"$log" 2>&1; then
    pass=$((pass + 1))
    echo "ok   $name"
  else
    fail=$((fail + 1))
    echo "FAIL $name"
    tail -40 "$log"
  fi
done
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
