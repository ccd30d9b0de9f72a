#!/bin/sh
# tests/kill-loop.sh [INTERRUPTS] -- the kill-and-resume loop of issue 27
# (docs/sweeps.md, "Interrupts and durability").  Not run by `make test`:
# 500 interrupts take about an hour on a shared 2-core machine.
#
# Runs js.sweep over two sweeps: "fast" (5,000 points, rows as fast as
# the writer goes; not more, because the writer's cost per row grows with
# the table: 3,000 rows took 1.0 s and 12,000 rows 33 s on the loaded
# development machine, before issue 27 as after) and "slow" (100 points of
# ~20 ms each, 2 workers),
# into a fresh file each round.  Each round interrupts the sweep 3-10
# times, each at a random instant within 1.5 s of its start, with SIGKILL,
# SIGTERM or SIGINT in turn, sent to joulesim alone (its workers must follow it); after every
# interrupt, h5py (/usr/bin/python3) must read the whole table, or the
# file must not exist yet.  Then the sweep is resumed to completion, and
# the table must hold exactly one row per point, with the right values.
# Prints one line per problem and the counts at the end; exit status 1
# when any interrupt left a file h5py could not read, a row was lost or
# duplicated, a resume failed, or a worker outlived its sweep.
#
#   JOULESIM=./joulesim sh tests/kill-loop.sh 500
#
# KILL_LOOP_DIR keeps the files of failed rounds there (default: none).
set -u
J=${JOULESIM:-./joulesim}
N=${1:-500}
PY=/usr/bin/python3
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
KEEP=${KILL_LOOP_DIR:-}
if ! "$PY" -c 'import h5py' 2>/dev/null; then
  echo "kill-loop: $PY lacks h5py (make plot-deps)"; exit 2
fi
J=$(cd "$(dirname "$J")" && pwd)/$(basename "$J")

cat >"$T/fast.lua" <<'EOF'
local js = require "joulesim"
local pts = {} for i = 1, 5000 do pts[i] = { i = i } end
js.sweep{ points = pts, out = arg[1], jobs = 2, progress = false,
  run = function(p) return { y = p.i * 2, label = "row " .. p.i } end }
EOF
cat >"$T/slow.lua" <<'EOF'
local js = require "joulesim"
local pts = {} for i = 1, 100 do pts[i] = { i = i } end
js.sweep{ points = pts, out = arg[1], jobs = 2, progress = false,
  run = function(p)
    local x = 0
    for k = 1, 400000 do x = x + k % 7 end
    return { y = p.i * 2, label = "row " .. p.i, x = x }
  end }
EOF
# check.py FILE [N]: reads the whole table; with N, checks one row per
# point 1..N with y = 2 i.  Prints "ok ROWS", "none" (no file or no
# table yet) or the problem.
cat >"$T/check.py" <<'EOF'
import collections, os, sys
import h5py
path = sys.argv[1]
if not os.path.exists(path):
    print("none"); sys.exit(0)
try:
    with h5py.File(path, "r") as f:
        if "results" not in f or "sweep" not in f["results"]:
            print("none"); sys.exit(0)
        d = f["results/sweep"][:]
except Exception as e:
    print("unreadable: %s" % e); sys.exit(1)
if len(sys.argv) > 2:
    n = int(sys.argv[2])
    ids = collections.Counter(d["point_id"])
    dup = [k for k, v in ids.items() if v > 1]
    want = set(("i=%d" % i).encode() for i in range(1, n + 1))
    lost = want - set(ids)
    wrong = [r["point_id"] for r in d if r["error"] != b"" or
             r["y"] != 2 * int(r["point_id"][2:])]
    if dup or lost or wrong or len(d) != n:
        print("rows %d: %d duplicated %s, %d lost %s, %d wrong %s" %
              (len(d), len(dup), dup[:3], len(lost), sorted(lost)[:3],
               len(wrong), wrong[:3]))
        sys.exit(1)
