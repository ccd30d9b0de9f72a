-- scenarios/perseus_emulation.lua -- pipeline energy bloat, after the
-- Perseus emulation (Chung et al., "Perseus: Removing Energy Bloat from
-- Large Model Training", SOSP'24).
--
-- Replays the measured stage profiles of GPT-3 175B and Bloom 176B (TP8 x
-- PP8, one TP rank per stage simulated: the other seven behave the same,
-- so savings are those of the whole pipeline) on A100 SXM (500 W) and A40,
-- with 1F1B and M = 12, 24, 48 or 96 microbatches (global batch 1536, so
-- 128/64/32/16 data-parallel pipelines).  A GPU that is not computing is
-- blocked in NCCL at the published P_block (83.64 W A100, 70.38 W A40);
-- clock changes are instantaneous, as in the emulation.
--
--  1. Intrinsic bloat, one pipeline: energy saving against all-max clocks
--     of Perseus' fastest frontier point (no slowdown), EnvPipe (no
--     slowdown) and Zeus (one power limit, eta = 0.5, with its slowdown);
--     the frontier's size and its minimum-energy point.
--  2. Extrinsic bloat, the whole cluster (M = 24, 64 pipelines): one
--     pipeline straggles so that T'/T = 1.0 .. 1.5; cluster-wide saving
--     against all-max-and-wait of straggler-aware Perseus, Perseus without
--     straggler awareness, EnvPipe and Zeus (which picks its limit knowing
--     the straggler).
-- Tables are printed and written to the HDF5 tables /results/intrinsic and
-- /results/stragglers.
--
-- Usage:  joulesim run scenarios/perseus_emulation.lua [OUT.h5] [small]
--                                                      [PROFILE_DIR]
--   OUT.h5       results file (default perseus_emulation.h5, appended)
--   small        GPT-3 on A100 only, M = 12, a 4-pipeline sweep (tests)
--   PROFILE_DIR  the stage profiles (default: the repository's
--                tests/data/profiles beside this script, the copies of
--                ../shared/data/profiles/perseus-emulation/, else the
--                installed copy; not the current directory)
local js = require "joulesim"

