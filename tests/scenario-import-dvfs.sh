#!/bin/sh
# Every DVFS policy works on an imported trace (issue 6): on the two shared
# sampled_world128 Kineto ranks, each policy runs, keeps its slowdown budget
# and saves no less than nothing.
set -eu
J=${JOULESIM:-./joulesim}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
cat >"$T/s.lua" <<'LUA'
local js = require "joulesim"
local w = js.trace.import("tests/data/traces/sampled_world128_rank0.json.gz",
                         "tests/data/traces/sampled_world128_rank1.json.gz")
local c = js.cluster{ gpu = "A100-SXM4-80GB", gpus = w.ranks }
local base = js.simulate{ cluster = c, workload = w }
local policies = {
  { js.policy.fixed{ sm = 1200 }, math.huge },
  { js.policy.iteration{ slowdown = 0.01 }, 0.01 },
  { js.policy.pass{ slowdown = 0.01 }, 0.01 },
  { js.policy.kernel{ slowdown = 0.01 }, 0.01 },
  { js.policy.kernel{ slowdown = 0.01, granularity = "op" }, 0.01 },
  { js.policy.powercap{ slowdown = 0.01 }, 0.01 },
}
for _, pb in ipairs(policies) do
  local r = js.simulate{ cluster = c, workload = w, policy = pb[1] }
  local cmp = js.compare(base, r)
  assert(cmp.slowdown <= pb[2] + 1e-3, r.policy .. " broke its budget")
  assert(cmp.saving >= -1e-9, r.policy .. " costs energy")
  print(string.format("%s saving %.2f%% slowdown %.3f%%", r.policy,
                      100 * cmp.saving, 100 * cmp.slowdown))
end
print("all policies ok")
LUA
"$J" run "$T/s.lua" >"$T/out" 2>&1 || { cat "$T/out"; exit 1; }
grep -q "all policies ok" "$T/out"
grep -q "kernel(op" "$T/out"