print("ok %d" % len(d))
EOF

rand() { # rand MAX: a number in 0 .. MAX-1
  od -An -N4 -tu4 /dev/urandom | awk -v m="$1" '{ print $1 % m }'
}

interrupts=0; unreadable=0; bad_rounds=0; rounds=0; resume_fail=0; strays=0
n_kill=0; n_term=0; n_int=0; early=0
sig_i=0
while [ "$interrupts" -lt "$N" ]; do
  rounds=$((rounds + 1))
  if [ $((rounds % 3)) -eq 0 ]; then kind=slow; n=100; max_ms=1500
  else kind=fast; n=5000; max_ms=1500; fi
  f=$T/r.h5
  rm -f "$T"/r.h5 "$T"/.r.h5*
  k=$(( $(rand 8) + 3 ))
  round_bad=0
  while [ "$k" -gt 0 ] && [ "$interrupts" -lt "$N" ]; do
    k=$((k - 1))
    case $((sig_i % 3)) in
      0) sig=KILL ;; 1) sig=TERM ;; 2) sig=INT ;;
    esac
    sig_i=$((sig_i + 1))
    ms=$(rand "$max_ms")
    "$J" run "$T/$kind.lua" "$f" >"$T/out" 2>&1 &
    pid=$!
    sleep "$(awk -v m="$ms" 'BEGIN { printf "%.3f", m / 1000 }')"
    if kill -s "$sig" "$pid" 2>/dev/null; then
      interrupts=$((interrupts + 1))
      case $sig in KILL) n_kill=$((n_kill + 1)) ;; TERM) n_term=$((n_term + 1)) ;;
                   INT) n_int=$((n_int + 1)) ;; esac
    else
      early=$((early + 1)) # it had finished: the resume below checks it
    fi
    wait "$pid" 2>/dev/null
    sleep 0.2
    if pgrep -f "$T/$kind.lua" >/dev/null 2>&1; then
      echo "round $rounds: a worker outlived joulesim ($sig)"
      strays=$((strays + 1)); round_bad=1
      for p in $(pgrep -f "$T/$kind.lua"); do kill -KILL "$p"; done
    fi
    res=$("$PY" "$T/check.py" "$f")
    case $res in
      ok*|none) ;;
      *) echo "round $rounds ($kind, SIG$sig after $ms ms): $res"
         unreadable=$((unreadable + 1)); round_bad=1 ;;
    esac
  done
  if ! "$J" run "$T/$kind.lua" "$f" >"$T/out" 2>&1; then
    echo "round $rounds ($kind): the resume failed: $(head -c 300 "$T/out")"
    resume_fail=$((resume_fail + 1)); round_bad=1
  fi
  res=$("$PY" "$T/check.py" "$f" "$n")
  case $res in
    ok*) ;;
    *) echo "round $rounds ($kind): after the resume: $res"; round_bad=1 ;;
  esac
  if [ "$round_bad" -ne 0 ]; then
    bad_rounds=$((bad_rounds + 1))
    [ -n "$KEEP" ] && mkdir -p "$KEEP" && cp "$f" "$KEEP/round-$rounds.h5"
  fi
  if [ $((rounds % 20)) -eq 0 ]; then
    echo "... $rounds rounds, $interrupts interrupts ($n_kill KILL, $n_term TERM, $n_int INT), $unreadable unreadable, $bad_rounds bad rounds"
  fi
done
echo "kill-loop: $rounds rounds, $interrupts interrupts ($n_kill SIGKILL, $n_term SIGTERM, $n_int SIGINT; $early more came after the sweep had finished)"
echo "kill-loop: $unreadable unreadable by h5py after an interrupt, $resume_fail resumes failed, $strays stray workers, $bad_rounds rounds with a lost, duplicated or wrong row or another problem"
[ "$bad_rounds" -eq 0 ]
