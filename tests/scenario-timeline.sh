#!/bin/sh
# Power timelines for every policy family: js.simulate{ timeline = { out =,
# run = } } writes /timelines/<run>, which h5py and pandas read as a
# power-over-time series per GPU whose integral is the run's energy
# (checked per GPU, with one policy of each family: the baseline, locked
# clocks, a planned one, the pipeline ones, and a straggler-aware Perseus
# that re-plans during the run); and `trace export --policy` takes the
# pipeline policies with the Lua run's figures.
set -u
J=${JOULESIM:-./joulesim}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fails=0
fail() { echo "FAIL $1"; [ -f "$T/out" ] && cat "$T/out"; fails=$((fails + 1)); }

cat >"$T/tl.lua" <<'LUA'
local js = require "joulesim"
local c = js.cluster{ gpu = "A100-SXM4-80GB", gpus = 8 }
local w = js.gpt{ model = "gpt3-125m", tp = 2, pp = 2, dp = 2,
                  microbatches = 4, seq_len = 512 }
local runs = {
  { "max", js.policy.max() },
  { "fixed", js.policy.fixed{ sm = 1200 } },
  { "kernel", js.policy.kernel{ slowdown = 0.02 } },
  { "perseus", js.policy.perseus{ slowdown = 0.05 } },
  { "envpipe", js.policy.envpipe{} },
  { "zeus", js.policy.zeus{} },
  { "perseus_sa", js.policy.perseus{ slowdown = 0.05, straggler_aware = true },
    { { gpu = 1, slowdown = 1.5, from_iteration = 2 } } },
}
local out = js.results(arg[1], "energy")
for _, p in ipairs(runs) do
  local r = js.simulate{ cluster = c, workload = w, policy = p[2],
                         iterations = 3, stragglers = p[3],
                         timeline = { out = arg[1], run = p[1] } }
  for g, pg in ipairs(r.per_gpu) do
    out:append{ run = p[1], gpu = g - 1, energy_j = pg.energy_j,
                time_s = r.time_s }
  end
  print(p[1], string.format("%.9e", r.energy_j))
end
out:close()
-- A name already there is refused unless replace = true.
local ok, err = pcall(js.simulate, { cluster = c, workload = w,
                      timeline = { out = arg[1], run = "max" } })
assert(not ok and err:find("timeline 'max' exists", 1, true), err)
js.simulate{ cluster = c, workload = w, iterations = 3,
             timeline = { out = arg[1], run = "max", replace = true } }
for _, bad in ipairs{ { out = arg[1] }, { run = "x" },
                      { out = arg[1], run = "x", path = "t.json" },
                      { path = "t.json", replace = true } } do
  local ok2, e2 = pcall(js.simulate, { cluster = c, workload = w,
                                       timeline = bad })
  assert(not ok2 and e2:find("js.simulate{timeline}", 1, true), e2)
end
print("errors ok")
LUA

if "$J" run "$T/tl.lua" "$T/t.h5" >"$T/out" 2>&1; then
  grep -v "^errors ok" "$T/out" >"$T/runs"
  grep -q "^errors ok" "$T/out" || fail "timeline errors"
  [ "$fails" -eq 0 ] && echo "ok timeline runs and errors"
else
  fail "timeline script exited with $?"
fi

if [ ! -f "$T/t.h5" ]; then
  fail "no timeline file"
elif /usr/bin/python3 -c "import h5py, pandas" 2>/dev/null; then
  if /usr/bin/python3 - "$T/t.h5" >"$T/py" 2>&1 <<'PY'
