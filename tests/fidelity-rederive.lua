-- tests/fidelity-rederive.lua DATA -- a second path to some figures of the
-- fidelity record: the Zeus A40 sweep of GPT-3 2.7B and its plan-0
-- iteration, re-derived from the CSVs under DATA with plain js.simulate,
-- sharing no code with tools/fidelity.lua.  Prints one "name: figure" line
-- per record row, to the precision the record prints;
-- tests/scenario-fidelity.sh compares them with `joulesim fidelity`.
local js = require "joulesim"
local data = arg[1] or error("usage: joulesim run fidelity-rederive.lua DATA", 0)

-- The rows of a CSV without quoted fields, as tables keyed by the header.
local function csv(path)
  local rows, names = {}, nil
  for line in io.lines(path) do
    local f = {}
    for v in (line .. ","):gmatch("([^,]*),") do f[#f + 1] = v end
    if not names then
      names = f
    else
      local r = {}
      for i, n in ipairs(names) do r[n] = f[i] end
      rows[#rows + 1] = r
    end
  end
  return rows
end

-- Merak's GPT-3 2.7B job on 8 A40s as docs/fidelity.md ("How each dataset
-- is run") describes it: the uniform partition (32 layers, 4 per stage),
-- microbatch 4 x 256, sequence 1024, full recompute, TF32, Hugging Face's
-- kernels.
local c = js.cluster{ gpu = "A40", gpus = 8, gpus_per_node = 8, network = "pcie" }
local w = js.gpt{ model = "gpt3-2.7b", seq_len = 1024, microbatch_size = 4,
                  microbatches = 256, pp = 8, recompute = true,
                  stage_layers = { 4, 4, 4, 4, 4, 4, 4, 4 }, precision = "tf32",
                  gpu = "A40", impl = "hf" }

-- The sweep: every measured limit simulated under that power cap.
local pts = {}
for _, r in ipairs(csv(data .. "/measured/zeus-powerlimit/a40_global.csv")) do
  if r.model_name == "gpt3-2.7b" then
    local lim = tonumber(r.power_limit_0)
    local p = js.simulate{ cluster = c, workload = w,
                           policy = js.policy.powercap{ watts = lim } }
    pts[#pts + 1] = { lim = lim, tm = tonumber(r.time), em = tonumber(r.energy),
                      tp = p.time_s, ep = p.energy_j }
  end
end
table.sort(pts, function(a, b) return a.lim > b.lim end)

-- Times normalised to the top limit's, compared in % of the measured
-- ratio; energies normalised the same way, compared in points; the limit
-- of least energy, measured and simulated.
local top, terr, eerr = pts[1], 0, 0
local least_m, least_p = top, top
for _, q in ipairs(pts) do
  local tm, tp = q.tm / top.tm, q.tp / top.tp
  terr = math.max(terr, math.abs(100 * (tp / tm - 1)))
  eerr = math.max(eerr, math.abs(100 * (q.ep / top.ep - q.em / top.em)))
  if q.em < least_m.em then least_m = q end
  if q.ep < least_p.ep then least_p = q end
end
print(("sweep normalised time: %.2f"):format(terr))
print(("sweep normalised energy: %.2f"):format(eerr))
print(("sweep minimum-energy limit: %.2f"):format(math.abs(least_p.lim - least_m.lim)))
print(("sweep top limit: %.2f"):format(math.abs(100 * (top.tp / top.tm - 1))))

-- Plan 0 (every clock at its maximum, no cap below the board's): the
-- simulated iteration against the mean of the ranks' measured ones.
local sum, n = 0, 0
local stages = "/measured/perseus-runs/gpt3-2.7b_a40_dp1_pp8_tp1_stage_times.csv"
for _, r in ipairs(csv(data .. stages)) do
  sum, n = sum + tonumber(r.iteration_time_s), n + 1
end
local p0 = js.simulate{ cluster = c, workload = w }
print(("plan-0 iteration time: %.2f"):format(math.abs(100 * (p0.time_s / (sum / n) - 1))))
