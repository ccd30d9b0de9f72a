#!/bin/sh
# The documentation against the program: docs/lua-api.md names every
# function and value of the `js` module and every result field, and no
# name the module does not have (tests/lua-api-check.lua); the README's
# figures are within 10% of the commands named beside them
# (tests/readme-check.lua: scenarios/headline.lua's tables, the Kineto
# step errors of `joulesim fidelity`).
set -u
J=${JOULESIM:-./joulesim}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fails=0
fail() { echo "FAIL $1"; cat "$T/out"; fails=$((fails + 1)); }

if "$J" run tests/lua-api-check.lua docs/lua-api.md >"$T/out" 2>&1; then
  cat "$T/out"
else
  fail "docs/lua-api.md"
fi

if "$J" run scenarios/headline.lua >"$T/head" 2>"$T/out" &&
   "$J" fidelity --data tests/data --only traces/ >"$T/fid" 2>"$T/out" &&
   "$J" run tests/readme-check.lua README.md "$T/head" "$T/fid" >"$T/out" 2>&1
then
  cat "$T/out"
else
  fail "README figures"
fi

# Every --help text points only at documents the repository has (the
# main one named a "DESIGN section 10" that is not in it).
: >"$T/help"
for c in "" run gpus bench "trace" "trace gen" "trace import" "trace info" \
         "trace export" validate fidelity; do
  # shellcheck disable=SC2086
  "$J" $c --help >>"$T/help" 2>&1
done
missing=""
for d in $(grep -o 'docs/[A-Za-z0-9_.-]*\.md' "$T/help" | sort -u); do
  [ -f "$d" ] || missing="$missing $d"
done
grep -q 'DESIGN' "$T/help" && missing="$missing DESIGN"
if [ -n "$missing" ]; then
  echo "missing:$missing" >"$T/out"
  fail "--help points at documents not in the repository"
else
  echo "ok --help references ($(grep -o 'docs/[A-Za-z0-9_.-]*\.md' "$T/help" | sort -u | wc -l) documents)"
fi

[ "$fails" -eq 0 ] || exit 1
echo "all ok"
