-- scenarios/stragglers.lua -- stragglers in data-parallel pipeline training,
-- through js.simulate and the pipeline policies (docs/perseus.md).
--
-- GPT-3 175B on A100 SXM (500 W), from its measured stage profile
-- (tests/data/profiles/gpt3-175b+a100_sxm_bf16.csv, TP8 x PP8 with one TP
-- rank per stage simulated), 1F1B, as a computation-level pipeline
-- (js.pipeline) with dp data-parallel pipelines.  A GPU that is not
-- computing is blocked in NCCL at the published P_block (83.64 W); clock
-- changes are instantaneous (switch_latency_ms = 0), as in the Perseus
-- emulation.
--
-- Pipeline 1 straggles for the whole run so that its iteration takes
-- T'/T = 1.0 .. 1.5 times longer; on top, every GPU may straggle at random
-- (rate per iteration, slowdown 1.05-1.2x, 1-2 iterations; seeded, so the
-- run is deterministic).  For each T'/T three policies run the same
-- stragglers:
--   max        every GPU at auto (max) clocks: the others finish and wait
--              for the straggler ("all-max-and-wait")
--   perseus    straggler-aware Perseus: the straggler's pipeline runs
--              all-max, the others slow down to the frontier point that
--              fits T' (never past the minimum-energy point T*)
--   zeus       one power limit for every GPU, chosen knowing the
--              stragglers (eta = 0.5)
-- The table gives per-iteration time and energy and the energy saving
-- against max-and-wait; rows are also written to the HDF5 table
-- /results/stragglers.
--
-- Usage:  joulesim run scenarios/stragglers.lua [OUT.h5] [small]
--   OUT.h5   results file (default stragglers.h5, appended)
--   small    M = 12, 4 pipelines, 2 iterations, T'/T in {1, 1.1, 1.2, 1.5}
--            (for tests: seconds)
local js = require "joulesim"

local out_path, small = "stragglers.h5", false
for _, a in ipairs(arg or {}) do
  if a == "small" then small = true else out_path = a end
end

local profile = "tests/data/profiles/gpt3-175b+a100_sxm_bf16.csv"
local p_block = 83.64
local stages = 8
local microbatches, dp, iterations = 24, 16, 4
local ratios = { 1.0, 1.1, 1.2, 1.3, 1.4, 1.5 }
local random = { rate = 0.02, slowdown = { 1.05, 1.2 }, duration = { 1, 2 } }
if small then
  microbatches, dp, iterations = 12, 4, 2
  ratios = { 1.0, 1.1, 1.2, 1.5 }
end

local w = js.pipeline { profile = profile, microbatches = microbatches,
                        dp = dp }
local c = js.cluster { gpu = "A100-SXM4-80GB", gpus = stages * dp,
                       blocking_power_w = p_block, idle_power_w = p_block,
                       switch_latency_ms = 0 }
local policies = {
  { key = "max", policy = js.policy.max() },
  { key = "perseus", policy = js.policy.perseus { straggler_aware = true } },
  { key = "zeus", policy = js.policy.zeus {} },
}

local out = js.results(out_path, "stragglers")
print(string.format("Stragglers: GPT-3 175B on A100, %d pipelines x %d "
  .. "stages, M = %d, %d iterations;\npipeline 1 runs T'/T slower, plus "
  .. "random stragglers (rate %g/iteration, %g-%gx, %d-%d iterations)",
  dp, stages, microbatches, iterations, random.rate, random.slowdown[1],
  random.slowdown[2], random.duration[1], random.duration[2]))
print("per iteration: time s / energy kJ / saving against max-and-wait")
print(string.format("%5s | %24s | %32s | %32s", "T'/T", "max (and wait)",
  "perseus (straggler-aware)", "zeus"))
for _, x in ipairs(ratios) do
  local strag = { random }
  if x > 1.0 then
    strag = { { pipeline = 1, slowdown = x }, random }
  end
  local res = {}
  for _, p in ipairs(policies) do
    res[p.key] = js.simulate { cluster = c, workload = w, policy = p.policy,
                               stragglers = strag, iterations = iterations }
  end
  local base = res.max
  local row = { ratio = x, pipelines = dp, microbatches = microbatches,
                iterations = iterations }
  local cells = {}
  for _, p in ipairs(policies) do
    local r = res[p.key]
    local t = r.iteration_time_s
    local e = r.energy_per_iteration_j
    local s = 1 - e / base.energy_per_iteration_j
    row[p.key .. "_time_s"] = t
    row[p.key .. "_energy_j"] = e
    row[p.key .. "_saving"] = s
    if p.key == "max" then
      cells[#cells + 1] = string.format("%8.3f %9.1f", t, e / 1e3)
    else
      cells[#cells + 1] = string.format("%8.3f %9.1f %+7.2f%%", t, e / 1e3,
                                        100 * s)
    end
  end
  row.zeus_limit_w = res.zeus.limit_w
  out:append(row)
  print(string.format("%5.2f | %24s | %32s | %32s", x, cells[1], cells[2],
                      cells[3]))
end
out:close()
print("\nresults: " .. out_path .. " (/results/stragglers)")
