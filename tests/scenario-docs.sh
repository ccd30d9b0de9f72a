#!/bin/sh
# The documentation against the program: docs/lua-api.md names every
# function and value of the `js` module and every result field, and no
# name the module does not have (tests/lua-api-check.lua).
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

[ "$fails" -eq 0 ] || exit 1
echo "all ok"
