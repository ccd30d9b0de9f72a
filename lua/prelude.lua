-- lua/prelude.lua -- the friendly half of the joulesim module.
--
-- Embedded in the binary and run once by `require "joulesim"` with the
-- module table (holding the C primitives) as its argument.  Everything here
-- is plain Lua on top of those primitives: comparisons and readable
-- summaries (the policy constructors are C, in lua/policy.c).
local js = ...

local function fail(fn, msg, level)
  error(fn .. ": " .. msg, (level or 2) + 1)
end

-- js.policy.* (max, auto, fixed, powercap, iteration, pass, kernel,
-- custom) are C constructors (lua/policy.c): they check every argument and
-- return plain tables {name = ...} that js.simulate reads.

local function fmt_si(v, unit)
  local a = math.abs(v)
  local prefixes = { { 1e12, "T" }, { 1e9, "G" }, { 1e6, "M" }, { 1e3, "k" } }
  for _, p in ipairs(prefixes) do
    if a >= p[1] then return string.format("%.3g %s%s", v / p[1], p[2], unit) end
  end
  if a ~= 0 and a < 1 then
    if a >= 1e-3 then return string.format("%.3g m%s", v * 1e3, unit) end
    return string.format("%.3g u%s", v * 1e6, unit)
  end
  return string.format("%.3g %s", v, unit)
end
js.format_si = fmt_si

local comparison_mt = {}
comparison_mt.__index = comparison_mt
function comparison_mt.__tostring(c)
  local lines = {
    string.format("%-22s %14s %14s %10s", "", c.base_policy, c.policy, "change"),
    string.format("%-22s %14.4f %14.4f %+9.2f%%", "iteration time (s)", c.base_time_s,
                  c.time_s, 100 * c.slowdown),
    string.format("%-22s %14.1f %14.1f %+9.2f%%", "iteration energy (J)",
                  c.base_energy_j, c.energy_j, -100 * c.saving),
    string.format("%-22s %14.1f %14.1f", "avg power / GPU (W)",
                  c.base_avg_power_w, c.avg_power_w),
    string.format("energy saving %.2f%%, slowdown %.2f%%", 100 * c.saving,
                  100 * c.slowdown),
  }
  return table.concat(lines, "\n")
end

--- js.compare(base, r): energy saving (1 - E/E_base) and slowdown
-- (T/T_base - 1) of result r against baseline result base, per iteration
-- (so runs of different iteration counts compare).  The returned table
-- prints as a small table.
function js.compare(base, r)
  if type(base) ~= "table" or type(r) ~= "table" or not base.energy_j
     or not r.energy_j then
    fail("js.compare", "expects two results from js.simulate", 2)
  end
  local c = {
    policy = r.policy, base_policy = base.policy,
    time_s = r.iteration_time_s, base_time_s = base.iteration_time_s,
    energy_j = r.energy_per_iteration_j,
    base_energy_j = base.energy_per_iteration_j,
    avg_power_w = r.avg_power_w, base_avg_power_w = base.avg_power_w,
  }
  c.saving = 1 - c.energy_j / c.base_energy_j
  c.slowdown = c.time_s / c.base_time_s - 1
  return setmetatable(c, comparison_mt)
end

-- js.summary's order of the op classes: a copy of js.classes (lua/bind.c),
-- so that a script that edits that table cannot change it.
local class_order = table.move(js.classes, 1, #js.classes, 1, {})

--- js.summary(r): a readable multi-line summary of a result.
function js.summary(r)
  if type(r) ~= "table" or not r.energy_j then
    fail("js.summary", "expects a result from js.simulate", 2)
  end
  local out = {}
  local function add(...) out[#out + 1] = string.format(...) end
  local iters = #r.iterations
  add("policy %s on %d x %s", r.policy, r.n_gpus, r.gpu)
  add("  iteration time   %10.4f s   (%d iteration%s, %.4f s total)",
      r.iteration_time_s, iters, iters == 1 and "" or "s", r.time_s)
  add("  energy           %10s   per iteration, all GPUs",
      fmt_si(r.energy_per_iteration_j, "J"))
  if r.node_energy_j then
    add("    node           %10s   per iteration, all nodes (node %s)",
        fmt_si(r.node_energy_j / iters, "J"), r.node)
    add("    facility       %10s   per iteration (pue %.3g)",
        fmt_si(r.facility_energy_j / iters, "J"), r.pue)
  end
  add("  average power    %10.1f W   per GPU (peak %.1f W)", r.avg_power_w,
      r.peak_power_w)
  add("  throughput       %10.1f TFLOP/s per GPU, %s tokens/s",
      r.tflops_per_gpu, fmt_si(r.tokens_per_s, ""))
  add("  waste            %10s   per iteration (%.1f%% of GPU energy, blocked + idle GPUs)",
      fmt_si(r.waste_j / iters, "J"), 100 * r.waste_j / r.energy_j)
  add("  clock switches   %10d", r.switches)
  if r.trust then
    add("  trust            %s: %s", r.trust.level,
        table.concat(r.trust.reasons, "; "))
  end
  add("  energy by class (per iteration, all GPUs):")
  for _, k in ipairs(class_order) do
    local c = r.by_class[k]
    if c and c.energy_j > 0 then
      add("    %-12s %10s  %5.1f%%   busy %s", k,
          fmt_si(c.energy_j / iters, "J"), 100 * c.energy_j / r.energy_j,
          fmt_si(c.time_s / iters, "s"))
    end
  end
  add("    %-12s %10s  %5.1f%%", "blocked", fmt_si(r.blocked_j / iters, "J"),
      100 * r.blocked_j / r.energy_j)
  add("    %-12s %10s  %5.1f%%", "idle", fmt_si(r.idle_j / iters, "J"),
      100 * r.idle_j / r.energy_j)
  return table.concat(out, "\n")
end

return js
