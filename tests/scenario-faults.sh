#!/bin/sh
# tests/scenario-faults.sh -- fault injection at the I/O boundary
# (io/fault.h, docs/fault-injection.md), end to end.
#
# For each command below: run it once with JOULESIM_FAULT_LOG=1 to count
# its guarded calls (file reads and writes, HDF5 driver calls, op-array
# allocations), then again with JOULESIM_FAULT=N for N = 1 .. count (every
# N up to $FAULT_DENSE, then $FAULT_SAMPLES more evenly spaced ones and the
# last: deterministic, and the script stays short), each under `timeout`.
# Every run must exit 0 or 1 (never a signal, a timeout or a usage error),
# must really have failed its N-th call (the log says so), on 1 must print
# exactly one error line (a Lua script's error line may be followed by its
# stack traceback), must leave no temporary file, and its output must be
# the previous version byte for byte or valid: a results file opens and
# holds its old rows (then only complete new ones), a native trace is
# either the previous file or the complete new one (byte for byte the
# fault-free output, which `trace info` reads).  The HDF5 outputs are kept
# and checked together at the end (h5py when there, else joulesim itself).
#
# Run from the repository root with $JOULESIM set to the binary; under
# `make asan` the binary is the ASan one and LeakSanitizer fails any run
# that leaks (its report is more lines on stderr and a non-zero status).
set -u
J=${JOULESIM:-./joulesim}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fails=0
DENSE=${FAULT_DENSE:-100}
SAMPLES=${FAULT_SAMPLES:-25}
LIMIT=60 # seconds per run, far above any of these: a hang is a failure
mkdir "$T/keep"

bad() { echo "FAIL $*"; fails=$((fails + 1)); }

# HDF5 1.10 itself leaks a few blocks when a read fails while it loads an
# object header into its metadata cache (H5C_protect), renames the open
# objects of a deleted link (H5G_name_replace) or frees the storage of a
# deleted object (H5O_delete); docs/fault-injection.md.  Those leaks are
# not joulesim's: LeakSanitizer ignores exactly those allocation stacks
# (seen whole only with the slow unwinder); any other leak fails the run.
# No effect on a build without sanitizers.
printf 'leak:H5C_protect\nleak:H5G_name_replace\nleak:H5O_delete\nleak:H5O_create\n' >"$T/lsan.supp"
export LSAN_OPTIONS="${LSAN_OPTIONS:+$LSAN_OPTIONS:}suppressions=$T/lsan.supp:print_suppressions=0"
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}fast_unwind_on_malloc=0"

PY=""
for p in python3 /usr/bin/python3; do
  if command -v "$p" >/dev/null 2>&1 && "$p" -c 'import h5py' 2>/dev/null; then
    PY=$p; break
  fi
done

# ---- inputs ------------------------------------------------------------------

# An Nsight Systems export (the tables and columns the importer reads),
# built with Python's sqlite3 or the sqlite3 shell.
NSYS_SQL="
CREATE TABLE StringIds (id INTEGER NOT NULL PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER NOT NULL, streamId INTEGER NOT NULL, correlationId INTEGER, shortName INTEGER NOT NULL, demangledName INTEGER);
CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME (start INTEGER NOT NULL, end INTEGER NOT NULL, eventClass INTEGER NOT NULL, globalTid INTEGER, correlationId INTEGER, nameId INTEGER NOT NULL);
CREATE TABLE TARGET_INFO_GPU (vmId INTEGER NOT NULL, id INTEGER NOT NULL, name TEXT, busLocation TEXT, totalMemory INTEGER);
INSERT INTO TARGET_INFO_GPU VALUES (0, 0, 'NVIDIA H100 80GB HBM3', '0000:18:00.0', 85899345920);
INSERT INTO StringIds VALUES (1, 'ampere_sgemm_128x64_nn'), (2, 'vectorized_elementwise_kernel'), (3, 'cudaLaunchKernel');
INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES (900, 950, 0, 1, 11, 3), (2900, 2950, 0, 1, 12, 3), (4900, 4950, 0, 1, 13, 3);
INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (1000, 2000, 0, 7, 11, 1, 1), (3000, 3500, 0, 7, 12, 2, 2), (5000, 6000, 0, 7, 13, 1, 1);
"
NSYS=""
if command -v python3 >/dev/null 2>&1 &&
   python3 -c "import sqlite3, sys; c = sqlite3.connect(sys.argv[1]); c.executescript(sys.argv[2]); c.commit()" \
     "$T/report.sqlite" "$NSYS_SQL" 2>/dev/null; then
  NSYS=$T/report.sqlite
