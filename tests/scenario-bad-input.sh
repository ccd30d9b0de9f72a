#!/bin/sh
# The bad-input catalogue (issue 8, "Reliability" item 7): every row of
# tests/bad-input/cases.tsv runs the joulesim binary ($JOULESIM) on one kind
# of bad input and must end in a clean refusal.  docs/bad-input.md lists
# the cases; this script is the only harness (one table, one loop).
#
# Each case runs under `timeout 20` in an empty work directory of its own
# (the current directory of the command; its outputs go there) and passes
# when all of these hold:
#   - no hang (status 124) and no crash (status > 128, or "Segmentation",
#     "AddressSanitizer", "LeakSanitizer", "runtime error", "HDF5-DIAG",
#     a GLib CRITICAL/WARNING or "core dumped" in the output);
#   - the exit status is the expected one (1 user error, 2 usage error;
#     0 only for the few control rows that check a fixture is valid);
#   - stderr starts with "joulesim" (the CLI's message, not a library's
#     dump) and matches the row's extended regular expression, which names
#     the place: the file, the option, the argument or the column;
#   - a Lua case's message (its first line, not the traceback) carries
#     its script line ("ID.lua:2:");
#   - no partial output: the work directory is exactly as the row's setup
#     left it (same names, same checksums), so a file the command was asked
#     to write is absent, or unchanged if it existed, and no temporary file
#     is left behind.  At the end the fixture directories are checked the
#     same way (nothing written next to the inputs), and every case id
#     must appear in docs/bad-input.md.
#
# Table format (tab-separated; '#' lines and blank lines are comments):
#   id  status  setup  regex  command
# status: 0, 1 or 2, optionally "/todo" (a known bug reported but not yet
# fixed: reported as TAP "# TODO", not counted as a failure; a todo row
# that passes is reported so the mark can be removed).  setup: a shell
# command run in the work directory before the snapshot, or "-".  regex:
# "-" only on control rows (status 0) that need no message.
# command: a shell command, or "lua:CODE": CODE becomes line 2 of
# scripts/ID.lua (line 1 is `local js = require "joulesim"` plus the
# helpers below) and runs as `$J run scripts/ID.lua`.
# Variables for setup and command: $J (the binary, absolute), $F (the
# checked-in fixtures, tests/bad-input), $FX (fixtures generated below),
# $DATA (tests/data), $RO (a directory nobody may write to; rows that use
# it are skipped when none exists).  In Lua: F, FX, DATA, RO, and
# small() -> a 1-GPU cluster and a gpt3-125m workload with 1 microbatch.
# BAD_INPUT_TABLE=FILE runs another table (to try the harness itself on
# rows that must fail each check).
set -u
J=${JOULESIM:-./joulesim}
case $J in /*) ;; *) J=$PWD/$J ;; esac
F=$PWD/tests/bad-input
DATA=$PWD/tests/data
TABLE=${BAD_INPUT_TABLE:-$F/cases.tsv}
T=$(mktemp -d)
trap 'chmod -R u+w "$T" 2>/dev/null; rm -rf "$T"' EXIT
FX=$T/fx
mkdir -p "$FX" "$T/scripts" "$T/work"
export J F FX DATA
if [ ! -x "$J" ]; then
  echo "Bail out! no joulesim binary at $J"
  exit 1
fi

# ---- fixtures made at test time (small ones; checked-in ones are in $F) ----

# Kineto JSON: one kernel event with the given fields.
kineto() {
  printf '{"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, %s"args": {"device": 0, "stream": 7}}]}\n' "$1"
}
: >"$FX/empty.json"
head -c 300 "$DATA/traces/two_rank_rank0.json" >"$FX/truncated.json"
printf 'this is not JSON\n' >"$FX/notjson.json"
printf '{"traceEvents": 5}\n' >"$FX/wrongtype.json"
kineto '"ts": 1, "dur": -5, ' >"$FX/negdur.json"
kineto '"ts": 1, "dur": 1e999, ' >"$FX/hugeexp.json"
kineto '"ts": 1, ' >"$FX/nodur.json"
kineto '"ts": 1, "dur": "5", ' >"$FX/strdur.json"
kineto '"ts": 1, "dur": 9000000000000000, ' >"$FX/longdur.json"
kineto '"ts": 1, "dur": 4000000000000000, ' >"$FX/longdur2.json"
printf '{"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k\377", "pid": 0, "tid": 7, "ts": 1, "dur": 5, "args": {"device": 0, "stream": 7}}]}\n' >"$FX/nonutf8.json"
gzip -c "$DATA/traces/two_rank_rank0.json" | head -c 400 >"$FX/truncated.json.gz"
mkdir "$FX/dir.json"
: >"$FX/$(printf '\377')bad.json"
# Nsight Systems: the SQLite magic, then garbage.
printf 'SQLite format 3\000 and then nothing a database has\n' >"$FX/fake.sqlite"
# Native traces: text, and a generated trace cut short, and one byte
# changed (the integrity record catches both).
printf 'not an HDF5 file\n' >"$FX/text.h5"
"$J" trace gen --model gpt3-125m --microbatches 1 -o "$FX/gen.h5" >/dev/null
head -c 5000 "$FX/gen.h5" >"$FX/truncated.h5"
cp "$FX/gen.h5" "$FX/flipped.h5"
printf 'X' | dd of="$FX/flipped.h5" bs=1 seek=3000 conv=notrunc 2>/dev/null
head -c 4000 "$F/native-ok.h5" >"$FX/truncated-plain.h5"
# Chakra: garbage, truncated, a length prefix of 2^63, a cycle.
printf 'garbage' >"$FX/garbage.et"
head -c 1000 "$DATA/traces/pytorch_rank0.0.et" >"$FX/truncated.et"
printf '\377\377\377\377\377\377\377\377\377\017' >"$FX/hugelen.et"
# Two COMP nodes, each depending on the other.
printf '\003\012\0011\012\010\001\022\002k1\030\004\050\002\012\010\002\022\002k2\030\004\050\001' >"$FX/cycle.et"
# Measured profiles (CSV).
P='stage,instruction,frequency,time,energy'
K='kernel,sm_mhz,mem_mhz,time_s,energy_j'
: >"$FX/empty.csv"
printf '%s\n' "$P" >"$FX/header.csv"
printf 'stage,instruction,freq,time,energy\n0,forward,1410,0.05,23.8\n' >"$FX/wrongcol.csv"
printf '%s\n0,forward,1410,fast,23.8\n' "$P" >"$FX/nonnum.csv"
printf '%s\n0,forward,1410,-0.05,23.8\n' "$P" >"$FX/negtime.csv"
printf '%s\nk1,1410,1593,0.001,-0.2\n' "$K" >"$FX/negenergy.csv"
printf '%s\n0,forward,1410,nan,23.8\n' "$P" >"$FX/nan.csv"
printf '%s\n0,forward,1410,0.05,1e999\n' "$P" >"$FX/inf.csv"
printf '%s\n0,forward,1410,0.05,23.8\n0,forward,1410,0.05,23.8\n' "$P" >"$FX/dup.csv"
printf '%s\n0,forward,1410,0.05,23.8\n0,forward,1395,0.0' "$P" >"$FX/truncated.csv"
printf '%s\n0,forward,1e12,0.05,23.8\n' "$P" >"$FX/hugeclock.csv"
printf '%s\n-1,forward,1410,0.05,23.8\n' "$P" >"$FX/negstage.csv"
printf '%s\nk\3771,1410,1593,0.001,0.2\n' "$K" >"$FX/nonutf8.csv"
printf '%s\nk1,14\00010,1593,0.001,0.2\n' "$K" >"$FX/nul.csv"
printf '%s\n"k1,1410,1593,0.001,0.2\n' "$K" >"$FX/quote.csv"
mkdir "$FX/dir.csv"
for f in 1410 1200 1000 800 600; do
  printf 'k1,%s,1593,1e300,3e302\n' "$f"
done | { printf '%s\n' "$K"; cat; } >"$FX/degenerate.csv"
printf 'rank,time_s,energy_j\n0,-1.5,300\n' >"$FX/negrun.csv"
# Scripts and results files.
mkdir "$FX/dir.lua" "$FX/dir.h5"
printf '\033LuaT\000\031\223\r\n\032\n' >"$FX/binary.lua"
printf 'local t = {\n  1,\n' >"$FX/truncated.lua"
printf 'not an HDF5 file\n' >"$FX/text-results.h5"
printf 'local js = require "joulesim"\nlocal o = js.results(arg[1], "t")\no:append{ a = 1, policy = "max" }\no:close()\n' >"$FX/mkres.lua"
# A directory nobody may write to: chmod 555 stops everyone but root; for
# root, sysfs refuses new files.
RO=$T/ro
mkdir "$RO"
chmod 555 "$RO"
if (: >"$RO/.probe") 2>/dev/null; then
  rm -f "$RO/.probe"
  RO=/sys
  if (: >/sys/.joulesim-probe) 2>/dev/null; then
    rm -f /sys/.joulesim-probe
    RO=
  fi
fi
export RO

# Snapshot of a directory: every path, and every regular file's checksum.
snapshot() {
  (cd "$1" && find . -print | LC_ALL=C sort && find . -type f -exec cksum {} + | LC_ALL=C sort)
}
snapshot "$FX" >"$T/fx.before"
snapshot "$F" >"$T/f.before"

LUA_HEAD='local js = require "joulesim"; local F, FX, DATA, RO = arg[1], arg[2], arg[3], arg[4]; local function small() return js.cluster{ gpus = 1 }, js.gpt{ model = "gpt3-125m", microbatches = 1 } end'
CRASH='Segmentation|AddressSanitizer|LeakSanitizer|runtime error|HDF5-DIAG|-CRITICAL \*\*|-WARNING \*\*|core dumped'
TAB=$(printf '\t')

n=0 failed=0 todo=0 skipped=0 user=0 usage=0
while IFS="$TAB" read -r id want setup regex cmd; do
  case $id in ''|'#'*) continue ;; esac
  n=$((n + 1))
  echo "$id" >>"$T/ids"
  mark=
  case $want in */todo) mark=todo; want=${want%/todo} ;; esac
  case $want in 1) user=$((user + 1)) ;; 2) usage=$((usage + 1)) ;; esac
  case $cmd in *'$RO'*|*' RO'*|*'(RO'*)
    if [ -z "$RO" ]; then
      echo "ok $n $id # SKIP no unwritable directory"
      skipped=$((skipped + 1))
      continue
    fi ;;
  esac
  W=$T/work/$id
  if [ -e "$W" ]; then
    echo "not ok $n $id: duplicate id"
    failed=$((failed + 1))
    continue
  fi
  mkdir "$W"
  if [ "$setup" != "-" ] && ! (cd "$W" && eval "$setup") >"$T/setup.log" 2>&1; then
    echo "not ok $n $id: setup failed"
    sed 's/^/# /' "$T/setup.log"
    failed=$((failed + 1))
    continue
  fi
  snapshot "$W" >"$T/before"
  case $cmd in
  lua:*)
    printf '%s\n%s\n' "$LUA_HEAD" "${cmd#lua:}" >"$T/scripts/$id.lua"
    (cd "$W" && timeout 20 "$J" run "$T/scripts/$id.lua" "$F" "$FX" "$DATA" "$RO") \
      </dev/null >"$T/out" 2>"$T/err"
    got=$?
    ;;
  sandbox:*)
    printf '%s\n%s\n' "$LUA_HEAD" "${cmd#sandbox:}" >"$T/scripts/$id.lua"
    (cd "$W" && timeout 20 "$J" run --sandbox "$T/scripts/$id.lua" "$F" "$FX" "$DATA" "$RO") \
      </dev/null >"$T/out" 2>"$T/err"
    got=$?
    ;;
  *)
    (cd "$W" && eval "timeout 20 $cmd") </dev/null >"$T/out" 2>"$T/err"
    got=$?
    ;;
  esac
  snapshot "$W" >"$T/after"
  why=
  if [ "$got" -eq 124 ]; then
    why="hang (killed after 20 s)"
  elif [ "$got" -gt 128 ]; then
    why="crash (signal $((got - 128)))"
  elif LC_ALL=C grep -Eaq "$CRASH" "$T/err" "$T/out"; then
    why="crash or library noise: $(LC_ALL=C grep -Eah "$CRASH" "$T/err" "$T/out" | head -1)"
  elif [ "$got" -ne "$want" ]; then
    why="exit status $got, want $want"
  elif [ "$want" -ne 0 ] && ! head -n 1 "$T/err" | grep -aq '^joulesim'; then
    why="stderr does not start with the CLI's message"
  elif [ "$regex" != "-" ] && ! LC_ALL=C grep -Eaq -- "$regex" "$T/err"; then
    why="stderr does not match /$regex/"
  elif [ "$want" -ne 0 ] && { [ "${cmd#lua:}" != "$cmd" ] ||
                              [ "${cmd#sandbox:}" != "$cmd" ]; } &&
       ! head -n 1 "$T/err" | grep -Faq "$id.lua:2:"; then
    why="the message does not name the script line ($id.lua:2:)"
  elif ! cmp -s "$T/before" "$T/after"; then
    why="partial output: the work directory changed: $(diff "$T/before" "$T/after" | grep '^[<>]' | head -3 | tr '\n' ' ')"
  fi
  if [ -z "$why" ]; then
    if [ "$mark" = todo ]; then
      echo "ok $n $id # TODO passes now: remove the /todo mark"
    else
      echo "ok $n $id"
    fi
  elif [ "$mark" = todo ]; then
    echo "not ok $n $id: $why # TODO known bug, see docs/bad-input.md"
    todo=$((todo + 1))
  else
    echo "not ok $n $id: $why"
    sed 's/^/# /' "$T/err" | head -8
    failed=$((failed + 1))
  fi
