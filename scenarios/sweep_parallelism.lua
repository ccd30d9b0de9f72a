-- scenarios/sweep_parallelism.lua -- a parallel sweep of GPT-3 training
-- layouts: model size x tensor/pipeline/data parallelism x clock policy, on
-- DGX A100 and DGX H100 clusters of 64 GPUs.
--
-- Every point simulates one training iteration (1F1B, global batch of 256
-- sequences of 2,048 tokens, microbatch size 1, so dp * microbatches = 256)
-- and writes one row of /results/parallelism: the point's keys (model, gpu,
-- tp, pp, policy), the derived layout (dp, microbatches), iteration time,
-- energy, average power, TFLOP/s per GPU, tokens/s, blocked + idle "waste",
-- and the energy of each op class per iteration (gemm_j, attention_j, ...,
-- comm_j, blocked_j, idle_j), with fits and memory_gb (js.sweep's: the GPU
-- memory per rank the layout needs; a layout that does not fit its GPUs,
-- such as GPT-3 13B at TP1, gets a row with fits = false and NaN figures).
--
-- Policies: "max" is the GPUs' own clocks (the baseline); "fixed-90",
-- "fixed-75" and "fixed-60" lock the SM clock at 90%, 75% and 60% of the
-- GPU's maximum (rounded down to its clock step): 1260/1050/840 MHz on the
-- A100, 1770/1485/1185 MHz on the H100.  scenarios/plot.py turns the file
-- into figures (energy saving vs slowdown per policy against "max" of the
-- same layout, energy by op class).
--
-- The sweep runs in `--jobs` worker processes (default: all cores) and is
-- resumable: run it again after an interruption and only the missing
-- points run (js.sweep; docs/sweeps.md).
--
-- Usage:  joulesim run [--jobs N] scenarios/sweep_parallelism.lua [OUT.h5] [small]
--   OUT.h5   results file (default sweep_parallelism.h5)
--   small    32 points on 8 GPUs with GPT-3 125M (for tests) instead of
--            512 points on 64 GPUs with GPT-3 1.3B, 6.7B, 13B and 175B
local js = require "joulesim"

local out = arg[1] or "sweep_parallelism.h5"
local small = arg[2] == "small"

local gpus = small and 8 or 64
local global_batch = small and 16 or 256
local grid = {
  model = small and { "gpt3-125m" }
              or { "gpt3-1.3b", "gpt3-6.7b", "gpt3-13b", "gpt3-175b" },
  gpu = { "A100-SXM4-80GB", "H100-SXM5-80GB" },
  tp = small and { 1, 2 } or { 1, 2, 4, 8 },
  pp = small and { 1, 2 } or { 1, 2, 4, 8 },
  policy = { "max", "fixed-90", "fixed-75", "fixed-60" },
}

local class_names = js.classes

-- The locked SM clock of a "fixed-NN" policy on a GPU: NN% of the maximum,
-- rounded down to the clock step.
local function fixed_clock(gpu, percent)
  local g = js.gpu(gpu)
  local target = g.sm_max_mhz * percent / 100
  local steps = math.floor((target - g.sm_min_mhz) / g.sm_step_mhz)
  return math.tointeger(g.sm_min_mhz + steps * g.sm_step_mhz)
end

local function run(p)
  local dp = gpus // (p.tp * p.pp)
  local microbatches = global_batch // dp
  local cluster = js.cluster { gpu = p.gpu, gpus = gpus }
  local workload = js.gpt { model = p.model, tp = p.tp, pp = p.pp, dp = dp,
                            microbatch_size = 1, microbatches = microbatches,
                            seq_len = 2048, schedule = "1f1b" }
  local policy, sm_mhz = js.policy.max(), 0
  local percent = p.policy:match("^fixed%-(%d+)$")
  if percent then
    sm_mhz = fixed_clock(p.gpu, tonumber(percent))
    policy = js.policy.fixed { sm = sm_mhz }
  elseif p.policy ~= "max" then
    error("unknown policy " .. p.policy)
  end
  local r = js.simulate { cluster = cluster, workload = workload,
                          policy = policy, iterations = 1 }
  local row = {
    dp = dp, gpus = gpus, microbatches = microbatches, sm_mhz = sm_mhz,
    policy_label = r.policy, ops = r.ops,
    iteration_time_s = r.iteration_time_s,
    energy_per_iteration_j = r.energy_per_iteration_j,
    avg_power_w = r.avg_power_w, peak_power_w = r.peak_power_w,
    tflops_per_gpu = r.tflops_per_gpu, tokens_per_s = r.tokens_per_s,
    waste_j = r.waste_j, blocked_j = r.blocked_j, idle_j = r.idle_j,
    switches = r.switches,
  }
  for _, c in ipairs(class_names) do
    row[c .. "_j"] = r.by_class[c] and r.by_class[c].energy_j or 0.0
  end
  return row
end

local s = js.sweep { grid = grid, run = run, out = out, table = "parallelism" }
print(string.format("sweep_parallelism: %d points: %d run, %d already in %s, "
                    .. "%d failed; %d rows in /results/parallelism; %d "
                    .. "run layouts do not fit the GPUs' memory (fits = "
                    .. "false)", s.total, s.done, s.skipped, out, s.failed,
                    s.rows, s.unfit))
for _, f in ipairs(s.failures) do
  print("  failed: " .. f.point_id .. ": " .. f.error)
end
print("figures: python3 scenarios/plot.py " .. out .. " -o figures")
