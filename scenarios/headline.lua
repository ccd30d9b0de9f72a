-- scenarios/headline.lua -- the README's figures, recomputed.
--
-- Prints the two tables of README.md ("How the models are calibrated") as
-- markdown rows, each figure computed now by the model:
--   * the calibration checks: an 8192^3 BF16 GEMM priced on the A100 at
--     its 400 W limit and uncapped (js.gpu.price), the GPT-3 175B stage
--     profile measured by Perseus against the model out of the box
--     (js.validate, fit "none", at the profile's 500 W limit, as `joulesim
--     validate PROFILE --gpu A100-SXM4-80GB --power-limit 500 --fit none`
--     prints it), the A100's blocked power;
--   * end-to-end throughput: achieved TFLOP/s per GPU of Megatron layouts
--     of GPT-3 on A100s (js.gpt folded, results identical to unfolded; a
--     fraction of a second each).
-- tests/scenario-docs.sh runs it and checks every figure the README gives
-- in these rows within 10%.
--
-- Usage:  joulesim run scenarios/headline.lua [PROFILE_DIR]
--   PROFILE_DIR  the stage profiles (default tests/data/profiles)
local js = require "joulesim"

local dir = arg[1] or "tests/data/profiles"
local gpu = "A100-SXM4-80GB"

local function row(...)
  print("| " .. table.concat({ ... }, " | ") .. " |")
end

-- The GEMM: 2 n^3 FLOPs, three n x n BF16 matrices.
local n = 8192
local flops, bytes = 2 * n ^ 3, 3 * n * n * 2
local capped = js.gpu.price{ gpu = gpu, class = "gemm", flops = flops,
                             bytes = bytes, power_limit_w = 400 }
local free = js.gpu.price{ gpu = gpu, class = "gemm", flops = flops,
                           bytes = bytes, cap = false }
local function tflops(p) return flops / p.time_s * 1e-12 end

-- The stage profile: predicted and measured energy and time per clock.
local rep = js.validate{ profile = dir .. "/gpt3-175b+a100_sxm_bf16.csv",
                         gpu = gpu, fit = "none", power_limit_w = 500 }
local at = {}
for _, p in ipairs(rep.points) do
  if p.op == "stage0.backward" then at[p.sm_mhz] = p end
end
local lo = rep.overall.min_sm_oob
local function ratio(k)
  return at[lo][k] / at[1410][k]
end
local mape_lo, mape_hi = math.huge, 0
for _, o in ipairs(rep.ops) do
  mape_lo = math.min(mape_lo, o.oob.energy_mape)
  mape_hi = math.max(mape_hi, o.oob.energy_mape)
end

print("Calibration checks (" .. gpu .. ")")
row("check", "model", "published / measured")
row("---", "---", "---")
row("A100 8192^3 BF16 GEMM at 400 W (power-capped)",
    string.format("%d MHz, %.1f TFLOP/s", capped.sm_mhz, tflops(capped)),
    "258 TFLOP/s (random data)")
row("same GEMM uncapped",
    string.format("%d MHz, %.0f TFLOP/s", free.sm_mhz, tflops(free)),
    "1410 MHz, 295 TFLOP/s (zeros)")
row("A100 SXM GPT-3 175B stage (Perseus profile, 500 W): lowest-energy clock",
    string.format("%d MHz", lo),
    string.format("%d MHz", rep.overall.min_sm_meas))
row("same: energy / time at that clock vs 1410 MHz (backward)",
    string.format("%.3f / %.3f", ratio("oob_energy_j"), ratio("oob_time_s")),
    string.format("%.3f / %.3f", ratio("energy_j"), ratio("time_s")))
row("same: energy error per op over 855-1410 MHz",
    string.format("MAPE %.1f-%.1f%%", 100 * mape_lo, 100 * mape_hi), "-")
row("A100 blocked in NCCL p2p",
    string.format("%.2f W", js.gpu(gpu).blocking_power_w), "83.64 W (Perseus)")

print()
print("End-to-end throughput (js.gpt on " .. gpu .. ", dgx-a100, seq 2048, "
      .. "microbatch 1, 1F1B)")
row("run", "TFLOP/s per GPU", "MFU")
row("---", "---", "---")
-- 175B runs with full activation recompute, as Megatron-LM ran it
-- (without it stage 0 needs 119 GB of the 80: docs/gpt-generator.md,
-- "Memory"); its recomputed forward counts in the FLOPs, as in the
-- paper's TFLOP/s.
for _, cfg in ipairs{
  { "gpt3-175b", 1024, 8, 8, 16, 64, true, "GPT-3 175B" },
  { "gpt3-13b", 64, 8, 2, 4, 16, false, "GPT-3 13B" },
} do
  local model, gpus, tp, pp, dp, mb, rc, name = table.unpack(cfg)
  local c = js.cluster{ gpu = gpu, gpus = gpus }
  local w = js.gpt{ model = model, tp = tp, pp = pp, dp = dp,
                    microbatches = mb, fold = true, recompute = rc }
  local r = js.simulate{ cluster = c, workload = w }
  row(string.format("%s on %d GPUs: TP%d PP%d DP%d, %d microbatches%s",
                    name, gpus, tp, pp, dp, mb, rc and ", recompute" or ""),
      string.format("%.1f", r.tflops_per_gpu),
      string.format("%.1f%%", 100 * r.mfu))
end