elif command -v sqlite3 >/dev/null 2>&1 &&
     printf '%s\n' "$NSYS_SQL" | sqlite3 "$T/report.sqlite" 2>/dev/null; then
  NSYS=$T/report.sqlite
fi

# The first three rows of table "runs" of arg[1], and two more (append).
cat >"$T/first.lua" <<'EOF'
local js = require "joulesim"
local r = js.results(arg[1], "runs", { mode = "append" })
for i = 1, 3 do r:append{ i = i, energy_j = 10.0 * i, label = "old" } end
r:close()
EOF
cat >"$T/append.lua" <<'EOF'
local js = require "joulesim"
local r = js.results(arg[1], "runs", { mode = "append" })
for i = 1, 2 do r:append{ i = 100 + i, energy_j = 1.5 * i, label = "appended" } end
r:close()
EOF
# Prints "TABLE ROWS" for each table name given after the file (the
# check without h5py: opening a table reads its schema and row count).
cat >"$T/rows.lua" <<'EOF'
local js = require "joulesim"
for k = 2, #arg do
  local r = js.results(arg[1], arg[k], { mode = "append" })
  print(arg[k] .. " " .. r:rows())
  r:close()
end
EOF
# A small sweep: 4 points on a 4-GPU cluster, 2 workers.
cat >"$T/sweep.lua" <<'EOF'
local js = require "joulesim"
js.sweep{
  grid = { tp = { 1, 2 }, seed = { 1, 2 } }, jobs = 2,
  out = arg[1], table = "sw", progress = false,
  run = function(p)
    local c = js.cluster{ gpu = "A100-SXM4-80GB", gpus = 4 }
    local w = js.gpt{ model = "gpt3-125m", tp = p.tp, dp = 4 // p.tp,
                      microbatches = 2, seq_len = 512 }
    local r = js.simulate{ cluster = c, workload = w, seed = p.seed }
    return { time_s = r.iteration_time_s, energy_j = r.energy_per_iteration_j }
  end,
}
EOF
# A measured profile, one stage of the shared GPT-3 one (so that the
# validate tables are small).
awk -F, 'NR == 1 || $1 == 0' tests/data/profiles/gpt3-175b+a100_sxm_bf16.csv \
  >"$T/stage0.csv"

# ---- the loop -----------------------------------------------------------------

no_temp() { # no temporary (dot) file left in directory $1
  for f in "$1"/.[!.]* "$1"/..?*; do
    if [ -e "$f" ]; then echo "temporary file left: $f" >"$T/check"; return 1; fi
  done
}

# keep NAME FILE RC N: FILE, unless it is the previous version $PREV, goes
# to the final check as keep/NAME-N-RC.h5.
keep() {
  [ -f "$2" ] || return 0
  cmp -s "$2" "$PREV" && return 0
  cp "$2" "$T/keep/$1-$4-$3.h5"
}

