#!/bin/sh
# Issue 28, "no traps": inputs that used to pass silently and are not
# errors now (the errors are rows i28-* of tests/bad-input/cases.tsv).
#   - js.results: a float arriving in an int column promotes it (rows kept);
#   - reruns appending to one table are told apart (run_id, run:<id>);
#   - Ctrl-C in a sweep says how many rows are safe, and a rerun resumes;
#   - slowdown = 1 warns that it allows +100% (0.01 does not warn);
#   - js.gpt's default reference GPU on an H100 cluster warns (and moves
#     the result: the figure is printed), an explicit gpu does not;
#   - fixed{ sm = 1207 } on an A100 is labelled with the clock that runs;
#   - MFU is against the datasheet dense BF16 peak (989 TFLOP/s, H100).
# The h5py/pandas parts are skipped (with a message) when /usr/bin/python3
# lacks them (make plot-deps).
set -u
J=${JOULESIM:-./joulesim}
case $J in /*) ;; *) J=$PWD/$J ;; esac
PY=/usr/bin/python3
T=$(mktemp -d)
SPID=
trap '[ -n "$SPID" ] && kill -9 "$SPID" 2>/dev/null; rm -rf "$T"' EXIT
fails=0
ok() { echo "ok $1"; }
bad() { echo "FAIL $1"; [ -f "$T/out" ] && cat "$T/out"; fails=$((fails+1)); }
check() { # check NAME EXPECTED_STATUS PATTERN -- command...
  name=$1; want=$2; pat=$3; shift 4
  "$@" >"$T/out" 2>&1
  got=$?
  if [ "$got" -ne "$want" ]; then bad "$name: exit $got, want $want"; return; fi
  if [ -n "$pat" ] && ! grep -q -- "$pat" "$T/out"; then
    bad "$name: output lacks '$pat'"; return
  fi
  ok "$name"
}
# absent NAME PATTERN: the last check's output must not contain PATTERN.
absent() {
  if grep -q -- "$2" "$T/out"; then bad "$1: output has '$2'"; else ok "$1"; fi
}
has_py() { [ -x "$PY" ] && "$PY" -c "import $1" 2>/dev/null; }
cd "$T" || exit 1

# ---- js.results: int column, then a float ---------------------------------
cat >promote.lua <<'EOF'
local js = require "joulesim"
local r = js.results(arg[1], "t")
for _, b in ipairs{ 0, 7, 0.01, 2 } do r:append{ budget = b, name = "x" } end
print("rows", r:rows())
r:close()
EOF
check results-promote 0 "rows	4" -- "$J" run promote.lua p.h5
check results-rerun 0 "rows	8" -- "$J" run promote.lua p.h5
if has_py pandas && has_py h5py; then
  # Rows 0, 7, 0.01, 2 twice, as float64; two runs, four rows each, each
  # with its run:<id> attribute (start, joulesim, scenario).
  check results-promote-rows 0 "promote-ok" -- "$PY" -c "
import h5py, pandas as pd
with h5py.File('p.h5', 'r') as f:
    d = f['results/t']
    assert d.dtype['budget'] == 'float64', d.dtype
    df = pd.DataFrame(d[:])
    runs = {k[4:]: [s.decode() if isinstance(s, bytes) else s for s in v]
            for k, v in d.attrs.items() if k.startswith('run:')}
assert list(df.budget) == [0, 7, 0.01, 2] * 2, list(df.budget)
df['run_id'] = df['run_id'].str.decode('utf-8')
sizes = df.groupby('run_id').size()
assert list(sizes) == [4, 4], sizes
assert sorted(runs) == sorted(sizes.index), (runs, sizes)
for info in runs.values():
    assert info[0].startswith('started 20') and info[0].endswith('Z'), info
    assert info[1].startswith('joulesim '), info
    assert info[2].endswith('promote.lua'), info
print('promote-ok')"
else
  echo "skip results-promote-rows ($PY lacks h5py or pandas: make plot-deps)"
fi

# ---- Ctrl-C in a sweep ----------------------------------------------------
cat >slow.lua <<'EOF'
local js = require "joulesim"
local pts = {}
for i = 1, 40 do pts[#pts + 1] = i end
local s = js.sweep{ grid = { i = pts }, out = arg[1], jobs = 2,
  run = function(p)
    local t = os.clock()
    while os.clock() - t < 0.1 do end
    return { x = p.i }
  end }
print("done", s.done, "skipped", s.skipped, "failed", s.failed)
EOF
# Its own process group (setsid), so that SIGINT reaches the whole sweep
# as Ctrl-C does; sent once the first rows are on disk.
setsid "$J" run slow.lua s.h5 >int.out 2>&1 &
SPID=$!
n=0
while [ $n -lt 200 ] && [ ! -s s.h5 ]; do sleep 0.05; n=$((n+1)); done
sleep 0.3
kill -INT -"$SPID" 2>/dev/null
wait "$SPID"
st=$?
SPID=
cp int.out out
if [ "$st" -ne 1 ]; then
  bad "sweep-ctrl-c: exit $st, want 1"
elif ! grep -q "interrupted by Interrupt: [0-9]* of 40 points have their row; table 'sweep' in s.h5 holds [0-9]* rows, all on disk; run the same script again to resume" out; then
  bad "sweep-ctrl-c: no interrupt message"
else
  ok sweep-ctrl-c
fi
safe=$(sed -n 's/.* holds \([0-9]*\) rows.*/\1/p' int.out)
check sweep-ctrl-c-resume 0 "failed	0" -- "$J" run slow.lua s.h5
grep -q "skipped	${safe:-x}	" out && ok sweep-ctrl-c-resumed-from-safe ||
  bad "sweep-ctrl-c-resumed-from-safe: the rerun skipped other than the $safe safe rows"
