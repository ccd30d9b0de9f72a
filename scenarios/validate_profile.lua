-- scenarios/validate_profile.lua -- how far is the model from measured GPUs,
-- and how sure is a what-if built on it?
--
-- For each shared measured profile (Perseus SOSP'24 stage profiles: GPT-3
-- 175B and Bloom 176B, TP8 PP8, on A100 SXM4 at 500 W and A40 at 300 W):
--   1. validates the catalogue model out of the box (anchored at the top
--      clock's measured time) and the model fitted on 75% of the clocks,
--      on the held-out 25% (seed 1), and prints the report;
--   2. writes one row per profile to the HDF5 table /results/validation
--      (MAPE of time and energy, out of the box and fitted, minimum-energy
--      clocks, savings);
--   3. saves the A100 GPT-3 fit as catalogue entry "A100-SXM4-80GB-fit"
--      (for this run: js.gpu("A100-SXM4-80GB-fit") works below);
--   4. puts a bootstrap interval on a what-if: a GPT-3 1.3B iteration on one
--      A100 locked at 1050 MHz, simulated with each resample's fitted GPU.
--
-- Usage:  joulesim run scenarios/validate_profile.lua [DIR] [OUT.h5] [quick]
--   DIR      where the four CSVs are (default: the repository's
--            tests/data/profiles beside this script, else the installed
--            copy; not the current directory)
--   OUT.h5   results file (default validate_profile.h5; tables replaced)
--   quick    fewer bootstrap samples (for tests)
local js = require "joulesim"

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

local dir = arg[1] or default_profiles()
print("profiles: " .. dir)
local out_path = arg[2] or "validate_profile.h5"
local quick = arg[3] == "quick"

local cases = {
  { file = "gpt3-175b+a100_sxm_bf16.csv", gpu = "A100-SXM4-80GB", limit = 500 },
  { file = "bloom+a100_sxm_bf16.csv", gpu = "A100-SXM4-80GB", limit = 500 },
  { file = "gpt3-175b+a40_bf16.csv", gpu = "A40", limit = 300 },
  { file = "bloom+a40_bf16.csv", gpu = "A40", limit = 300 },
}

local out = js.results(out_path, "validation", { mode = "replace" })
local function pct(x) return 100 * x end
local summary = {}
for _, c in ipairs(cases) do
  local path = dir .. "/" .. c.file
  local r = js.validate { profile = path, gpu = c.gpu, power_limit_w = c.limit,
                          holdout = 0.25, seed = 1 }
  print(r.text)
  local o = r.overall
  out:append {
    profile = c.file, gpu = c.gpu, power_limit_w = c.limit,
    heldout_clocks = r.heldout_clocks, n_clocks = r.n_clocks,
    oob_time_mape_pct = pct(o.oob.time_mape),
    oob_energy_mape_pct = pct(o.oob.energy_mape),
    fit_time_mape_pct = pct(o.fit.time_mape),
    fit_energy_mape_pct = pct(o.fit.energy_mape),
    min_sm_meas_mhz = o.min_sm_meas, min_sm_oob_mhz = o.min_sm_oob,
    min_sm_fit_mhz = o.min_sm_fit,
    saving_meas_pct = pct(o.saving_meas), saving_fit_pct = pct(o.saving_fit),
  }
  summary[#summary + 1] = string.format(
    "%-30s %-15s  oob time %5.2f%% energy %5.2f%% | fitted time %5.2f%% " ..
    "energy %5.2f%% | min %d MHz (fit %d)", c.file, c.gpu,
    pct(o.oob.time_mape), pct(o.oob.energy_mape), pct(o.fit.time_mape),
    pct(o.fit.energy_mape), o.min_sm_meas, o.min_sm_fit)
end
out:close()

print("Held-out MAPE (25% of the clocks, seed 1):")
for _, line in ipairs(summary) do print("  " .. line) end

-- The A100 fit as a catalogue entry for this run.
js.validate { profile = dir .. "/" .. cases[1].file, gpu = "A100-SXM4-80GB",
              power_limit_w = 500, save_gpu = "A100-SXM4-80GB-fit" }
local fitted = js.gpu("A100-SXM4-80GB-fit")
print(string.format("\nsaved A100-SXM4-80GB-fit: power limit %.0f W, " ..
                    "peak %.0f TFLOP/s", fitted.power_limit_w,
                    fitted.peak_tflops))

-- A what-if with an interval: each bootstrap resample's fitted GPU runs the
-- same simulation.
local workload = js.gpt { model = "gpt3-1.3b", tp = 1, pp = 1, dp = 1,
                          microbatch_size = 1, microbatches = 4,
                          seq_len = 2048 }
local iv = js.validate_interval {
  profile = dir .. "/" .. cases[1].file, gpu = "A100-SXM4-80GB",
  power_limit_w = 500, samples = quick and 8 or 100, level = 0.9, seed = 1,
  fn = function(m)
    local c = js.cluster { gpu = m.gpu, gpus = 1 }
    local r = js.simulate { cluster = c, workload = workload,
                            policy = js.policy.fixed { sm = 1050 } }
    return r.energy_j
  end,
}
print(string.format("GPT-3 1.3B iteration on one A100 at 1050 MHz: %.1f J " ..
                    "(90%% interval %.1f-%.1f J, %d resamples)",
                    iv.estimate, iv.lo, iv.hi, iv.samples))