# faults NAME PREP CHECK -- command...: PREP (a shell function) restores the
# inputs before every run; CHECK RC N verifies what it can at once (and
# keeps HDF5 outputs for the end).
faults() {
  name=$1; prep=$2; check=$3; shift 4
  $prep
  if ! JOULESIM_FAULT_LOG=1 "$@" >"$T/out" 2>"$T/log"; then
    bad "$name: fails without a fault"; tail -5 "$T/log"; return
  fi
  count=$(sed -n 's/^joulesim fault\[[0-9]*\]: \([0-9]*\) .*/\1/p' "$T/log" |
          sort -n | tail -1)
  if [ -z "$count" ]; then
    bad "$name: no guarded call logged (does $J read JOULESIM_FAULT_LOG?)"
    return
  fi
  kinds=$(sed -n 's/^joulesim fault\[[0-9]*\]: [0-9]* \([a-z0-9]*\) .*/\1/p' \
            "$T/log" | sort | uniq -c | awk '{printf "%s%s %s", s, $1, $2; s=", "}')
  step=1
  [ "$count" -gt "$DENSE" ] && step=$(( (count - DENSE + SAMPLES - 1) / SAMPLES ))
  n=1; runs=0; errs=0; h5leak=0; nfail0=$fails
  while [ "$n" -le "$count" ]; do
    $prep
    JOULESIM_FAULT=$n JOULESIM_FAULT_LOG=1 timeout $LIMIT "$@" \
      >"$T/out" 2>"$T/err"
    rc=$?
    runs=$((runs + 1))
    # HDF5's own error-path leak (above) also makes it say so when it
    # shuts down, on two lines: counted, not taken for the error.
    grep -q '^HDF5: infinite loop closing library' "$T/err" && h5leak=$((h5leak + 1))
    # The error: stderr without the fault log and, after a Lua script's
    # error line, without its stack traceback.
    grep -v '^joulesim fault\[' "$T/err" |
      sed -e '/^HDF5: infinite loop closing library$/{N;d;}' \
          -e '/^stack traceback:$/,$d' >"$T/msg"
    if [ "$rc" -ne 0 ] && [ "$rc" -ne 1 ]; then
      bad "$name N=$n: exit status $rc"; tail -20 "$T/msg"
    elif [ "$rc" -eq 1 ] && [ "$(wc -l <"$T/msg")" -ne 1 ]; then
      bad "$name N=$n: $(wc -l <"$T/msg") lines on stderr, want 1"
      tail -20 "$T/msg"
    elif [ "$rc" -eq 1 ] && ! grep -q '[^ ]' "$T/msg"; then
      bad "$name N=$n: an empty error line"
    elif [ "$name" != sweep ] && ! grep -q "^joulesim fault\[[0-9]*\]: $n .*<- injected\$" "$T/err"; then
      bad "$name N=$n: the fault did not fire"
    elif ! $check "$rc" "$n"; then
      bad "$name N=$n (exit $rc): $(head -c 600 "$T/check")"
      cat "$T/msg"
    fi
    [ "$rc" -eq 1 ] && errs=$((errs + 1))
    [ $((fails - nfail0)) -ge 5 ] && { echo "  (stopping $name)"; break; }
    if [ "$n" -lt "$DENSE" ] || [ "$n" -eq "$count" ]; then
      n=$((n + 1))
    else
      n=$((n + step)); [ "$n" -gt "$count" ] && n=$count
    fi
  done
  extra=""
  [ "$h5leak" -gt 0 ] && extra=", $h5leak with HDF5's own error-path leak"
  echo "ok $name: $count guarded calls ($kinds); $runs runs, $errs failed cleanly$extra"
}

# 1. A scenario appending to an existing results file (3 rows, +2).
"$J" run "$T/first.lua" "$T/r0.h5" || bad "results: the first rows"
PREV=$T/r0.h5
prep_results() { rm -f "$T/r.h5"; cp "$T/r0.h5" "$T/r.h5"; }
check_results() { no_temp "$T" && keep results "$T/r.h5" "$1" "$2"; }
faults results prep_results check_results -- "$J" run "$T/append.lua" "$T/r.h5"

# 2-4. trace import of a Kineto and an Nsight Systems trace, and trace gen,
# each over an existing native trace.
mkdir "$T/n"
"$J" trace gen --model gpt3-125m --tp 1 --pp 2 --dp 1 --microbatches 2 \
  --seq-len 512 -o "$T/prev.h5" >/dev/null || bad "native: the previous trace"