local out_path = arg[1] or "perseus_emulation.h5"
local small = arg[2] == "small"
-- The profiles' default place, found from this script (arg[0]) and the
-- binary (arg[-1]), never from the current directory: the repository's
-- tests/data/profiles beside scenarios/, else what `make install` put in
-- PREFIX/share/joulesim/data/profiles (beside the installed scenarios, or
-- from PREFIX/bin/joulesim for a copy of this script elsewhere).
local function default_profiles()
  local function dirname(p) return p:match("^(.*)/[^/]*$") or "." end
  local here = dirname(arg[0])
  local tried = { here .. "/../tests/data/profiles", here .. "/../data/profiles" }
  if arg[-1] then
    tried[#tried + 1] = dirname(dirname(arg[-1])) .. "/share/joulesim/data/profiles"
  end
  for _, d in ipairs(tried) do
    -- js.profile.load, not io.open: the sandbox has no io.
    if pcall(js.profile.load, d .. "/gpt3-175b+a100_sxm_bf16.csv") then return d end
  end
  error("no stage profiles in " .. table.concat(tried, ", ")
        .. ": give the directory", 0)
end

local dir = arg[3] or default_profiles()
print("profiles: " .. dir)

local models = { { name = "gpt3-175b", file = "gpt3-175b" },
                 { name = "bloom-176b", file = "bloom" } }
local gpus = { { name = "A100", catalogue = "A100-SXM4-80GB",
                 file = "a100_sxm_bf16", p_block = 83.64 },
               { name = "A40", catalogue = "A40", file = "a40_bf16",
                 p_block = 70.38 } }
local microbatches = { 12, 24, 48, 96 }
local sweep_m = 24
local ratios = { 1.0, 1.05, 1.1, 1.15, 1.2, 1.25, 1.3, 1.35, 1.4, 1.45, 1.5 }
local global_batch = 1536
local stages = 8
if small then
  models = { models[1] }
  gpus = { gpus[1] }
  microbatches = { 12 }
  sweep_m = 12
  ratios = { 1.0, 1.2, 1.5 }
end

local function profile(m, g)
  return dir .. "/" .. m.file .. "+" .. g.file .. ".csv"
end

local function cluster(g, n)
  return js.cluster { gpu = g.catalogue, gpus = n,
                      blocking_power_w = g.p_block, idle_power_w = g.p_block,
                      switch_latency_ms = 0 }
end

local function pct(x) return string.format("%6.2f%%", 100 * x) end

-- 1. Intrinsic bloat -----------------------------------------------------
local out = js.results(out_path, "intrinsic")
print("Intrinsic energy bloat: one TP8 x PP8 pipeline, 1F1B")
print(string.format("%-10s %-4s %3s %9s %9s | %8s %8s %8s %8s | %6s %8s %8s",
  "model", "gpu", "M", "T_max s", "E_max kJ", "perseus", "envpipe",
  "zeus", "zeus T+", "points", "T*/T", "save@T*"))
local planner_s = {}
for _, m in ipairs(models) do
  for _, g in ipairs(gpus) do
    for _, mb in ipairs(microbatches) do
      local w = js.pipeline { profile = profile(m, g), microbatches = mb }
      local c = cluster(g, stages)
      local base = js.pipeline_run { cluster = c, workload = w, policy = "max" }
      local clock = os and os.clock and os.clock()
      local per = js.pipeline_run { cluster = c, workload = w,
                                    policy = "perseus" }
      if clock then planner_s[#planner_s + 1] = { m.name, g.name, mb,
                                                  os.clock() - clock } end
      local env = js.pipeline_run { cluster = c, workload = w,
                                    policy = "envpipe" }
      local zeus = js.pipeline_run { cluster = c, workload = w,
                                     policy = "zeus", eta = 0.5 }
      local fr = per.frontier
      local last = fr[#fr]
      -- Energies x 8: the seven other TP ranks of every stage.
      local row = {
        model = m.name, gpu = g.name, microbatches = mb,
        time_max_s = base.time_s, energy_max_j = 8 * base.energy_j,
        perseus_saving = 1 - per.energy_j / base.energy_j,
        perseus_slowdown = per.time_s / base.time_s - 1,
        envpipe_saving = 1 - env.energy_j / base.energy_j,
        envpipe_slowdown = env.time_s / base.time_s - 1,
        zeus_saving = 1 - zeus.energy_j / base.energy_j,
        zeus_slowdown = zeus.time_s / base.time_s - 1,
        zeus_limit_w = zeus.limit_w,
        frontier_points = #fr,
        min_energy_time_ratio = last.time_s / fr[1].time_s,
        min_energy_saving = 1 - last.energy_j / base.energy_j,
      }
      out:append(row)
      print(string.format(
        "%-10s %-4s %3d %9.3f %9.2f | %s %s %s %s | %6d %8.3f %s",
        m.name, g.name, mb, base.time_s, 8 * base.energy_j / 1e3,
        pct(row.perseus_saving), pct(row.envpipe_saving),
        pct(row.zeus_saving), pct(row.zeus_slowdown), #fr,
        row.min_energy_time_ratio, pct(row.min_energy_saving)))
    end
  end
end
out:close()
if #planner_s > 0 then
  print("\nPlanner CPU time (frontier + plan + one simulated iteration):")
  for _, p in ipairs(planner_s) do
    print(string.format("  %-10s %-4s M=%-3d %7.3f s", p[1], p[2], p[3], p[4]))
  end
end

-- 2. Stragglers: extrinsic bloat ------------------------------------------
local sout = js.results(out_path, "stragglers")
local dp = small and 4 or global_batch // sweep_m
print(string.format("\nStragglers: %d pipelines x %d stages, M = %d; one "
  .. "pipeline runs T'/T slower;\ncluster-wide energy saving against "
  .. "all-max-and-wait (time change in brackets)", dp, stages, sweep_m))
print(string.format("%-10s %-4s %5s | %17s %17s %17s %17s", "model", "gpu",
  "T'/T", "perseus-aware", "perseus", "envpipe", "zeus"))
for _, m in ipairs(models) do
  for _, g in ipairs(gpus) do
    local w = js.pipeline { profile = profile(m, g),
                            microbatches = sweep_m, dp = dp }
    local c = cluster(g, stages * dp)
    for _, x in ipairs(ratios) do
      local strag = nil
      if x > 1.0 then
        strag = { { pipeline = 1, slowdown = x } }
      end
      local function run(policy, extra)
        local a = { cluster = c, workload = w, policy = policy,
                    stragglers = strag, iterations = 2 }
        for k, v in pairs(extra or {}) do a[k] = v end
        return js.pipeline_run(a)
      end
      local base = run("max")
      local res = {
        perseus_aware = run("perseus", { straggler_aware = true }),
        perseus = run("perseus"),
        envpipe = run("envpipe"),
        zeus = run("zeus", { eta = 0.5 }),
      }
      local cells, row = {}, { model = m.name, gpu = g.name,
                               microbatches = sweep_m, pipelines = dp,
                               ratio = x,
                               time_max_s = base.iteration_time_s,
                               energy_max_j = 8 * base.energy_per_iteration_j }
      for _, k in ipairs { "perseus_aware", "perseus", "envpipe", "zeus" } do
        local r = res[k]
        local s = 1 - r.energy_per_iteration_j / base.energy_per_iteration_j
        local t = r.iteration_time_s / base.iteration_time_s - 1
        row[k .. "_saving"] = s
        row[k .. "_slowdown"] = t
        cells[#cells + 1] = string.format("%s (%+5.1f%%)", pct(s), 100 * t)
      end
      sout:append(row)
      print(string.format("%-10s %-4s %5.2f | %17s %17s %17s %17s", m.name,
                          g.name, x, cells[1], cells[2], cells[3], cells[4]))
    end
  end
end
sout:close()
print("\nresults: " .. out_path .. " (/results/intrinsic, /results/stragglers)")
