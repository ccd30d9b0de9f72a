#!/bin/sh
# tests/check-layering.sh -- `make check-layering`: the rooms' order and who
# may print (docs/architecture.md, "The rooms").
#
#   io  <-  sim  <-  models  <-  traces  <-  run  <-  lua  <-  cli
#
# 1. A file in a room includes headers only from its own room and the rooms
#    left of it ("models/dvfs/" is part of models/).
# 2. Only cli/ prints: no printf, puts, g_print, g_printerr, g_message,
#    g_warning or fprintf/fputs to stdout/stderr in the library; it reports
#    through GError or a callback.  (Writing to a FILE * the caller opened
#    is not printing.)
# 3. The C tests simulate through run/, not lua/: a test may include
#    lua/bind.h to run a Lua script, and no other lua/ header.
# 4. No header below lua/ names lua_State: the library cannot declare a
#    binding function (the Lua side's declarations live in lua/).
# Prints "layering: ok", or each violation with its file and line and exit
# status 1.
set -u
cd "$(dirname "$0")/.."
ROOMS="io sim models traces run lua cli"

LOG=${TMPDIR:-/tmp}/layering.$$
: >"$LOG"
violation() { # violation FILE MESSAGE
  echo "layering: $2"; echo x >>"$LOG"
}

rank() { # rank ROOM: its position in $ROOMS (0 when unknown)
  i=1
  for r in $ROOMS; do [ "$r" = "$1" ] && { echo $i; return; }; i=$((i+1)); done
  echo 0
}

for room in $ROOMS; do
  mine=$(rank "$room")
  for f in $(find "$room" -name '*.[ch]' | LC_ALL=C sort); do
    grep -nE '^[[:space:]]*#[[:space:]]*include[[:space:]]*"[a-z]+/' "$f" |
    while IFS= read -r line; do
      inc=$(printf '%s' "$line" | sed -E 's/.*#[[:space:]]*include[[:space:]]*"([a-z]+)\/.*/\1/')
      theirs=$(rank "$inc")
      if [ "$theirs" -eq 0 ] || [ "$theirs" -gt "$mine" ]; then
        violation "$f" "$f:${line%%:*}: $room/ may not include $inc/ (${line#*:})"
      fi
    done
  done
done

for room in $ROOMS; do
  [ "$room" = cli ] && continue
  grep -nE '(^|[^_a-z])(printf|puts|putchar|g_print|g_printerr|g_message|g_warning)[[:space:]]*\(|f(printf|puts)[[:space:]]*\([^;]*\b(stdout|stderr)\b' \
      $(find "$room" -name '*.c' | LC_ALL=C sort) /dev/null |
  grep -vE '^[^:]+:[0-9]+:[[:space:]]*(/?\*|//)' |
  while IFS= read -r line; do
    violation "${line%%:*}" "${line%%:*}:$(printf '%s' "${line#*:}" | cut -d: -f1): only cli/ prints"
  done
done

for room in $ROOMS; do
  case $room in lua|cli) continue ;; esac
  grep -n 'lua_State' $(find "$room" -name '*.h' | LC_ALL=C sort) /dev/null |
  while IFS= read -r line; do
    violation "${line%%:*}" "${line%%:*}:$(printf '%s' "${line#*:}" | cut -d: -f1): a header below lua/ names lua_State"
  done
done

grep -nE '#[[:space:]]*include[[:space:]]*"lua/' tests/*.c tests/fuzz/*.c 2>/dev/null |
  grep -v '"lua/bind.h"' |
  while IFS= read -r line; do
    violation "${line%%:*}" "${line%%:*}: a C test includes lua/ beyond bind.h (${line#*:*:})"
  done

if [ -s "$LOG" ]; then
  echo "layering: $(wc -l <"$LOG") violation(s)"
  rm -f "$LOG"
  exit 1
fi
rm -f "$LOG"
echo "layering: ok"