prep_native() { cp "$T/prev.h5" "$T/n/t.h5"; }
# After a success, byte for byte the fault-free output; after a failure,
# the previous file, untouched (both read by `trace info` below).
check_native() {
  no_temp "$T/n" || return 1
  if [ "$1" -eq 0 ] && ! cmp -s "$T/n/t.h5" "$T/ref.h5"; then
    echo "exit 0 but not the complete new trace" >"$T/check"
    return 1
  fi
  if [ "$1" -ne 0 ] && ! cmp -s "$T/n/t.h5" "$T/prev.h5"; then
    echo "failed, and the previous trace was changed" >"$T/check"
    return 1
  fi
}
"$J" trace info "$T/prev.h5" >/dev/null || bad "native: trace info of the previous trace"

K0=tests/data/traces/two_rank_rank0.json
K1=tests/data/traces/two_rank_rank1.json
"$J" trace import "$K0" "$K1" -o "$T/ref.h5" >/dev/null &&
  "$J" trace info "$T/ref.h5" >/dev/null || bad "import-kineto: the reference"
faults import-kineto prep_native check_native -- \
  "$J" trace import "$K0" "$K1" -o "$T/n/t.h5"

if [ -n "$NSYS" ]; then
  "$J" trace import "$NSYS" -o "$T/ref.h5" >/dev/null &&
    "$J" trace info "$T/ref.h5" >/dev/null || bad "import-nsys: the reference"
  faults import-nsys prep_native check_native -- \
    "$J" trace import "$NSYS" -o "$T/n/t.h5"
else
  echo "skip import-nsys (neither python3 nor sqlite3 to build the database)"
fi

GEN="--model gpt3-125m --tp 2 --pp 2 --dp 1 --microbatches 2 --seq-len 512"
"$J" trace gen $GEN -o "$T/ref.h5" >/dev/null &&
  "$J" trace info "$T/ref.h5" >/dev/null || bad "gen: the reference"
faults gen prep_native check_native -- "$J" trace gen $GEN -o "$T/n/t.h5"

# 5. ... then `trace info` of the file gen wrote: a reader leaves it as it was.
cp "$T/ref.h5" "$T/n/g.h5"
check_info() {
  cmp -s "$T/n/g.h5" "$T/ref.h5" ||
    { echo "the file changed" >"$T/check"; return 1; }
}
faults info true check_info -- "$J" trace info "$T/n/g.h5"

# ... and `trace export` of it: the Chrome JSON timeline is the complete
# fault-free one or absent (written to a temporary file, then renamed).
"$J" trace export --chrome "$T/ref.json" "$T/n/g.h5" >/dev/null ||
  bad "export: the reference"
prep_export() { rm -f "$T/n/e.json"; }
check_export() {
  no_temp "$T/n" || return 1
  if [ "$1" -eq 0 ] && ! cmp -s "$T/n/e.json" "$T/ref.json"; then
    echo "exit 0 but not the complete timeline" >"$T/check"; return 1
  fi
  if [ "$1" -ne 0 ] && [ -e "$T/n/e.json" ]; then
    echo "failed, and left a timeline" >"$T/check"; return 1
  fi
}
faults export prep_export check_export -- \
  "$J" trace export --chrome "$T/n/e.json" "$T/n/g.h5"

# ... and `trace export --h5` of it into the results file of step 1: the
# power timeline appears whole or not at all, and the file's rows stay.
PREV=$T/r0.h5
prep_export_h5() { rm -f "$T/x.h5"; cp "$T/r0.h5" "$T/x.h5"; }
check_export_h5() { no_temp "$T" && keep timeline "$T/x.h5" "$1" "$2"; }
faults export-h5 prep_export_h5 check_export_h5 -- \
  "$J" trace export --h5 "$T/x.h5" --run zeus --policy zeus "$T/n/g.h5"

# 6. Profile validation writing its three tables into an existing file.
VAL="$T/stage0.csv --gpu A100-SXM4-80GB --fit none"
"$J" validate $VAL --out "$T/v0.h5" >/dev/null || bad "validate: the previous file"
PREV=$T/v0.h5
prep_validate() { rm -f "$T/v.h5"; cp "$T/v0.h5" "$T/v.h5"; }
check_validate() { no_temp "$T" && keep validate "$T/v.h5" "$1" "$2"; }
faults validate prep_validate check_validate -- "$J" validate $VAL --out "$T/v.h5"