if has_py h5py; then
  check sweep-ctrl-c-rows 0 "rows 40 40 0" -- "$PY" -c "
import h5py
d = h5py.File('s.h5', 'r')['results/sweep'][:]
print('rows', len(d), len(set(d['point_id'])), sum(e != b'' for e in d['error']))"
fi

# ---- warnings --------------------------------------------------------------
cat >slowdown.lua <<'EOF'
local js = require "joulesim"
js.policy.kernel{ slowdown = 0.01 }
js.policy.kernel{ slowdown = 1 }
js.policy.kernel{ slowdown = 1 }
EOF
check slowdown-warning 0 "joulesim: warning: slowdown.lua:3: js.policy.kernel: slowdown = 1 is a fraction of the time: it allows +100% (for 1% write slowdown = 0.01)" -- "$J" run slowdown.lua
[ "$(grep -c 'warning' out)" -eq 1 ] && ok slowdown-warning-once ||
  bad "slowdown-warning-once: $(grep -c warning out) warnings, want 1 (0.01 silent, the same one once)"

cat >ref.lua <<'EOF'
local js = require "joulesim"
local c = js.cluster{ gpu = "H100-SXM5-80GB", gpus = 8 }
local cfg = { model = "gpt3-1.3b", tp = 8, microbatches = 4 }
local a = js.simulate{ cluster = c, workload = js.gpt(cfg) }
cfg.gpu = "H100-SXM5-80GB"
local b = js.simulate{ cluster = c, workload = js.gpt(cfg) }
print(("ref-gpu time %+.2f%% energy %+.2f%% (A100 reference vs H100)"):format(
  100 * (a.time_s / b.time_s - 1), 100 * (a.energy_j / b.energy_j - 1)))
local f = js.simulate{ cluster = js.cluster{ gpus = 1 },
                       workload = js.gpt{ model = "gpt3-125m", microbatches = 1 },
                       policy = js.policy.fixed{ sm = 1207 } }
print("label", f.policy)
local g = js.gpu("H100-SXM5-80GB")
assert(math.abs(b.mfu * g.mfu_peak_tflops - b.tflops_per_gpu) < 1e-9 * b.tflops_per_gpu)
print(("mfu %.4f peak %.0f derived %.1f"):format(b.mfu, g.mfu_peak_tflops, g.peak_tflops))
EOF
check gpt-ref-warning 0 "js.simulate: the workload was priced on A100-SXM4-80GB, js.gpt's default reference GPU, and the cluster has H100-SXM5-80GB" -- "$J" run ref.lua
[ "$(grep -c 'warning' out)" -eq 1 ] && ok gpt-ref-explicit-silent ||
  bad "gpt-ref-explicit-silent: $(grep -c warning out) warnings, want 1"
grep "ref-gpu" out
grep -q "label	fixed(sm=1200)" out && ok fixed-label-snapped || bad fixed-label-snapped
grep -q "peak 989 derived 1070.5" out && ok mfu-datasheet-peak || bad mfu-datasheet-peak
check gpus-says-mfu 0 "MFU against the datasheet dense BF16 peak, 989 TFLOP/s" -- "$J" gpus H100-SXM5-80GB

exit $fails
