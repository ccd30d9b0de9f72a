#!/bin/sh
# js.sweep under MPI (issue 9): 300 cheap Lua points (one of them failing)
# with no MPI, with `mpirun -n 1` and with `mpirun -n 4` give the same rows
# by point_id; SIGKILL of one rank mid-sweep takes the job down, and the
# rerun skips the rows written and completes every point exactly once,
# with the same rows as the serial sweep.
#
# SKIPPED (exit 0, with a message) when mpirun, the MPI build or h5py is
# missing (a failure instead with MPI_REQUIRED=1, as in .ci/run).  It builds nothing: it uses $JOULESIM when that binary is linked
# against libmpi, else ./joulesim-mpi (make MPI=1).
set -u
PY=/usr/bin/python3
J=
for c in "${JOULESIM:-}" ./joulesim-mpi; do
  if [ -n "$c" ] && [ -x "$c" ] && ldd "$c" 2>/dev/null | grep -q libmpi; then
    J=$c
    break
  fi
done
skip() {
  if [ "${MPI_REQUIRED:-0}" = 1 ]; then echo "FAIL scenario-mpi: $1"; exit 1; fi
  echo "ok # SKIP scenario-mpi: $1"; exit 0
}
command -v mpirun >/dev/null 2>&1 || skip "no mpirun (make mpi-deps)"
[ -n "$J" ] || skip "no MPI build (make MPI=1 builds ./joulesim-mpi)"
"$PY" -c "import h5py" 2>/dev/null || skip "no h5py for $PY (make plot-deps)"

T=$(mktemp -d)
MPID=
trap '[ -n "$MPID" ] && kill -9 "$MPID" 2>/dev/null; rm -rf "$T"' EXIT
fails=0
ok() { echo "ok $1"; }
bad() { echo "FAIL $1"; [ -f "$T/out" ] && tail -20 "$T/out"; fails=$((fails+1)); }
MPIRUN="timeout 300 mpirun --oversubscribe --allow-run-as-root"

cat >"$T/sweep.lua" <<'EOF'
local js = require "joulesim"
-- This process's pid, for the test to kill one rank.
local rank = os.getenv("OMPI_COMM_WORLD_RANK") or "serial"
local f = io.open("/proc/self/stat")
local pid = f:read("n")
f:close()
f = io.open(arg[2] .. "/pid." .. rank, "w")
f:write(pid, "\n")
f:close()
local slow = tonumber(os.getenv("SWEEP_SLOW") or "0")
local log = arg[2] .. "/ran.log"
local a, b = {}, {}
for i = 1, 30 do a[i] = i end
for i = 1, 10 do b[i] = i * 0.5 end
local s = js.sweep{
  grid = { a = a, b = b, tag = { "x" } },
  out = arg[1], table = "t", jobs = 2,
  run = function(p)
    if slow > 0 then
      local t = os.clock()
      while os.clock() - t < slow do end
    end
    local l = io.open(log, "a")
    l:write(p.a, " ", p.b, "\n")
    l:close()
    if p.a == 7 and p.b == 1.5 then error("boom") end
    return { y = p.a * p.b + math.random(), k = p.a % 3, odd = p.a % 2 == 1,
             name = "p" .. p.a }
  end,
}
print(string.format("summary total=%d done=%d skipped=%d failed=%d rows=%d",
                    s.total, s.done, s.skipped, s.failed, s.rows))
EOF

# rows FILE: "N_ROWS N_UNIQUE_IDS N_ERROR_ROWS"; same A B: the rows are equal by point_id
# (NaN equal to NaN), but for run_id, which names the run that wrote each
# row (docs/sweeps.md, "Telling runs apart").
cat >"$T/rows.py" <<'EOF'
import sys, h5py
def load(p):
    with h5py.File(p, "r") as f:
        d = f["/results/t"][:]
    keep = [n for n in d.dtype.names if n != "run_id"]
    return len(d), {r["point_id"]: repr(r[keep].tolist()) for r in d}
if sys.argv[1] == "rows":
    n, rows = load(sys.argv[2])
    with h5py.File(sys.argv[2], "r") as f:
        errors = sum(1 for e in f["/results/t"]["error"] if e != b"")
    print(n, len(rows), errors)
else:
    na, a = load(sys.argv[2])
    nb, b = load(sys.argv[3])
    diff = [k for k in a if a[k] != b.get(k)]
    print("rows", na, nb, "differ", len(diff), diff[:3])
    sys.exit(0 if na == nb and not diff and set(a) == set(b) else 1)
EOF

# The reference: the MPI build outside a launcher runs the serial sweep.
"$J" run --quiet "$T/sweep.lua" "$T/serial.h5" "$T" >"$T/out" 2>&1
rc=$?
if [ "$rc" -eq 1 ] && grep -q "done=299 skipped=0 failed=1 rows=300" "$T/out"
then ok "serial sweep (no launcher): 299 rows + 1 error row, exit 1"
else bad "serial sweep: exit $rc"; fi