# 7. A sweep with 2 workers (faults in the parent and in the workers: each
# process counts its own calls, so N need not fire in a given run).
PREV=/dev/null
prep_sweep() { rm -f "$T/s.h5"; }
check_sweep() { no_temp "$T" && keep sweep "$T/s.h5" "$1" "$2"; }
faults sweep prep_sweep check_sweep -- "$J" run --jobs 2 "$T/sweep.lua" "$T/s.h5"

# ---- the kept HDF5 outputs ------------------------------------------------------

kept=$(ls "$T/keep" | wc -l)
if [ -n "$PY" ]; then
  "$PY" - "$T/keep" >"$T/check" 2>&1 <<'EOF' || { bad "kept outputs:"; cat "$T/check"; }
import os, sys, h5py
d = sys.argv[1]
bad = []
def s(x):
    return x.decode() if isinstance(x, bytes) else x
for name in sorted(os.listdir(d)):
    kind, n, rc = name[:-3].split("-")
    try:
        with h5py.File(os.path.join(d, name), "r") as f:
            res = f["results"]
            if kind == "timeline":
                rows = res["runs"][:]
                assert len(rows) == 3, len(rows)
                tl = f["timelines"]["zeus"][:] if "timelines" in f and \
                    "zeus" in f["timelines"] else None
                # A failure after the timeline was linked (the last
                # flush) may leave it: then whole, like a success's.
                assert tl is not None or rc == "1", rc
                assert tl is None or (len(set(tl["gpu"])) == 4 and
                                      (tl["power_w"] > 0).all()), tl
            elif kind == "results":
                rows = res["runs"][:]
                assert 3 <= len(rows) <= 5 and (rc == "1" or len(rows) == 5), len(rows)
                for k, r in enumerate(rows):
                    want = ((k + 1, 10.0 * (k + 1), "old") if k < 3 else
                            (98 + k, 1.5 * (k - 2), "appended"))
                    got = (int(r["i"]), float(r["energy_j"]), s(r["label"]))
                    assert got == want, (k, got, want)
            elif kind == "validate":
                for t in res:
                    res[t][:]
                if rc == "0":
                    assert set(res) >= {"validate_points", "validate_summary",
                                        "validate_model"}, list(res)
            elif kind == "sweep":
                if "sw" in res:
                    ids = [s(x) for x in res["sw"]["point_id"]]
                    assert len(ids) == len(set(ids)) <= 4, ids
                    errs = [s(e) for e in res["sw"]["error"]]
                    assert rc == "1" or (len(ids) == 4 and not any(errs)), (ids, errs)
                else:
                    assert rc == "1", list(res)
    except Exception as e:
        bad.append("%s: %r" % (name, e))
for b in bad:
    print(b)
sys.exit(1 if bad else 0)
EOF
  echo "ok kept outputs: $kept files checked with h5py"
else
  for f in "$T"/keep/*.h5; do
    [ -f "$f" ] || continue
    case $(basename "$f") in
      timeline-*) tables=runs; lo=3 ;;
      results-*-0.h5) tables=runs; lo=5 ;;
      results-*) tables=runs; lo=3 ;;
      validate-*) tables="validate_points validate_summary validate_model"; lo=0 ;;
      *) tables=sw; lo=0 ;;
    esac
    if ! "$J" run "$T/rows.lua" "$f" $tables >"$T/check" 2>&1 ||
       ! awk -v lo="$lo" '$1 == "runs" && ($2 < lo || $2 > 5) { exit 1 }' "$T/check"; then
      bad "kept output $(basename "$f"): $(cat "$T/check")"
    fi
  done
  echo "ok kept outputs: $kept files opened with $J (no h5py)"
fi

[ "$fails" -eq 0 ] || { echo "$fails failures"; exit 1; }
echo "all fault runs clean"