done <"$TABLE"

snapshot "$FX" >"$T/fx.after"
snapshot "$F" >"$T/f.after"
n=$((n + 1))
if cmp -s "$T/fx.before" "$T/fx.after" && cmp -s "$T/f.before" "$T/f.after"; then
  echo "ok $n fixtures-unchanged"
else
  echo "not ok $n fixtures-unchanged: a command wrote next to its inputs"
  failed=$((failed + 1))
fi
# docs/bad-input.md is the readable catalogue: every case must be there.
n=$((n + 1))
DOC=$PWD/docs/bad-input.md
missing=$(while read -r id; do
  grep -Fq "\`$id\`" "$DOC" 2>/dev/null || printf ' %s' "$id"
done <"$T/ids")
if [ -z "$missing" ]; then
  echo "ok $n documented (docs/bad-input.md lists every case)"
else
  echo "not ok $n documented: not in docs/bad-input.md:$missing"
  failed=$((failed + 1))
fi
# The catalogue's promise (issue 8): at least 40 kinds of bad input that
# are user errors (exit status 1).
n=$((n + 1))
if [ "$user" -ge 40 ]; then
  echo "ok $n catalogue-size ($user exit-1 cases, $usage usage cases)"
else
  echo "not ok $n catalogue-size: only $user exit-1 cases"
  failed=$((failed + 1))
fi
echo "1..$n"
echo "# $n checks, $failed failed, $todo known bugs (todo), $skipped skipped"
[ "$failed" -eq 0 ]
