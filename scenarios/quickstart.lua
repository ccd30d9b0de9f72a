-- scenarios/quickstart.lua -- the first look at joulesim.
--
-- Simulates one Megatron-style GPT-3 training iteration on DGX A100 nodes
-- with tensor, pipeline and data parallelism all > 1, at the GPUs' own
-- clocks (the baseline) and at two locked SM clocks, prints a readable
-- summary of each (iteration time, energy, average power per GPU, energy by
-- op class, waste), compares the locked clocks against the baseline, and
-- writes every run as a row of the HDF5 table /results/quickstart.
--
-- Usage:  joulesim run scenarios/quickstart.lua [OUT.h5] [small]
--   OUT.h5   results file (default results.h5, rows are appended)
--   small    only the smallest configuration (for tests)
local js = require "joulesim"

local out_path = arg[1] or "results.h5"
local small = arg[2] == "small"

local configs = {
  { label = "gpt3-1.3b on 8 A100s", model = "gpt3-1.3b", tp = 2, pp = 2,
    dp = 2, microbatches = 8 },
  { label = "gpt3-13b on 64 A100s", model = "gpt3-13b", tp = 8, pp = 2,
    dp = 4, microbatches = 16 },
}
if small then configs = { configs[1] } end

local policies = {
  js.policy.max(),
  js.policy.fixed { sm = 1200 },
  js.policy.fixed { sm = 1005 },
}

local out = js.results(out_path, "quickstart")
for _, cfg in ipairs(configs) do
  local gpus = cfg.tp * cfg.pp * cfg.dp
  local cluster = js.cluster { gpu = "A100-SXM4-80GB", gpus = gpus,
                               network = "dgx-a100" }
  local workload = js.gpt { model = cfg.model, tp = cfg.tp, pp = cfg.pp,
                            dp = cfg.dp, microbatch_size = 1,
                            microbatches = cfg.microbatches, seq_len = 2048,
                            schedule = "1f1b" }
  print(string.format("== %s: TP%d PP%d DP%d, %d microbatches, %s ops ==",
                      cfg.label, cfg.tp, cfg.pp, cfg.dp, cfg.microbatches,
                      workload.ops))
  local base
  for _, policy in ipairs(policies) do
    local r = js.simulate { cluster = cluster, workload = workload,
                            policy = policy, iterations = 2 }
    print(js.summary(r))
    local saving, slowdown = 0.0, 0.0
    if base then
      local c = js.compare(base, r)
      print(c)
      saving, slowdown = c.saving, c.slowdown
    else
      base = r
    end
    print()
    out:append {
      config = cfg.label, model = cfg.model, policy = r.policy,
      gpus = gpus, tp = cfg.tp, pp = cfg.pp, dp = cfg.dp,
      microbatches = cfg.microbatches,
      iteration_time_s = r.iteration_time_s,
      energy_per_iteration_j = r.energy_per_iteration_j,
      avg_power_w = r.avg_power_w, tflops_per_gpu = r.tflops_per_gpu,
      waste_j = r.waste_j, switches = r.switches,
      saving_pct = 100 * saving, slowdown_pct = 100 * slowdown,
    }
  end
end
out:close()
print("results written to " .. out_path .. " (table /results/quickstart)")
