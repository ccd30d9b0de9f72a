#!/bin/sh
# The straggler scenario (small form) end to end through js.simulate:
# it runs, writes its table, and its figures hold: straggler-aware Perseus
# is never slower than max-and-wait (the straggler alone sets the pace) and
# never spends more energy; time grows with T'/T; Zeus saves energy.
set -u
J=${JOULESIM:-./joulesim}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fails=0
fail() { echo "FAIL $1"; cat "$T/out"; fails=$((fails + 1)); }

if "$J" run scenarios/stragglers.lua "$T/s.h5" small >"$T/out" 2>&1; then
  grep -q "^Stragglers: GPT-3 175B on A100, 4 pipelines" "$T/out" ||
    fail "scenario: no header"
  [ -s "$T/s.h5" ] || fail "scenario: no HDF5 file"
  # Rows: ratio | t e | t e saving% | t e saving%
  rows=$(grep -c '^ *1\.[0-9][0-9] |' "$T/out")
  [ "$rows" -eq 4 ] || fail "scenario: $rows rows, expected 4"
  grep '^ *1\.[0-9][0-9] |' "$T/out" | tr -d '|%+' | awk '
    { x = $1; tm = $2; em = $3; tp = $4; ep = $5; sp = $6; tz = $7; ez = $8
      if (tp > tm * (1 + 1e-6)) { print "perseus slower than max at " x; bad = 1 }
      if (ep > em) { print "perseus energy above max-and-wait at " x; bad = 1 }
      if (sp <= 0) { print "perseus saves nothing at " x; bad = 1 }
      if (ez >= em) { print "zeus saves nothing at " x; bad = 1 }
      if (NR > 1 && tm <= prev) { print "time not growing at " x; bad = 1 }
      prev = tm }
    END { exit bad }' >"$T/awk" 2>&1 || { cat "$T/awk"; fail "scenario figures"; }
  [ "$fails" -eq 0 ] && echo "ok scenario figures"
else
  fail "scenario exited with $?"
fi

# Same run twice: same bits (seeded random stragglers).
if "$J" run scenarios/stragglers.lua "$T/s2.h5" small >"$T/out2" 2>&1; then
  grep '|' "$T/out" >"$T/a"; grep '|' "$T/out2" >"$T/b"
  cmp -s "$T/a" "$T/b" || fail "scenario not deterministic"
else
  fail "second run exited with $?"
fi

[ "$fails" -eq 0 ] || exit 1
echo "all ok"