for n in 1 4; do
  rm -f "$T/ran.log"
  $MPIRUN -n $n "$J" run --quiet "$T/sweep.lua" "$T/mpi$n.h5" "$T" \
    >"$T/out" 2>&1
  rc=$?
  # Only rank 0 prints the summary line.
  lines=$(grep -c '^summary' "$T/out")
  if [ "$rc" -ne 0 ] && [ "$lines" -eq 1 ] &&
     grep -q "done=299 skipped=0 failed=1 rows=300" "$T/out" &&
     [ "$(wc -l <"$T/ran.log")" -eq 300 ]; then
    ok "mpirun -n $n: 300 points run once, one summary line, failure status"
  else
    bad "mpirun -n $n: exit $rc, $lines summary lines"
  fi
  if "$PY" "$T/rows.py" same "$T/serial.h5" "$T/mpi$n.h5" >"$T/out" 2>&1
  then ok "mpirun -n $n: same rows as the serial sweep"
  else bad "mpirun -n $n: rows differ from the serial sweep"; fi
done

# Kill rank 2 mid-sweep (after 40 points ran somewhere), then rerun.
rm -f "$T/ran.log" "$T/pid."*
SWEEP_SLOW=0.02 $MPIRUN -n 4 "$J" run --quiet "$T/sweep.lua" \
  "$T/kill.h5" "$T" >"$T/out1" 2>&1 &
MPID=$!
i=0
while [ "$i" -lt 3000 ]; do
  [ -f "$T/ran.log" ] && [ "$(wc -l <"$T/ran.log")" -ge 40 ] &&
    [ -s "$T/pid.2" ] && break
  sleep 0.01
  i=$((i + 1))
done
kill -9 "$(cat "$T/pid.2")" 2>/dev/null
wait "$MPID"
rc=$?
MPID=
set -- $("$PY" "$T/rows.py" rows "$T/kill.h5" 2>/dev/null)
kept=${1:-0}
kept_errors=${3:-0}
if [ "$rc" -ne 0 ] && [ "$kept" -gt 0 ] && [ "$kept" -lt 300 ] &&
   [ "$kept" -eq "${2:-x}" ]; then
  ok "rank 2 killed: the job stopped with $kept of 300 rows, no duplicates"
else
  bad "rank 2 killed: exit $rc, rows '$kept' (want between 1 and 299)"
fi
$MPIRUN -n 4 "$J" run --quiet "$T/sweep.lua" "$T/kill.h5" "$T" >"$T/out" 2>&1
rc=$?
left=$((300 - kept))
# The error row, when kept, is retried (retry_failed).
if grep -q "skipped=$((kept - kept_errors)) " "$T/out" &&
   grep -q "rows=300" "$T/out"; then
  ok "rerun skipped the $((kept - kept_errors)) good rows written"
else
  bad "rerun: exit $rc, want $left points run"
fi
set -- $("$PY" "$T/rows.py" rows "$T/kill.h5" 2>/dev/null)
if [ "${1:-0}" -eq 300 ] && [ "${2:-0}" -eq 300 ]; then
  ok "after the rerun every point has exactly one row"
else
  bad "after the rerun: ${1:-?} rows, ${2:-?} distinct points"
fi
if "$PY" "$T/rows.py" same "$T/serial.h5" "$T/kill.h5" >"$T/out" 2>&1
then ok "killed + rerun: same rows as the serial sweep"
else bad "killed + rerun: rows differ from the serial sweep"; fi

# Errors stop every rank (none waits forever): rank 0 cannot create the
# file; rank 2 builds other points than rank 0.
cat >"$T/bad.lua" <<'EOF'
local js = require "joulesim"
local g = { 1, 2, 3, 4, 5, 6 }
if os.getenv("OMPI_COMM_WORLD_RANK") == "2" then g[3] = 33 end
-- (the grid is the same size: rank 2 differs in a value only)
js.sweep{ grid = { a = g }, out = arg[1], table = "t", jobs = 1,
          run = function(p) return { y = p.a } end }
EOF
$MPIRUN -n 4 "$J" run --quiet "$T/bad.lua" "$T/no/such/dir.h5" >"$T/out" 2>&1
rc=$?
if [ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] &&
   grep -q "MPI rank 3: rank 0 stopped the sweep: .*cannot create" "$T/out"
then ok "rank 0 cannot write: every rank stops with its message"
else bad "rank 0 cannot write: exit $rc"; fi
$MPIRUN -n 4 "$J" run --quiet "$T/bad.lua" "$T/bad.h5" >"$T/out" 2>&1
rc=$?
if [ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] &&
   grep -q "MPI rank 2: its 6 points differ from rank 0's (6 points)" "$T/out" &&
   grep -q "MPI rank 1: rank 0 stopped the sweep: MPI rank 2: its 6" "$T/out"
then ok "a rank with other points: every rank stops, naming it"
else bad "ranks with other points: exit $rc"; fi

[ "$fails" -eq 0 ]