import sys, h5py, numpy as np, pandas as pd
f = h5py.File(sys.argv[1], "r")
e = pd.DataFrame(f["/results/energy"][:])
e["run"] = e["run"].str.decode("utf-8")
runs = sorted(e["run"].unique())
assert sorted(f["timelines"]) == runs, (list(f["timelines"]), runs)
bad = 0
for run in runs:
    ds = f["/timelines/" + run]
    assert list(ds.attrs["columns"]) == ["gpu", "time_s", "power_w", "sm_mhz"]
    assert list(ds.attrs["units"]) == ["", "s", "W", "MHz"]
    assert ds.attrs["n_gpus"] == 8 and ds.attrs["interpolation"] == "previous"
    d = pd.DataFrame(ds[:])
    assert sorted(d.gpu.unique()) == list(range(8)), run
    for g, s in d.groupby("gpu"):
        row = e[(e.run == run) & (e.gpu == g)].iloc[0]
        assert (np.diff(s.time_s.values) >= 0).all(), (run, g)
        assert s.time_s.values[-1] <= row.time_s
        # Each sample holds until the next, the last until the run's end.
        t = np.append(s.time_s.values, row.time_s)
        energy = (np.diff(t) * s.power_w.values).sum()
        rel = abs(energy - row.energy_j) / row.energy_j
        if rel > 1e-9:
            print("%s GPU %d: integral %.9g J, result %.9g J" %
                  (run, g, energy, row.energy_j))
            bad += 1
    print(run, len(d), "rows")
sys.exit(bad)
PY
  then echo "ok h5py: power integral = energy per GPU, 7 policies"
  else cat "$T/py"; fail "h5py timeline check"; fi
else
  echo "skip timeline-h5py (python3-h5py or pandas not installed)"
fi

# trace export --policy: the pipeline policies on the same workload give
# the Lua run's energy.
if "$J" trace gen --model gpt3-125m --tp 2 --pp 2 --dp 2 --microbatches 4 \
     --seq-len 512 -o "$T/g.h5" >/dev/null 2>&1; then
  for p in perseus:slowdown=0.05 envpipe zeus; do
    name=${p%%:*}
    if "$J" trace export --chrome "$T/$name.json" --iterations 3 --policy "$p" \
         "$T/g.h5" >"$T/out" 2>&1; then
      got=$(sed -n 's/.* iterations, [0-9.]* s, \([0-9.]*\) J,.*/\1/p' "$T/out")
      want=$(awk -v n="$name" '$1 == n { printf "%.3f", $2 }' "$T/runs")
      [ -n "$got" ] && [ "$got" = "$want" ] ||
        fail "export $p: $got J, the Lua run $want J"
    else
      fail "export --policy $p exited with $?"
    fi
  done
  # --h5: the same power series from the command line.
  if "$J" trace export --h5 "$T/e.h5" --run zeus --iterations 3 \
       --policy zeus "$T/g.h5" >"$T/out" 2>&1; then
    got=$(sed -n 's/.* iterations, \([0-9.]*\) s, \([0-9.]*\) J,.*/\1 \2/p' "$T/out")
    if /usr/bin/python3 -c "import h5py, pandas" 2>/dev/null; then
      /usr/bin/python3 - "$T/e.h5" $got >"$T/py" 2>&1 <<'PY' ||
import sys, h5py, numpy as np, pandas as pd
d = pd.DataFrame(h5py.File(sys.argv[1], "r")["/timelines/zeus"][:])
end, want = float(sys.argv[2]), float(sys.argv[3])
total = sum((np.diff(np.append(s.time_s.values, end)) * s.power_w.values).sum()
            for _, s in d.groupby("gpu"))
assert d.gpu.nunique() == 8 and abs(total - want) < 1e-3 * want, (total, want)
PY
        { cat "$T/py"; fail "export --h5: integral of power"; }
    fi
    "$J" trace export --h5 "$T/e.h5" --run zeus --policy zeus "$T/g.h5" \
      >"$T/out" 2>&1
    rc=$?
    [ "$rc" -eq 1 ] && grep -q "timeline 'zeus' exists" "$T/out" ||
      fail "export --h5 over an existing run: exit $rc"
  else
    fail "export --h5 exited with $?"
  fi
  for p in custom perseus:slow=1 zeus:eta=2 powercap; do
    "$J" trace export --chrome "$T/x.json" --policy "$p" "$T/g.h5" \
      >"$T/out" 2>&1
    rc=$?
    [ "$rc" -eq 2 ] && grep -q -- "--policy: " "$T/out" ||
      fail "export --policy $p: exit $rc"
  done
  [ "$fails" -eq 0 ] && echo "ok trace export --policy"
else
  fail "trace gen"
fi

[ "$fails" -eq 0 ] || exit 1
echo "all ok"
