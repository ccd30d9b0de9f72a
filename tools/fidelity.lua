-- tools/fidelity.lua -- `joulesim fidelity`: every measured case through the
-- model, out of the box, as a user would run it.
--
-- A script, not part of the binary: `joulesim fidelity ARGS` finds it
-- beside the binary (tools/ in a checkout, PREFIX/share/joulesim/tools when
-- installed; cli/cmd_fidelity.c) and runs it as `joulesim run
-- tools/fidelity.lua ARGS` would, with the full standard library: it reads
-- the measured CSVs itself and calls the public joulesim API for every
-- prediction, so what it reports is what a scenario script would get.
--
-- Datasets (DATA is --data, else found from the binary's location: see
-- default_data below):
--   measured/zeus-powerlimit/*.csv   one power limit for every GPU, swept;
--                                    decoders simulated as js.gpt workloads
--                                    with js.policy.powercap{ watts = }
--   measured/perseus-runs/*_stage_times.csv  the plan-0 runs per stage:
--                                    busy time per microbatch, iteration
--                                    time, energy per GPU
--   measured/perseus-runs/*_stage_clocks.csv  each stage's microbatch time at
--                                    every clock the plans locked, over its
--                                    time at the top clock; the model under
--                                    js.policy.fixed at the same clocks
--   measured/perseus-runs/*_plans.csv  measured frequency plans against the
--                                    model's Perseus frontier (full run only:
--                                    the frontiers of 128-256 microbatches
--                                    take about a minute)
--   measured/kerneltuner/*.csv       one compute-bound kernel at locked SM
--                                    clocks, through js.validate{ fit = "none" }
--   measured/kernel-dvfs-study/*.csv the study's kernels at (auto, auto) and
--                                    at their optimal clock pair, the same way
--   measured/h100-powercap/*.csv     a TF32 load on an H100 SXM 94GB under
--                                    power caps: the clock each cap settles
--                                    it at, through js.gpu.price
--   published/megatron-weak-scaling Narayanan et al. SC'21 Table 1 (in the
--                                    code: a published table, no file)
--   published/llama-h100.csv         published Llama pre-training rates on
--                                    H100 (NeMo 24.12, the Llama 3 paper):
--                                    each recipe through js.gpt
--   profiles/**/*.csv                stage profiles: js.validate (fitted on
--                                    75% of the clocks, held-out 25% predicted)
--   traces/kineto/*.json.gz          real PyTorch profiler traces: the
--                                    replayed step against the measured
--                                    steady-state step, GPU order only and
--                                    with host streams (issue 16)
-- Every case is a prediction unless its row says "fitted": no catalogue
-- parameter was fitted to these files (docs/fidelity.md describes each
-- case and its source, docs/fidelity-record.csv records its error).
-- Errors: normalised times in % of the measured value, normalised
-- energies in points (100 x the difference of the two ratios), absolute
-- figures in %.
--
-- --check FILE compares each case's error with the figure recorded in
-- FILE (docs/fidelity-record.csv) and fails when one has grown.
local js = require "joulesim"

local USAGE = [[
usage: joulesim fidelity [--data DIR] [--out FILE.h5] [--only NAME]...
                         [--short] [--check FILE.csv] [--record FILE.csv]
                         [--fit IMPL] [--sched DIR]

Runs every measured case through the model, out of the box, and prints
predicted against measured with the error per point and per case.
  --data DIR     the measured data (default, found from the joulesim
                 binary, not the current directory: the shared data beside
                 the repository it was built in, else that repository's
                 tests/data; installed, PREFIX/share/joulesim/data)
  --out FILE.h5  also write every table (and fidelity_summary) to FILE.h5
  --png DIR      with --out: a PNG per dataset in DIR, drawn by
                 scenarios/plot.py (needs python3-h5py and -matplotlib:
                 make plot-deps)
  --only NAME    only the datasets whose name contains NAME (repeatable;
                 names are the files, e.g. zeus-powerlimit/a40_global.csv)
  --short        skip the slow datasets (the Perseus plan runs)
  --check FILE   fail (exit 1) when a case's error exceeds the figure
                 recorded for it in FILE (docs/fidelity-record.csv)
  --record FILE  rewrite the record FILE (a CSV file, created when absent)
                 with this run's figures and roles (after --check, when
                 both are given); a case this run skipped (--short,
                 --only) keeps its recorded row
  --boost MODE   how the Merak jobs' power limit holds: per-kernel (the
                 default) or controller (the driver's boost controller)
  --refit        also refit the catalogue parameters that come from these
                 files (the RTX-3080-Ti's memory and boost terms, from the
                 study's GEMM rows; the Hopper power model, from the H100
                 cap curve; the A100 PCIe's HBM2e interface in use, from
                 the Perseus Bloom 3B plan-2 run) and print them
  --sched DIR    the Perseus artifact's sosp24_data/perseus folder (ml-energy/
                 zeus, branch kronos): replay every measured plan's
                 N.sched.json with js.policy.plan instead of comparing the
                 model's frontier with the measured points
  --fit IMPL     refit the generator's efficiency factors of IMPL
                 (megatron: on the odd rows of the weak-scaling table; hf:
                 on the Merak GPT-3 2.7B A40 plan-0 stage times), print
                 them with the errors on the fitted and the held-out cases,
                 and stop (the values go into traces/gpt.c)
See docs/fidelity.md.
]]

local function fail(msg) error(msg, 0) end

-- ---- arguments --------------------------------------------------------------

local opt = { only = {} }
do
  local i = 1
  while i <= #arg do
    local a, v = arg[i], arg[i + 1]
    local k, inline = a:match("^(%-%-[%w-]+)=(.*)$")
    if k then a, v = k, inline else inline = nil end
    local function take()
      if v == nil then fail(a .. " needs a value\n" .. USAGE) end
      if not inline then i = i + 1 end
      return v
    end
    if a == "--data" then opt.data = take()
    elseif a == "--out" then opt.out = take()
    elseif a == "--only" then opt.only[#opt.only + 1] = take()
    elseif a == "--png" then opt.png = take()
    elseif a == "--check" then opt.check = take()
    elseif a == "--record" then opt.record = take()
    elseif a == "--short" then opt.short = true
    elseif a == "--refit" then opt.refit = true
    elseif a == "--boost" then opt.boost = take()
    elseif a == "--fit" then opt.fit = take()
    elseif a == "--sched" then opt.sched = take()
    elseif a == "--help" or a == "-h" then io.write(USAGE); return
    else fail("unknown argument '" .. a .. "'\n" .. USAGE) end
    i = i + 1
  end
end

if opt.png and not opt.out then fail("--png needs --out FILE.h5") end
-- The figures live in the record's CSV file alone, not in the prose.
for _, flag in ipairs{ "check", "record" } do
  local path = opt[flag]
  if path and path:match("%.md$") then
    fail(("--%s %s: the record is a CSV file (docs/fidelity-record.csv), "
          .. "not a Markdown table"):format(flag, path))
  end
end
if opt.fit and opt.fit ~= "megatron" and opt.fit ~= "hf" then
  fail("--fit " .. opt.fit .. ": unknown implementation (megatron or hf)")
end

-- Efficiency factors handed to js.gpt{ efficiency = }: nil = the ones
-- traces/gpt.c carries (the fitted values); --fit varies them.
local EFF = {}

local function exists(path)
  local f = io.open(path, "r")
  if f then f:close() return true end
  return false
end

-- Where the default data and scenarios/plot.py are: found from the binary
-- (arg[-1], lua/bind.c), never from the current directory, so the command
-- reads the same files wherever it is run.  A binary built in a checkout
-- sits at its root (the shared data beside the checkout, else its
-- tests/data); one that `make install` put in PREFIX/bin has its files in
-- PREFIX/share/joulesim.
local function dirname(p) return p:match("^(.*)/[^/]*$") or "." end
local BIN_DIR = arg[-1] and dirname(arg[-1])
local CHECKOUT = BIN_DIR and exists(BIN_DIR .. "/tests/data/measured/README.md")
local SHARE = BIN_DIR and dirname(BIN_DIR) .. "/share/joulesim"

local function default_data()
  if not BIN_DIR then
    fail("no data: the binary's location is unknown (/proc/self/exe); "
         .. "give --data DIR")
  end
  local tried = {}
  local function try(dir, why)
    tried[#tried + 1] = dir
    if exists(dir .. "/measured/README.md") then
      print(("data: %s (%s)"):format(dir, why))
      return dir
    end
  end
  local d = CHECKOUT and (try(dirname(BIN_DIR) .. "/shared/data",
                              "the shared data beside the repository")
                          or try(BIN_DIR .. "/tests/data",
                                 "the repository's copy: no shared data "
                                 .. "beside it"))
            or try(SHARE .. "/data", "installed with the binary")
  if not d then
    fail("no data: none of " .. table.concat(tried, ", ") .. " holds "
         .. "measured/README.md; give --data DIR")
  end
  return d
end

local data = opt.data
if data then
  if not exists(data .. "/measured/README.md") then
    fail(data .. ": not a data directory (no measured/README.md)")
  end
else
  data = default_data()
end

-- ---- CSV ----------------------------------------------------------------------

-- Reads path with the library's CSV reader (js.csv): the rows, tables
-- keyed by the header's names, each with its _line.  Errors name the file
-- and line.
local function read_csv(path, need)
  local ok, t = pcall(js.csv, path)
  if not ok then fail((tostring(t):gsub("^js%.csv: ", ""))) end
  local have = {}
  for _, h in ipairs(t.header) do have[h] = true end
  for _, col in ipairs(need or {}) do
    if not have[col] then
      fail(("%s:%d: missing column '%s'"):format(path, t.header_line, col))
    end
  end
  for k, r in ipairs(t.rows) do r._line = t.lines[k] end
  return t.rows
end

local function num(r, col, path, lo)
  local v = tonumber(r[col])
  if v == nil or v ~= v or (lo and v <= lo) then
    fail(("%s:%d: column '%s': '%s' is not a number%s"):format(
      path, r._line, col, tostring(r[col]), lo and (" > " .. lo) or ""))
  end
  return v
end

-- ---- output -------------------------------------------------------------------

local summary = {}   -- { dataset, case, metric, error, unit, role }
local out_tables = {}

-- Columns are typed by the first row: every number but these is a float.
local INTEGER_COLUMNS = { plan = true, sm_mhz = true }

local function row_out(dataset, row)
  if not opt.out then return end
  for k, v in pairs(row) do
    if math.type(v) == "integer" and not INTEGER_COLUMNS[k] then
      row[k] = v + 0.0
    end
  end
  local name = dataset:gsub("[^%w]+", "_"):gsub("_csv$", "")
  local t = out_tables[name]
  if not t then
    t = js.results(opt.out, name, { mode = "replace" })
    out_tables[name] = t
  end
  t:append(row)
end

local function record(dataset, case, metric, err, unit, role)
  summary[#summary + 1] = { dataset = dataset, case = case, metric = metric,
                            error = err, unit = unit, role = role }
end

local function selected(name)
  if #opt.only == 0 then return true end
  for _, o in ipairs(opt.only) do
    if name:find(o, 1, true) then return true end
  end
  return false
end

local function heading(name, what)
  print(("\n== %s: %s"):format(name, what))
end

local function maxabs(list)
  local m = 0
  for _, v in ipairs(list) do m = math.max(m, math.abs(v)) end
  return m
end

-- Relative error of p against m, in %.
local function pct(p, m) return 100 * (p / m - 1) end

-- ---- workloads ------------------------------------------------------------------

-- The measured jobs' models (measured/README.md), as js.gpt can build them
-- today: the js.gpt preset (Bloom with its ALiBi and embedding LayerNorm),
-- Merak's partition as stage_layers, TF32, sequence length 1024, full
-- activation recompute (Merak's checkpointing).  `emb_shards`: the shards
-- before the first transformer layer in Merak's partition lists (GPT-2:
-- word and position embeddings; Bloom: one, its positions are ALiBi), so
-- that "custom:0,10,18,26,32" is Bloom 3B's 9, 8, 8, 5 layers.
local MODELS = {
  ["bloom-3b"] = { layers = 30, hidden = 2560, heads = 32, vocab = 250880,
                   emb_shards = 1 },
  ["gpt3-2.7b"] = { layers = 32, hidden = 2560, heads = 32, vocab = 50257,
                    emb_shards = 2 },
}

-- Transformer layers per stage from a Merak partition method: "custom:"
-- shard boundaries, or "uniform_transformer" (layers / pp each).  nil and
-- a reason when it cannot be expressed.
local function partition(model, method, pp)
  local s = MODELS[model]
  if method == nil or method == "uniform_transformer" then
    if s.layers % pp ~= 0 then
      return nil, ("uniform_transformer with %d layers on %d stages"):format(
        s.layers, pp)
    end
    local out = {}
    for p = 1, pp do out[p] = s.layers // pp end
    return out
  end
  local list = method:match("^custom:([%d,]+)$")
  if not list then return nil, "partition '" .. method .. "'" end
  local b = {}
  for v in list:gmatch("%d+") do b[#b + 1] = tonumber(v) end
  if #b ~= pp + 1 then
    return nil, ("partition '%s' has %d stages, pp = %d"):format(method,
                                                                 #b - 1, pp)
  end
  local out, sum = {}, 0
  for p = 1, pp do
    local n = b[p + 1] - b[p] - (p == 1 and s.emb_shards or 0)
              - (p == pp and 1 or 0)
    if n < 1 then return nil, "partition '" .. method .. "'" end
    out[p], sum = n, sum + n
  end
  if sum ~= s.layers then
    return nil, ("partition '%s' holds %d layers, %s has %d"):format(method,
                 sum, model, s.layers)
  end
  return out
end
-- Merak's runs do not state their precision; their GEMMs ran on tensor
-- cores (faster than the FP32 peak), and TF32 was the PyTorch containers'
-- default for matmuls then (measured/README.md).
local PRECISION = "tf32"

local GPUS = {
  a100 = { name = "A100-PCIE-80GB", network = "pcie" },
  a40 = { name = "A40", network = "pcie" },
}

local function job(model, gpu, pp, mbs, m, method, where)
  local s = MODELS[model]
  local stages, why = partition(model, method, pp)
  if not stages then fail(where .. ": cannot express " .. why) end
  local c = js.cluster{ gpu = gpu.name, gpus = pp, gpus_per_node = pp,
                        network = gpu.network, boost = opt.boost }
  local w = js.gpt{ model = model, seq_len = 1024, microbatch_size = mbs,
                    microbatches = m, pp = pp, recompute = true,
                    stage_layers = stages, precision = PRECISION,
                    gpu = gpu.name, impl = "hf", efficiency = EFF.hf }
  local approx = ("%s as js.gpt: layers %s per stage (%s), %s, "
                  .. "impl hf, mbs %d x %d"):format(model,
                  table.concat(stages, ","), method or "uniform",
                  PRECISION:upper(), mbs, m)
  return c, w, approx
end

-- ---- Zeus power-limit sweeps ---------------------------------------------------

local ZEUS = {
  { file = "zeus-powerlimit/a100_pcie_pp4_global.csv", gpu = GPUS.a100 },
  { file = "zeus-powerlimit/a40_global.csv", gpu = GPUS.a40 },
}

local function zeus(ds)
  local path = data .. "/measured/" .. ds.file
  local rows = read_csv(path, { "model_name", "pp", "microbatch_size",
                                "num_microbatches", "power_limit_0", "time",
                                "energy" })
  local groups, order = {}, {}
  for _, r in ipairs(rows) do
    local m = r.model_name
    if not groups[m] then groups[m] = {}; order[#order + 1] = m end
    table.insert(groups[m], r)
  end
  heading(ds.file, "one power limit for every GPU (" .. ds.gpu.name .. ")")
  for _, m in ipairs(order) do
    local g = groups[m]
    if not MODELS[m] then
      print(("  %s: not modelled (an encoder or CNN: joulesim generates "
             .. "decoders only)"):format(m))
    else
      table.sort(g, function(a, b)
        return num(a, "power_limit_0", path) > num(b, "power_limit_0", path)
      end)
      local r0 = g[1]
      local c, w, approx = job(m, ds.gpu, math.tointeger(num(r0, "pp", path, 0)),
                               math.tointeger(num(r0, "microbatch_size", path, 0)),
                               math.tointeger(num(r0, "num_microbatches", path, 0)),
                               r0.partition_method, ("%s:%d"):format(path, r0._line))
      print(("  %s (%s)"):format(m, approx))
      print(("  %6s %9s %9s %8s %8s %8s | %8s %8s %8s"):format(
        "limit", "T meas s", "T pred s", "T/T0 m", "T/T0 p", "err %",
        "E/E0 m", "E/E0 p", "err pt"))
      local base, terrs, eerrs = nil, {}, {}
      local best_m, best_p
      for _, r in ipairs(g) do
        local lim = num(r, "power_limit_0", path, 0)
        local tm, em = num(r, "time", path, 0), num(r, "energy", path, 0)
        local p = js.simulate{ cluster = c, workload = w,
                               policy = js.policy.powercap{ watts = lim } }
        base = base or { tm = tm, em = em, tp = p.time_s, ep = p.energy_j }
        local ntm, nem = tm / base.tm, em / base.em
        local ntp, nep = p.time_s / base.tp, p.energy_j / base.ep
        local te, ee = 100 * (ntp / ntm - 1), 100 * (nep - nem)
        terrs[#terrs + 1], eerrs[#eerrs + 1] = te, ee
        if not best_m or em < best_m.e then best_m = { lim = lim, e = em } end
        if not best_p or p.energy_j < best_p.e then
          best_p = { lim = lim, e = p.energy_j }
        end
        print(("  %5.0fW %9.3f %9.3f %8.4f %8.4f %+8.2f | %8.4f %8.4f %+8.2f")
              :format(lim, tm, p.time_s, ntm, ntp, te, nem, nep, ee))
        row_out(ds.file, { case = m, power_limit_w = lim,
                           meas_time_s = tm, pred_time_s = p.time_s,
                           meas_energy_j = em, pred_energy_j = p.energy_j,
                           meas_time_norm = ntm, pred_time_norm = ntp,
                           meas_energy_norm = nem, pred_energy_norm = nep,
                           time_err_pct = te, energy_err_pt = ee,
                           role = "predicted" })
      end
      local abs_t = 100 * (base.tp / base.tm - 1)
      print(("  minimum energy: measured at %.0f W, predicted at %.0f W; "
             .. "iteration time at %.0f W %+.1f%% (absolute)")
            :format(best_m.lim, best_p.lim, g[1].power_limit_0, abs_t))
      local case = ds.file .. ":" .. m
      record(ds.file, m, "normalised time, max abs err", maxabs(terrs), "%",
             "predicted")
      record(ds.file, m, "normalised energy, max abs err", maxabs(eerrs), "pt",
             "predicted")
      record(ds.file, m, "minimum-energy limit, abs err",
             math.abs(best_p.lim - best_m.lim), "W", "predicted")
      record(ds.file, m, "iteration time at the top limit, abs err",
             math.abs(abs_t), "%", "predicted")
      local _ = case
    end
  end
end

-- ---- Perseus plan runs --------------------------------------------------------------

-- impl hf's efficiency factors are fitted on the GPT-3 2.7B A40 run's
-- stage times (--fit hf); the Bloom runs are predictions.
local HF_PREDICTED = "predicted (impl hf fitted on GPT-3 2.7B, A40)"
local PERSEUS = {
  { file = "perseus-runs/bloom-3b_a100_dp1_pp4_tp1_plans.csv", model = "bloom-3b",
    gpu = GPUS.a100, pp = 4, mbs = 4, m = 128, method = "custom:0,10,18,26,32",
    role = HF_PREDICTED,
    sched = "A100/dp1+pp4+tp1/merak+bloom-3b+custom:0,10,18,26,32+dp1+pp4+tp1+"
            .. "mbs4+nmb128+PointSolution" },
  { file = "perseus-runs/bloom-3b_a40_dp1_pp8_tp1_plans.csv", model = "bloom-3b",
    gpu = GPUS.a40, pp = 8, mbs = 4, m = 128,
    method = "custom:0,6,10,14,18,22,26,30,32", role = HF_PREDICTED,
    sched = "A40/dp1+pp8+tp1/merak+bloom-3b+custom:0,6,10,14,18,22,26,30,32+"
            .. "dp1+pp8+tp1+mbs4+nmb128+PointSolution" },
  { file = "perseus-runs/gpt3-2.7b_a40_dp1_pp8_tp1_plans.csv", model = "gpt3-2.7b",
    gpu = GPUS.a40, pp = 8, mbs = 4, m = 256, method = "uniform_transformer",
    role = "fitted (impl hf's efficiency factors)", fit = true,
    sched = "A40/dp1+pp8+tp1/merak+gpt3-2.7b+uniform_transformer+dp1+pp8+tp1+"
            .. "mbs4+nmb256+PointSolution" },
}

-- Energy ratio of the frontier at time ratio tau (linear between points;
-- the fastest point before it, the minimum-energy point after it).  Both
-- ratios are to the all-max plan, as the measured ones are to plan 0
-- (every clock at max): the frontier's fastest point already removes the
-- intrinsic bloat, so taking it as 1 hid the model's saving at T0 (Bloom
-- 3B on A40: 3.8% there, which the measured plan 29 puts at 21.9%).
local function frontier_at(fr, tau)
  local t0, e0 = fr.allmax.time_s, fr.allmax.energy_j
  if tau * t0 <= fr[1].time_s then return fr[1].energy_j / e0 end
  for k = 2, #fr do
    local a, b = fr[k - 1], fr[k]
    if b.time_s / t0 >= tau then
      local x = (tau * t0 - a.time_s) / (b.time_s - a.time_s)
      return (a.energy_j + x * (b.energy_j - a.energy_j)) / e0
    end
  end
  return fr[#fr].energy_j / e0
end

-- Whether plan r ran every rank at plan 0's clocks (the mean_sm_mhz_rankR
-- columns).
local function all_max(r, base)
  local k = 0
  while r["mean_sm_mhz_rank" .. k] do
    if r["mean_sm_mhz_rank" .. k] ~= base["mean_sm_mhz_rank" .. k] then
      return false
    end
    k = k + 1
  end
  return k > 0
end

-- Every measured plan replayed from its own schedule (--sched DIR: the
-- artifact's N.sched.json files) with js.policy.plan: the replay's time
-- and energy over the replay of plan 0 against the measured ratios.
local function perseus_replay(ds, rows, path, c, w, t0, e0)
  print("  each plan replayed from " .. opt.sched .. "/" .. ds.sched)
  print(("  %5s %8s %8s %7s | %8s %8s %7s | %7s"):format("plan", "T/T0 m",
        "T/T0 p", "err %", "E/E0 m", "E/E0 p", "err pt", "snapped"))
  local base, terrs, eerrs = nil, {}, {}
  local sorted = {}
  for _, r in ipairs(rows) do sorted[#sorted + 1] = r end
  table.sort(sorted, function(a, b) return num(a, "plan", path) < num(b, "plan", path) end)
  for _, r in ipairs(sorted) do
    local n = math.tointeger(num(r, "plan", path))
    local sp = ("%s/%s/%d.sched.json"):format(opt.sched, ds.sched, n)
    if not exists(sp) then fail(sp .. ": no such file (--sched names the "
                                .. "artifact's sosp24_data/perseus folder)") end
    local res = js.simulate{ cluster = c, workload = w,
                             policy = js.policy.plan{ plan = sp } }
    base = base or (n == 0 and res) or nil
    if not base then fail(sp .. ": plan 0 must come first") end
    local tm = num(r, "iteration_time_s", path, 0) / t0
    local em = num(r, "energy_j", path, 0) / e0
    local tp, ep = res.time_s / base.time_s, res.energy_j / base.energy_j
    local te, ee = pct(tp, tm), 100 * (ep - em)
    terrs[#terrs + 1], eerrs[#eerrs + 1] = te, ee
    print(("  %5d %8.4f %8.4f %+7.2f | %8.4f %8.4f %+7.2f | %7d"):format(n,
          tm, tp, te, em, ep, ee, res.plan_snapped))
    row_out(ds.file, { case = ds.model, plan = n, meas_time_norm = tm,
                       pred_time_norm = tp, meas_energy_norm = em,
                       pred_energy_norm = ep, time_err_pct = te,
                       energy_err_pt = ee, role = "predicted" })
  end
  record(ds.file, ds.model, "replayed plans: normalised time, max abs err",
         maxabs(terrs), "%", "predicted (each measured plan's sched.json)")
  record(ds.file, ds.model, "replayed plans: normalised energy, max abs err",
         maxabs(eerrs), "pt", "predicted (each measured plan's sched.json)")
end

local function perseus(ds)
  local path = data .. "/measured/" .. ds.file
  local rows = read_csv(path, { "plan", "iteration_time_s", "energy_j" })
  local c, w, approx = job(ds.model, ds.gpu, ds.pp, ds.mbs, ds.m, ds.method,
                           path)
  local base
  for _, r in ipairs(rows) do
    if math.tointeger(num(r, "plan", path)) == 0 then base = r end
  end
  base = base or rows[1]
  local t0, e0 = num(base, "iteration_time_s", path, 0), num(base, "energy_j", path, 0)
  if opt.sched then
    heading(ds.file, "measured Perseus plans replayed (" .. ds.gpu.name .. ")")
    print("  " .. approx)
    return perseus_replay(ds, rows, path, c, w, t0, e0)
  end
  heading(ds.file, "measured Perseus plans against the model's frontier ("
          .. ds.gpu.name .. ")")
  print("  " .. approx)
  local fr = js.perseus_frontier{ cluster = c, workload = w }
  local am = fr.allmax
  print(("  frontier: %d points, all-max %.3f s; fastest point %.1f%% below "
         .. "all-max at %+.1f%% time, minimum energy %.1f%% below at %+.1f%%")
        :format(#fr, am.time_s, 100 * (1 - fr[1].energy_j / am.energy_j),
                100 * (fr[1].time_s / am.time_s - 1),
                100 * (1 - fr[#fr].energy_j / am.energy_j),
                100 * (fr[#fr].time_s / am.time_s - 1)))
  print(("  %5s %8s %8s %8s %8s"):format("plan", "T/T0 m", "E/E0 m", "E/E0 p",
                                         "err pt"))
  local errs = {}
  for _, r in ipairs(rows) do
    local tau = num(r, "iteration_time_s", path, 0) / t0
    local em = num(r, "energy_j", path, 0) / e0
    -- A repeat of plan 0 (every rank's mean clock plan 0's) is the all-max
    -- plan again, not a point of the frontier.
    local ep = all_max(r, base) and 1.0 or frontier_at(fr, tau)
    local e = 100 * (ep - em)
    errs[#errs + 1] = e
    print(("  %5s %8.4f %8.4f %8.4f %+8.2f"):format(r.plan, tau, em, ep, e))
    row_out(ds.file, { case = ds.model, plan = math.tointeger(num(r, "plan", path)),
                       meas_time_norm = tau, meas_energy_norm = em,
                       pred_energy_norm = ep, energy_err_pt = e,
                       role = "predicted" })
  end
  record(ds.file, ds.model, "energy at each plan's time, max abs err",
         maxabs(errs), "pt", "predicted")
end

-- The plan-0 (all clocks at max) run of each Merak job, simulated: per
-- stage the forward and the backward kernel time of one microbatch (the
-- workload's own split by phase, js.trace.info's busy_by_phase_s, scaled
-- to the engine's kernel time of that GPU so that a binding power cap
-- counts; a recomputed forward is part of the backward, as in Merak's
-- BackwardPass), the iteration time and each GPU's energy.  Returns the
-- measured rows and the predictions.
local function stage_prediction(ds)
  local file = ds.file:gsub("_plans%.csv$", "_stage_times.csv")
  local path = data .. "/measured/" .. file
  local rows = read_csv(path, { "rank", "forward_s", "backward_s",
                                "iteration_time_s", "iteration_energy_j" })
  local c, w, approx = job(ds.model, ds.gpu, ds.pp, ds.mbs, ds.m, ds.method,
                           path)
  if #rows ~= ds.pp then
    fail(("%s: %d ranks, the job has pp = %d"):format(path, #rows, ds.pp))
  end
  local r = js.simulate{ cluster = c, workload = w }
  local info = js.trace.info(w)
  local out = { file = file, path = path, approx = approx, time_s = r.time_s,
                stages = {} }
  local tsum = 0
  for _, row in ipairs(rows) do
    local k = math.tointeger(num(row, "rank", path)) + 1
    local g = r.per_gpu[k]
    if not g then fail(("%s:%d: rank %d is not in the job"):format(path,
                       row._line, k - 1)) end
    local ph, busy = info.busy_by_phase_s[k], info.busy_s[k]
    local scale = busy > 0 and g.kernel_s / busy or 1
    out.stages[#out.stages + 1] = {
      stage = k - 1,
      fm = num(row, "forward_s", path, 0), bm = num(row, "backward_s", path, 0),
      fp = ph.forward * scale / ds.m, bp = ph.backward * scale / ds.m,
      em = num(row, "iteration_energy_j", path, 0), ep = g.energy_j }
    tsum = tsum + num(row, "iteration_time_s", path, 0)
  end
  out.time_m = tsum / #rows
  return out
end

-- The A100 PCIe's HBM2e interface while in use (p_mem_static_w,
-- docs/gpu-model.md "The floor under a deep cap"): the value at which the
-- job at a locked clock draws what the Perseus plan-2 run drew per GPU.
-- Plan 2 is the frontier's slowest plan, its ranks' mean SM clocks within
-- 1028-1050 MHz; the job runs at the grid step nearest their mean.  Its
-- power rises with the term, so bisection.
local function refit_interface(ds)
  local path = data .. "/measured/" .. ds.file
  local rows = read_csv(path, { "plan", "iteration_time_s", "energy_j" })
  local r2
  for _, r in ipairs(rows) do
    if num(r, "plan", path) == 2 then r2 = r end
  end
  if not r2 then fail(path .. ": no plan 2") end
  local mhz = 0
  for k = 0, ds.pp - 1 do
    mhz = mhz + num(r2, "mean_sm_mhz_rank" .. k, path, 0) / ds.pp
  end
  local g = js.gpu(ds.gpu.name)
  local f = g.sm_min_mhz + g.sm_step_mhz
            * math.floor((mhz - g.sm_min_mhz) / g.sm_step_mhz + 0.5)
  local target = num(r2, "energy_j", path, 0)
                 / num(r2, "iteration_time_s", path, 0) / ds.pp
  local _, w = job(ds.model, ds.gpu, ds.pp, ds.mbs, ds.m, ds.method, path)
  local function power(s)
    js.gpu.define{ name = "FIDELITY-IF", base = ds.gpu.name,
                   source = "joulesim fidelity --refit", p_mem_static_w = s }
    local c = js.cluster{ gpu = "FIDELITY-IF", gpus = ds.pp,
                          gpus_per_node = ds.pp, network = ds.gpu.network }
    return js.simulate{ cluster = c, workload = w,
                        policy = js.policy.fixed{ sm = f } }.avg_power_w
  end
  local lo, hi = 0, 100
  for _ = 1, 20 do
    local mid = (lo + hi) / 2
    if power(mid) < target then lo = mid else hi = mid end
  end
  print(("  refit on plan 2 (ranks' mean %.1f MHz, run at %d MHz, %.1f W "
         .. "per GPU): p_mem_static_w %.1f W"):format(mhz, f, target,
                                                    (lo + hi) / 2))
end

local function stage_times(ds)
  local p = stage_prediction(ds)
  heading(p.file, "the plan-0 run, per stage (" .. ds.gpu.name .. ")")
  print("  " .. p.approx)
  print(("  %5s %9s %9s %7s | %9s %9s %7s | %9s %9s %7s"):format("stage",
        "F m s", "F p s", "err %", "B m s", "B p s", "err %", "E m J",
        "E p J", "err %"))
  local ferr, berr, eerr = {}, {}, {}
  for _, st in ipairs(p.stages) do
    local f, b, e = pct(st.fp, st.fm), pct(st.bp, st.bm), pct(st.ep, st.em)
    ferr[#ferr + 1], berr[#berr + 1], eerr[#eerr + 1] = f, b, e
    print(("  %5d %9.5f %9.5f %+7.1f | %9.5f %9.5f %+7.1f | %9.1f %9.1f "
           .. "%+7.1f"):format(st.stage, st.fm, st.fp, f, st.bm, st.bp, b,
           st.em, st.ep, e))
    row_out(p.file, { case = ds.model, stage = st.stage + 0.0,
                      meas_forward_s = st.fm, pred_forward_s = st.fp,
                      forward_err_pct = f, meas_backward_s = st.bm,
                      pred_backward_s = st.bp, backward_err_pct = b,
                      meas_energy_j = st.em, pred_energy_j = st.ep,
                      energy_err_pct = e, role = ds.role })
  end
  local te = pct(p.time_s, p.time_m)
  print(("  iteration: measured %.3f s, predicted %.3f s (%+.1f%%)"):format(
    p.time_m, p.time_s, te))
  record(p.file, ds.model, "forward per microbatch, max abs err",
         maxabs(ferr), "%", ds.role)
  record(p.file, ds.model, "backward per microbatch, max abs err",
         maxabs(berr), "%", ds.role)
  record(p.file, ds.model, "iteration time, abs err", math.abs(te), "%",
         ds.role)
  record(p.file, ds.model, "energy per GPU, max abs err", maxabs(eerr), "%",
         "predicted")
end

-- The same runs at every locked clock the plans used (_stage_clocks.csv:
-- per stage and pass, the mean time of one microbatch over every
-- instruction of every measured plan run at that SM clock): the job
-- simulated at each clock locked on every GPU (js.policy.fixed; the power
-- cap still binds), each stage's time over its time at the top clock
-- (plan 0), against the measured ratio.  What it checks is the clock
-- response alone: the absolute times are the _stage_times case's.
local function stage_clocks(ds)
  local file = ds.file:gsub("_plans%.csv$", "_stage_clocks.csv")
  local path = data .. "/measured/" .. file
  local rows = read_csv(path, { "rank", "pass", "sm_mhz", "time_s" })
  local c, w, approx = job(ds.model, ds.gpu, ds.pp, ds.mbs, ds.m, ds.method,
                           path)
  local info = js.trace.info(w)
  local top = math.tointeger(js.gpu(ds.gpu.name).sm_max_mhz)
  local cache = {}
  -- Per-microbatch forward and backward time of stage k at clock f.
  local function model_at(f, k)
    if not cache[f] then
      cache[f] = js.simulate{ cluster = c, workload = w,
                              policy = js.policy.fixed{ sm = f } }
    end
    local g = cache[f].per_gpu[k + 1]
    local ph, busy = info.busy_by_phase_s[k + 1], info.busy_s[k + 1]
    local scale = busy > 0 and g.kernel_s / busy or 1
    return { forward = ph.forward * scale / ds.m,
             backward = ph.backward * scale / ds.m }
  end
  -- Each row's stage, pass and clock, checked.
  local function key(r)
    local k = math.tointeger(num(r, "rank", path, -1))
    local f = math.tointeger(num(r, "sm_mhz", path, 0))
    if k == nil or k >= ds.pp or f == nil
       or (r.pass ~= "forward" and r.pass ~= "backward") then
      fail(("%s:%d: rank 0..%d, a whole sm_mhz and pass forward or "
            .. "backward expected"):format(path, r._line, ds.pp - 1))
    end
    return k, r.pass, f
  end
  local meas_top = {}
  for _, r in ipairs(rows) do
    local k, pass, f = key(r)
    if f == top then meas_top[k .. pass] = num(r, "time_s", path, 0) end
  end
  heading(file, "each stage at the plans' locked clocks, over its time at "
          .. top .. " MHz (" .. ds.gpu.name .. ")")
  print("  " .. approx)
  print(("  %5s %8s %6s | %8s %8s %7s"):format("stage", "pass", "MHz",
        "t/t0 m", "t/t0 p", "err %"))
  local errs = { forward = {}, backward = {} }
  for _, r in ipairs(rows) do
    local k, pass, f = key(r)
    local t0 = meas_top[k .. pass]
    if not t0 then fail(("%s:%d: no %d MHz row for rank %d, %s"):format(
                        path, r._line, top, k, pass)) end
    if f ~= top then
      local tm = num(r, "time_s", path, 0) / t0
      local tp = model_at(f, k)[pass] / model_at(top, k)[pass]
      local e = pct(tp, tm)
      table.insert(errs[pass], e)
      print(("  %5d %8s %6d | %8.4f %8.4f %+7.2f"):format(k, pass, f, tm, tp,
            e))
      row_out(file, { case = ds.model, stage = k + 0.0, pass = pass,
                      sm_mhz = f, meas_time_norm = tm, pred_time_norm = tp,
                      time_err_pct = e, role = "predicted" })
    end
  end
  for _, pass in ipairs{ "forward", "backward" } do
    record(file, ds.model,
           pass .. " at a locked clock / top clock, max abs err",
           maxabs(errs[pass]), "%", "predicted")
  end
end

-- ---- kernels through js.validate (out of the box) ----------------------------------

-- Writes a per-kernel profile (kernel,sm_mhz,mem_mhz,time_s,energy_j,class)
-- to a temporary file and validates it out of the box (no fit): the
-- model's time is anchored at each kernel's top-clock point, the energy is
-- predicted at every point.
local function validate_points(rows, gpu, limit)
  local tmp = os.tmpname()
  local f = assert(io.open(tmp, "w"))
  f:write("kernel,sm_mhz,mem_mhz,time_s,energy_j,class\n")
  for _, r in ipairs(rows) do
    f:write(("%s,%d,%d,%.9g,%.9g,%s\n"):format(r.kernel, r.sm, r.mem, r.t,
                                               r.e, r.class))
  end
  f:close()
  local ok, rep = pcall(js.validate, { profile = tmp, gpu = gpu, fit = "none",
                                       power_limit_w = limit, points = true })
  os.remove(tmp)
  if not ok then error(rep, 0) end
  return rep.points
end

-- The KernelTuner kernel: FP32 on the CUDA cores, compute-bound (its time
-- scales as 1/f), far from the power limit.  Its FLOPs are not published
-- and its activity (a light load: 153 W at 1410 MHz) is unknown, so both
-- are anchored at the 1410 MHz point: the FLOPs make the model's time
-- there the measured one, and the activity its power there (a one-point
-- anchor, stated in the role).  Every other clock is predicted: the time
-- by the roofline, the power by V(f) (the A100-PCIE-80GB entry's V(f) was
-- fitted to this sweep, so the curve's shape is a fit, the absolute
-- watts away from the anchor a check of it).
local function kerneltuner(ds)
  local path = data .. "/measured/" .. ds.file
  local rows = read_csv(path, { "sm_mhz", "time_ms", "power_w" })
  heading(ds.file, "a compute-bound FP32 kernel at locked SM clocks "
          .. "(A100-PCIE-80GB's V(f), 250 W: the 40 GB board's limit)")
  table.sort(rows, function(x, y) return num(x, "sm_mhz", path, 0)
                                         > num(y, "sm_mhz", path, 0) end)
  local top = rows[1]
  local f0 = num(top, "sm_mhz", path, 0)
  local t0 = num(top, "time_ms", path, 0) * 1e-3
  local p0 = num(top, "power_w", path, 0)
  local base = js.gpu("A100-PCIE-80GB")
  -- FLOPs from the time at f0 (compute-bound: t = F / (eff n_sm fpc f)).
  local probe = js.gpu.price{ gpu = "A100-PCIE-80GB", class = "other",
                              flops = 1e12, math = "fp32", sm_mhz = f0,
                              power_limit_w = 250, cap = false }
  local flops = 1e12 * t0 / probe.time_s
  -- Activity of class "other" from the power at f0: P is affine in it.
  local function priced(act, f, cap)
    js.gpu.define{ name = "FIDELITY-KT", base = "A100-PCIE-80GB",
                   source = "joulesim fidelity: KernelTuner anchor",
                   ["activity.other"] = act }
    return js.gpu.price{ gpu = "FIDELITY-KT", class = "other", flops = flops,
                         math = "fp32", sm_mhz = f, power_limit_w = 250,
                         cap = cap }
  end
  local pa, pb = priced(0, f0, false).power_w, priced(1, f0, false).power_w
  local act = (p0 - pa) / (pb - pa)
  print(("  anchored at %d MHz: %.3g FLOP, activity %.3f (%s: %.0f W at a "
         .. "GEMM's activity)"):format(f0, flops, act, base.name, pb))
  print(("  %6s %9s %9s %7s | %8s %8s %7s | %8s %8s %8s"):format(
    "SM MHz", "t meas ms", "t pred ms", "err %", "P meas W", "P pred W",
    "err %", "P/P0 m", "P/P0 p", "err pt"))
  local te, pe, ne = {}, {}, {}
  for _, r in ipairs(rows) do
    local f = num(r, "sm_mhz", path, 0)
    local tm = num(r, "time_ms", path, 0) * 1e-3
    local pm = num(r, "power_w", path, 0)
    local q = priced(act, f)
    local a, b, c = 100 * (q.time_s / tm - 1), 100 * (q.power_w / pm - 1),
                    100 * (q.power_w / p0 - pm / p0)
    te[#te + 1], pe[#pe + 1], ne[#ne + 1] = a, b, c
    print(("  %6d %9.3f %9.3f %+7.2f | %8.1f %8.1f %+7.1f | %8.4f %8.4f %+8.2f")
          :format(f, 1e3 * tm, 1e3 * q.time_s, a, pm, q.power_w, b,
                  pm / p0, q.power_w / p0, c))
    row_out(ds.file, { case = "synthetic_fp32", sm_mhz = f,
                       meas_time_s = tm, pred_time_s = q.time_s,
                       meas_power_w = pm, pred_power_w = q.power_w,
                       time_err_pct = a, power_err_pct = b,
                       power_norm_err_pt = c,
                       role = "fitted (V(f) shape; anchored at 1410 MHz)" })
  end
  local role = "fitted (the A100 PCIe V(f) was fitted to this sweep; time "
               .. "and power anchored at 1410 MHz)"
  record(ds.file, "synthetic_fp32", "time, max abs err", maxabs(te), "%", role)
  record(ds.file, "synthetic_fp32", "power, max abs err", maxabs(pe), "%", role)
  record(ds.file, "synthetic_fp32", "normalised power P/P(1410), max abs err",
         maxabs(ne), "pt", role)
end

-- The study's forward kernels (GPT-3 XL in llm.c: B = 40, T = 1024,
-- C = 2048, 16 heads of 128, vocabulary 50257 padded to 50304, BF16
-- activations and tensor-core GEMMs): FLOPs and DRAM bytes of each kernel
-- from its shapes (the attention softmax touches the causal half).
local function study_shapes()
  local B, T, C, NH, Vp = 40, 1024, 2048, 16, 50304
  local BT, e = B * T, 2
  local att = B * NH * T * T
  local half = B * NH * T * (T + 1) / 2
  local function gemm(m, k, n, batch)
    batch = batch or 1
    return { flops = 2 * batch * m * k * n,
             bytes = e * batch * (m * k + k * n + m * n), math = "bf16" }
  end
  local function vec(bytes, flops) return { flops = flops, bytes = bytes, math = "fp32" } end
  return {
    wte_wpe_encoder_forward = vec(e * (2 * BT * C + T * C), BT * C),
    layernorm_forward = vec(e * 2 * BT * C + 8 * BT, 8 * BT * C),
    qkv_gemm = gemm(BT, C, 3 * C),
    permute = vec(e * 2 * BT * 3 * C, 0),
    attention_qk_gemm = gemm(T, 128, T, B * NH),
    softmax_forward = vec(e * 2 * half, 5 * half),
    attention_av_gemm = gemm(T, T, 128, B * NH),
    unpermute = vec(e * 2 * BT * C, 0),
    attention_proj_gemm = gemm(BT, C, C),
    residual_forward = vec(e * 3 * BT * C, BT * C),
    fc_gemm = gemm(BT, C, 4 * C),
    gelu_forward = vec(e * 2 * BT * 4 * C, 15 * BT * 4 * C),
    fc_proj_gemm = gemm(BT, 4 * C, C),
    residual_forward_2 = vec(e * 3 * BT * C, BT * C),
    lm_head_gemm = gemm(BT, C, Vp),
    fused_softmax_cross_entropy = vec(e * 2 * BT * Vp, 10 * BT * Vp),
  }, att
end

-- What a clock pair lowers against (auto, auto): "memory", "core", "both"
-- or "none" (9251 and 9501 MHz count as the memory clock at auto).
local function pair_type(mem, core, top_mem)
  local m = mem ~= "auto" and tonumber(mem) < 9000
  local c = core ~= "auto"
  return (m and c) and "both" or m and "memory" or c and "core" or "none"
end

-- --refit: refits the RTX-3080-Ti parameters that come from the study's
-- GEMM rows (docs/gpu-model.md): the memory interface's static power
-- p_mem_static_w, p_dyn_w and the boost clock the driver reaches under
-- load (sm_default_mhz), by a coarse-to-fine grid on the squared errors of
-- the GEMMs' time and energy change at 5001 MHz memory (points) and of
-- their time at (auto, auto) (in %, a tenth of the weight: Fig. 5 is read
-- to about 10%).  Prints the refit; the catalogue carries it rounded.
local function refit_study(rows, path, shapes)
  local gemms = {}
  for _, r in ipairs(rows) do
    if r.class == "gemm" and r.opt_mem_mhz ~= "auto"
       and tonumber(r.opt_mem_mhz) < 9000 then
      gemms[#gemms + 1] = r
    end
  end
  local function objective(S, D, F)
    js.gpu.define{ name = "FIDELITY-3080TI", base = "RTX-3080-Ti",
                   source = "joulesim fidelity --refit", p_mem_static_w = S,
                   p_dyn_w = D, sm_default_mhz = F }
    local sse = 0
    for _, r in ipairs(gemms) do
      local sh = shapes[r.kernel]
      local function at(mem)
        return js.gpu.price{ gpu = "FIDELITY-3080TI", class = "gemm",
                             flops = sh.flops, bytes = sh.bytes, math = sh.math,
                             mem_mhz = mem, power_limit_w = 350 }
      end
      local a, o = at(0), at(tonumber(r.opt_mem_mhz))
      local dt = 100 * (o.time_s / a.time_s - 1) - num(r, "dtime_pct", path)
      local de = 100 * (o.energy_j / a.energy_j - 1) - num(r, "denergy_pct", path)
      local ta = 100 * (a.time_s / (num(r, "t_auto_ms", path, 0) * 1e-3) - 1)
      sse = sse + dt * dt + de * de + 0.1 * ta * ta
    end
    return sse
  end
  local g = js.gpu("RTX-3080-Ti")
  local best = { math.huge }
  local function grid(s0, s1, ds, d0, d1, dd, f0, f1, df)
    for S = s0, s1, ds do
      for D = d0, d1, dd do
        for F = f0, f1, df do
          local F15 = g.sm_min_mhz + g.sm_step_mhz
                      * math.floor((F - g.sm_min_mhz) / g.sm_step_mhz + 0.5)
          if F15 <= g.sm_max_mhz then
            local v = objective(S, D, F15)
            if v < best[1] then best = { v, S, D, F15 } end
          end
        end
      end
    end
  end
  grid(0, 200, 10, 200, 500, 20, 1500, 2100, 60)
  local _, S, D, F = table.unpack(best)
  grid(math.max(0, S - 10), S + 10, 2, math.max(100, D - 20), D + 20, 4,
       F - 60, F + 60, 15)
  print(("  refit on the %d GEMM rows: p_mem_static_w %.0f W, p_dyn_w %.0f W, "
         .. "sm_default_mhz %d (objective %.2f)"):format(#gemms, best[2],
         best[3], math.tointeger(best[4]), best[1]))
end

local function study(ds)
  local path = data .. "/measured/" .. ds.file
  local rows = read_csv(path, { "kernel", "class", "opt_mem_mhz", "opt_core_mhz",
                                "dtime_pct", "denergy_pct", "t_auto_ms",
                                "e_auto_j" })
  local gpu = "RTX-3080-Ti"
  local g = js.gpu(gpu)
  heading(ds.file, "the study's kernels (" .. gpu .. ", 350 W): time and "
          .. "energy change at the measured optimal clock pair against "
          .. "(auto, auto), and the model's own best pair")
  print("  kernels priced with FLOPs and bytes from llm.c's GPT-3 XL shapes; "
        .. "(auto, auto) is the driver's default clocks under the 350 W cap")
  local shapes = study_shapes()
  local mems = g.mem_mhz
  local function price(r, sh, core, mem)
    return js.gpu.price{ gpu = gpu, class = r.class, flops = sh.flops,
                         bytes = sh.bytes, math = sh.math,
                         sm_mhz = core == "auto" and 0 or tonumber(core),
                         mem_mhz = mem == "auto" and 0 or tonumber(mem),
                         power_limit_w = 350 }
  end
  print(("  %-28s %5s %5s | %7s %7s %6s | %7s %7s %6s | %5s %5s %6s | %-6s %-6s"):format(
    "kernel", "mem", "core", "dT m%", "dT p%", "err", "dE m%", "dE p%",
    "err", "P m", "P p", "t err%", "type m", "type p"))
  local terr, eerr, aerr, miss = {}, {}, {}, 0
  for _, r in ipairs(rows) do
    local sh = shapes[r.kernel]
    if not sh then
      fail(("%s:%d: unknown kernel '%s' (the study's forward kernels are "
            .. "ids 0-15)"):format(path, r._line, r.kernel))
    end
    local name = r.kernel .. "#" .. r.id
    local a = price(r, sh, "auto", "auto")
    local o = price(r, sh, r.opt_core_mhz, r.opt_mem_mhz)
    local dtm, dem = num(r, "dtime_pct", path), num(r, "denergy_pct", path)
    local dtp = 100 * (o.time_s / a.time_s - 1)
    local dep = 100 * (o.energy_j / a.energy_j - 1)
    local tm = num(r, "t_auto_ms", path, 0) * 1e-3
    local pm = num(r, "e_auto_j", path, 0) / tm
    local ta = 100 * (a.time_s / tm - 1)
    -- The model's own best pair: least energy within the largest measured
    -- slowdown (+2%), over every memory clock and SM clock step.
    local best, bm, bc = a.energy_j, "auto", "auto"
    for _, m in ipairs(mems) do
      for f = g.sm_min_mhz, g.sm_max_mhz, g.sm_step_mhz do
        local q = price(r, sh, f, m)
        if q.time_s <= 1.02 * a.time_s and q.energy_j < best - 1e-12 then
          best = q.energy_j
          bm = m >= 9000 and "auto" or tostring(math.tointeger(m))
          bc = f == g.sm_default_mhz and "auto" or tostring(math.tointeger(f))
        end
      end
    end
    local tym = pair_type(r.opt_mem_mhz, r.opt_core_mhz)
    -- The model's pair, by the knob its saving comes from: the memory (or
    -- core) clock alone when that keeps 80% of the saving.
    local typ = "none"
    if best < a.energy_j then
      local save = a.energy_j - best
      local mo = price(r, sh, "auto", bm).energy_j
      local co = price(r, sh, bc, "auto").energy_j
      if bm ~= "auto" and a.energy_j - mo >= 0.8 * save then typ = "memory"
      elseif bc ~= "auto" and a.energy_j - co >= 0.8 * save then typ = "core"
      else typ = pair_type(bm, bc) end
    end
    if tym ~= "none" and tym ~= typ then miss = miss + 1 end
    terr[#terr + 1], eerr[#eerr + 1], aerr[#aerr + 1] = dtp - dtm, dep - dem, ta
    print(("  %-28s %5s %5s | %+7.2f %+7.2f %+6.2f | %+7.2f %+7.2f %+6.2f | "
           .. "%5.0f %5.0f %+6.1f | %-6s %-6s"):format(name, r.opt_mem_mhz,
           r.opt_core_mhz, dtm, dtp, dtp - dtm, dem, dep, dep - dem, pm,
           a.power_w, ta, tym, typ))
    row_out(ds.file, { case = name, opt_mem = r.opt_mem_mhz,
                       opt_core = r.opt_core_mhz, meas_dtime_pct = dtm,
                       pred_dtime_pct = dtp, meas_denergy_pct = dem,
                       pred_denergy_pct = dep, meas_power_w = pm,
                       pred_power_w = a.power_w, auto_time_err_pct = ta,
                       meas_type = tym, pred_type = typ,
                       pred_best_mem = bm, pred_best_core = bc,
                       role = ds.role(r) })
  end
  print(("  best-pair type as measured: %d of %d kernels"):format(#rows - miss,
        #rows))
  if opt.refit then refit_study(rows, path, shapes) end
  local role = "predicted (the GEMM rows: fitted, see docs/gpu-model.md)"
  record(ds.file, "forward kernels", "time change at the optimal pair, max abs err",
         maxabs(terr), "pt", role)
  record(ds.file, "forward kernels", "energy change at the optimal pair, max abs err",
         maxabs(eerr), "pt", role)
  record(ds.file, "forward kernels", "time at (auto, auto), max abs err",
         maxabs(aerr), "%", role)
  record(ds.file, "forward kernels", "best pair of another type",
         miss, "kernels", role)
end

-- ---- stage profiles ------------------------------------------------------------------

-- The catalogue's A100-SXM4-80GB and A40 power models were fitted to the
-- GPT-3 175B profiles (joulesim gpus NAME shows the sources): those rows
-- are fitted, the Bloom ones (same GPUs, another model) predictions.
local PROFILES = {
  { file = "gpt3-175b+a100_sxm_bf16.csv", gpu = "A100-SXM4-80GB", limit = 500,
    role = "fitted (the catalogue's A100-SXM4 fit)" },
  { file = "bloom+a100_sxm_bf16.csv", gpu = "A100-SXM4-80GB", limit = 500,
    role = "predicted (fit on GPT-3 175B)" },
  { file = "gpt3-175b+a40_bf16.csv", gpu = "A40", limit = 300,
    role = "fitted (the catalogue's A40 fit)" },
  { file = "bloom+a40_bf16.csv", gpu = "A40", limit = 300,
    role = "predicted (fit on GPT-3 175B)" },
}

-- js.validate returns its errors as fractions (docs/validation.md); the
-- record and the tables give them in %, as `joulesim validate` prints
-- them: the out-of-the-box columns are its --fit none overall row (every
-- clock), the held-out ones its default overall row's fitted columns
-- (tests/scenario-fidelity.sh compares the two).
local function profiles()
  local dir = data .. "/profiles/perseus-emulation"
  if not exists(dir .. "/" .. PROFILES[1].file) then dir = data .. "/profiles" end
  local any = false
  local held_role = "predicted (the held-out 25% of clocks, seed 1; "
                    .. "refitted on the other 75%)"
  for _, p in ipairs(PROFILES) do
    local name = "profiles/" .. p.file
    if selected(name) then
      if not any then
        heading("profiles/", "measured stage profiles through js.validate, "
                .. "MAPE in %: out of the box on every clock, and on the "
                .. "held-out 25% of the SM clocks after a refit on the other "
                .. "75% (seed 1)")
        print(("  %-30s %-16s | %9s %9s | %9s %9s"):format("profile", "GPU",
              "oob T %", "oob E %", "held T %", "held E %"))
        any = true
      end
      local path = dir .. "/" .. p.file
      if not exists(path) then fail(path .. ": no such file") end
      local r = js.validate{ profile = path, gpu = p.gpu, power_limit_w = p.limit,
                             seed = 1 }
      local o = r.overall
      local ot, oe = 100 * o.oob_all.time_mape, 100 * o.oob_all.energy_mape
      local ht, he = 100 * o.fit.time_mape, 100 * o.fit.energy_mape
      print(("  %-30s %-16s | %9.2f %9.2f | %9.2f %9.2f"):format(p.file, p.gpu,
            ot, oe, ht, he))
      row_out("profiles", { case = p.file, gpu = p.gpu,
                            oob_time_mape_pct = ot, oob_energy_mape_pct = oe,
                            heldout_time_mape_pct = ht,
                            heldout_energy_mape_pct = he })
      record(name, p.file, "out of the box, energy MAPE", oe, "%", p.role)
      record(name, p.file, "out of the box, time MAPE", ot, "%",
             p.role .. "; time anchored at the top clock")
      record(name, p.file, "held-out clocks after a refit, energy MAPE", he,
             "%", held_role)
      record(name, p.file, "held-out clocks after a refit, time MAPE", ht,
             "%", held_role)
    end
  end
end

-- ---- Megatron-LM weak scaling (published) ---------------------------------------------

-- Narayanan et al., SC'21 (arXiv 2104.04473) Table 1, as ../shared/data/
-- README.md gives it: sequence 2048, vocabulary 51,200, full recompute,
-- mixed precision on A100 SXM4 80GB (DGX A100).  TFLOP/s per GPU count the
-- recomputed forward: F = 96 B s l h^2 (1 + s/(6h) + V/(16 l h)).  The
-- microbatch size is not in the table: 1 here (an assumption), and 1F1B
-- throughout (the paper interleaved where it helped).
local MEGATRON = {
  -- params, layers, hidden, heads, TP, PP, GPUs, global batch, TFLOP/s
  { "1.7B", 24, 2304, 24, 1, 1, 32, 512, 137 },
  { "3.6B", 30, 3072, 32, 2, 1, 64, 512, 138 },
  { "7.5B", 36, 4096, 32, 4, 1, 128, 512, 142 },
  { "18.4B", 40, 6144, 48, 8, 1, 256, 1024, 135 },
  { "39.1B", 48, 8192, 64, 8, 2, 512, 1536, 138 },
  { "76.1B", 60, 10240, 80, 8, 4, 1024, 1792, 140 },
  { "145.6B", 80, 12288, 96, 8, 8, 1536, 2304, 148 },
  { "310.1B", 96, 16384, 128, 8, 16, 1920, 2160, 155 },
  { "529.6B", 105, 20480, 128, 8, 35, 2520, 2520, 163 },
  { "1008.0B", 128, 25600, 160, 8, 64, 3072, 3072, 163 },
}
local MEGATRON_NAME = "published/megatron-weak-scaling"

-- The fit half (--fit megatron fits impl megatron's factors on these
-- rows); the other rows are predictions.
local MEGATRON_FIT = { [1] = true, [3] = true, [5] = true, [7] = true,
                       [9] = true }

-- Simulated TFLOP/s per GPU of table row r, counted as the paper does.
local function megatron_tflops(r)
  local _, l, h, a, tp, pp, n, B = table.unpack(r)
  local dp = n // (tp * pp)
  local c = js.cluster{ gpu = "A100-SXM4-80GB", gpus = n, network = "dgx-a100" }
  local w = js.gpt{ layers = l, hidden = h, heads = a, vocab = 51200,
                    seq_len = 2048, tp = tp, pp = pp, dp = dp,
                    microbatch_size = 1, microbatches = B // dp,
                    recompute = true, fold = true, efficiency = EFF.megatron }
  local res = js.simulate{ cluster = c, workload = w }
  local sq, V = 2048.0, 51200.0
  local F = 96.0 * B * sq * l * h * h * (1 + sq / (6 * h) + V / (16 * l * h))
  return F / res.time_s / n * 1e-12
end

local function median_abs(list)
  local a = {}
  for i, v in ipairs(list) do a[i] = math.abs(v) end
  table.sort(a)
  local n = #a
  if n == 0 then return 0 end
  return n % 2 == 1 and a[(n + 1) // 2] or (a[n // 2] + a[n // 2 + 1]) / 2
end

local function megatron()
  heading(MEGATRON_NAME, "Megatron-LM weak scaling, simulated TFLOP/s per GPU "
          .. "against published (A100-SXM4-80GB, dgx-a100, mbs 1, 1F1B, "
          .. "folded; impl megatron fitted on the rows marked fit)")
  print(("  %8s %6s %5s %10s %10s %8s  %s"):format("params", "GPUs", "TPxPP",
        "TF/s pred", "TF/s pub", "err %", "role"))
  local errs = { fit = {}, pred = {} }
  for i, r in ipairs(MEGATRON) do
    local name, _, _, _, tp, pp, n, _, pub = table.unpack(r)
    local tf = megatron_tflops(r)
    local e = pct(tf, pub)
    local half = MEGATRON_FIT[i] and "fit" or "pred"
    table.insert(errs[half], e)
    print(("  %8s %6d %2dx%-2d %10.1f %10d %+8.1f  %s"):format(name, n, tp,
          pp, tf, pub, e, half == "fit" and "fitted" or "predicted"))
    row_out(MEGATRON_NAME, { case = name, gpus = n, pred_tflops = tf,
                             pub_tflops = pub, tflops_err_pct = e,
                             role = half == "fit" and "fitted" or "predicted" })
  end
  local fit_role = "fitted (impl megatron's efficiency factors)"
  local pred_role = "predicted (impl megatron fitted on the odd rows)"
  record(MEGATRON_NAME, "odd rows (fitted)", "TFLOP/s per GPU, max abs err",
         maxabs(errs.fit), "%", fit_role)
  record(MEGATRON_NAME, "odd rows (fitted)", "TFLOP/s per GPU, median abs err",
         median_abs(errs.fit), "%", fit_role)
  record(MEGATRON_NAME, "even rows (held out)", "TFLOP/s per GPU, max abs err",
         maxabs(errs.pred), "%", pred_role)
  record(MEGATRON_NAME, "even rows (held out)",
         "TFLOP/s per GPU, median abs err", median_abs(errs.pred), "%",
         pred_role)
end

-- ---- --fit: the generator's efficiency factors ----------------------------------------

-- The factors a fit varies, per implementation: impl megatron's GEMM and
-- memory factors (attention stays at the catalogue's 1: the table does not
-- separate it, the fit leaves it there within 0.1%); impl hf's three.
local FIT_PARAMS = { megatron = { "gemm", "memory" },
                     hf = { "gemm", "attention", "memory" } }

-- The factors of log-space coordinates x (FIT_PARAMS[impl] order; the
-- rest 1), kept in (0, 2]; the generator holds every efficiency at or
-- below the roofline.
local function factors(impl, x)
  local f = { gemm = 1, attention = 1, memory = 1 }
  for i, k in ipairs(FIT_PARAMS[impl]) do f[k] = math.min(2, math.exp(x[i])) end
  return f
end

local function fit_megatron()
  local function loss(x)
    EFF.megatron = factors("megatron", x)
    local sum = 0
    for i, r in ipairs(MEGATRON) do
      if MEGATRON_FIT[i] then sum = sum + (megatron_tflops(r) / r[9] - 1) ^ 2 end
    end
    return sum
  end
  return loss
end

local function fit_hf()
  local fit_ds
  for _, ds in ipairs(PERSEUS) do if ds.fit then fit_ds = ds end end
  local function loss(x)
    EFF.hf = factors("hf", x)
    local p = stage_prediction(fit_ds)
    local sum = (p.time_s / p.time_m - 1) ^ 2
    for _, st in ipairs(p.stages) do
      sum = sum + (st.fp / st.fm - 1) ^ 2 + (st.bp / st.bm - 1) ^ 2
    end
    return sum
  end
  return loss
end

local function run_fit(impl)
  heading("--fit " .. impl, impl == "megatron"
          and "impl megatron's factors on the odd rows of the weak-scaling table"
          or "impl hf's factors on the GPT-3 2.7B A40 plan-0 stage times")
  local loss = impl == "megatron" and fit_megatron() or fit_hf()
  local x0 = {}
  for i = 1, #FIT_PARAMS[impl] do x0[i] = 0 end
  local x, v = js.nelder_mead{ f = loss, x = x0, step = -0.2, iterations = 120 }
  local f = factors(impl, x)
  EFF[impl] = f
  print(("  fitted: gemm = %.4f, attention = %.4f, memory = %.4f (sum of "
         .. "squared relative errors %.3g)"):format(f.gemm, f.attention,
         f.memory, v))
  if impl == "megatron" then
    megatron()
  else
    for _, ds in ipairs(PERSEUS) do stage_times(ds) end
  end
end

-- ---- real traces: replayed step against the measured one (issue 16) -------------------

-- Per shared Kineto trace: the measured steady-state step is the GPU span
-- of the whole trace (first GPU start to last GPU end) divided by the
-- profiled steps; the CPU step durations are shown beside it.  The default
-- import (the median step) is replayed at the trace's own clocks on its
-- reference GPU, once with the GPU side only (GPU order: the replay before
-- host modelling) and once with the host streams; the whole trace
-- (step = "all") is replayed against the measured span.  Then
-- js.policy.kernel{ slowdown = 0 } on both: the saving the host gaps make
-- possible (the share of the host-modelled saving that the GPU-only replay
-- does not find is the share from slack).
local TRACES = { "a100_2rank_nccl_rank0", "sampled_world128_rank0",
                 "sampled_world128_rank1",
                 -- issue 30: the traces the host rules were found on ...
                 "hta_ns_resolution_rank0", "hta_trace_diff_test_rank1",
                 "hta_negative_queue_rank0",
                 -- ... and those only replayed after (tests/data/traces/README.md)
                 "hta_trace_diff_control_rank3", "hta_df_index_resolver_rank1",
                 "kineto_resnet50_workers0", "kineto_resnet50_workers4" }

local function trace_path(name)
  for _, p in ipairs{ data .. "/traces/kineto/" .. name .. ".json.gz",
                      data .. "/traces/" .. name .. ".json.gz" } do
    if exists(p) then return p end
  end
  return nil
end

local function replay(w)
  local info = js.trace.info(w)
  local c = js.cluster{ gpu = info.layout.ref_gpu or "A100-SXM4-80GB",
                        gpus = info.ranks }
  return js.simulate{ cluster = c, workload = w }, c
end

local function real_trace(name, path)
  local ds = "traces/" .. name
  heading(ds, "replayed step against the measured steady-state step")
  local host = js.trace.import{ path }
  local gpu = js.trace.import{ path, gpu_only = true }
  local all = js.trace.import{ path, step = "all" }
  local pv = js.trace.info(host).provenance
  local span = tonumber(pv.trace_gpu_span_ns) * 1e-9
  local cpu = {}
  for v in (pv.trace_step_ns or ""):gmatch("%d+") do cpu[#cpu + 1] = tonumber(v) * 1e-9 end
  local steps = math.max(#cpu, 1)
  local meas = span / steps
  -- The steady-state period: the mean interval between the ends of the GPU
  -- work launched in consecutive steps (three steps or more, so that it is
  -- a mean of intervals); the span above counts once a lag the GPU keeps
  -- behind the host (docs/trace-import.md, "The measured step").
  local ends = {}
  for v in (pv.trace_step_gpu_end_ns or ""):gmatch("-?%d+") do ends[#ends + 1] = tonumber(v) * 1e-9 end
  local period = #ends >= 3 and ends[1] >= 0 and ends[#ends] >= 0
                 and (ends[#ends] - ends[1]) / (#ends - 1) or nil
  local cs = {}
  for _, v in ipairs(cpu) do cs[#cs + 1] = ("%.3f"):format(v * 1e3) end
  print(("  measured: GPU span %.3f ms over %d steps = %.3f ms per step; CPU "
         .. "steps %s ms; imported %s"):format(span * 1e3, steps, meas * 1e3,
         table.concat(cs, ", "), pv.iteration))
  local rg, c = replay(gpu)
  local rh = replay(host)
  local ra = replay(all)
  local eg = 100 * (rg.time_s / meas - 1)
  local eh = 100 * (rh.time_s / meas - 1)
  local ea = 100 * (ra.time_s / span - 1)
  print(("  %-34s %12s %12s %8s"):format("replay", "pred ms", "meas ms", "err %"))
  print(("  %-34s %12.3f %12.3f %+8.2f"):format("step, GPU order only (before)",
        rg.time_s * 1e3, meas * 1e3, eg))
  print(("  %-34s %12.3f %12.3f %+8.2f"):format("step, host streams (after)",
        rh.time_s * 1e3, meas * 1e3, eh))
  local ep = period and 100 * (rh.time_s / period - 1)
  if period then
    print(("  %-34s %12.3f %12.3f %+8.2f"):format("step vs steady-state period",
          rh.time_s * 1e3, period * 1e3, ep))
  end
  print(("  %-34s %12.3f %12.3f %+8.2f"):format("all steps, host streams",
        ra.time_s * 1e3, span * 1e3, ea))
  for _, it in ipairs(ra.iterations) do
    print(("    step %d: %.3f ms, %.3f J"):format(it.step or 0, it.time_s * 1e3,
          it.energy_j))
  end
  -- The slack the host gaps leave: kernels slowed into them for free.
  local kg = js.simulate{ cluster = c, workload = gpu,
                          policy = js.policy.kernel{ slowdown = 0 } }
  local kh = js.simulate{ cluster = c, workload = host,
                          policy = js.policy.kernel{ slowdown = 0 } }
  local sg = kg.plan and kg.plan.saving or 0
  local sh = kh.plan and kh.plan.saving or 0
  -- With slowdown 0 the whole saving is slack (the step does not grow);
  -- the share the host gaps add is what the GPU-only replay does not find.
  local extra = sh > sg and sh > 0
                and ("%.0f%% of it from the host gaps' slack"):format(
                      100 * (sh - sg) / sh)
                or "the GPU-only replay finds more (cross-stream slack)"
  print(("  js.policy.kernel{ slowdown = 0 }: saves %.2f%% with host streams "
         .. "(step %+.2f%%, all of it slack), %.2f%% in GPU order only; %s")
        :format(100 * sh, 100 * (kh.time_s / rh.time_s - 1), 100 * sg, extra))
  row_out(ds, { case = name, meas_step_s = meas, meas_span_s = span,
                pred_gpu_only_s = rg.time_s, pred_host_s = rh.time_s,
                pred_all_s = ra.time_s, meas_period_s = period or 0/0,
                err_period_pct = ep or 0/0, err_gpu_only_pct = eg,
                err_host_pct = eh, err_all_pct = ea,
                kernel_saving_host = sh, kernel_saving_gpu_only = sg,
                role = "predicted" })
  record(ds, name, "step time, GPU order only, abs err", math.abs(eg), "%",
         "predicted (the replay before host modelling)")
  record(ds, name, "step time, host streams, abs err", math.abs(eh), "%",
         "predicted")
  record(ds, name, "whole trace (step all), abs err", math.abs(ea), "%",
         "predicted")
  if period then
    record(ds, name, "step time vs steady-state period, abs err", math.abs(ep),
           "%", "predicted")
  end
end

-- ---- the H100 cap curve (h100-powercap) ------------------------------------------

-- The measured load, ViT-L/16 inference at batch 256 in TF32 (50432
-- tokens, hidden 1024, MLP 4096), stands as its FC1 GEMM: a TF32 tensor
-- GEMM of 50432 x 1024 x 4096 with 4-byte operands, compute-bound at every
-- clock (DRAM busy 17-53% of its time on the 94 GB card).  The catalogue
-- prices it as any TF32 GEMM: activity.gemm (1, the unit of p_dyn_w, a
-- dense BF16 GEMM on random data) times activity_tf32, which --refit fits
-- (the mean of a mix that also runs layernorms, softmaxes and GELUs, in
-- TF32, stands in for the TF32 tensor unit).
local VIT = { class = "gemm", math = "tf32", flops = 2 * 50432 * 1024 * 4096,
              bytes = 4 * (50432 * 1024 + 1024 * 4096 + 50432 * 4096) }
-- The caps the catalogue's fit saw; the others are held out.
local H100_FIT_CAPS = { [200] = true, [400] = true, [600] = true, [700] = true }
-- The README's other H100 facts (tests/data/measured/README.md): a bare
-- idle H100 SXM 80 GB at 345 MHz (74.7 W), the same plus a CUDA context
-- (71.8 W + 26-50 W: the model's floor at the top clock), and the 8192^3
-- BF16 GEMM's 798 TFLOP/s at 700 W on random data.
local H100_IDLE_W, H100_CONTEXT_W, H100_GEMM_TFLOPS = 74.7, 110, 798

-- Power and memory utilisation of kernel k on gpu at clock f (MHz, off
-- the 15 MHz grid: interpolated between the two grid clocks), uncapped.
local function power_at(gpu, k, f)
  local g = js.gpu(gpu)
  local lo = g.sm_min_mhz + g.sm_step_mhz
             * math.floor((f - g.sm_min_mhz) / g.sm_step_mhz)
  local hi = math.min(lo + g.sm_step_mhz, g.sm_max_mhz)
  local function q(c)
    return js.gpu.price{ gpu = gpu, class = k.class, flops = k.flops,
                         bytes = k.bytes, math = k.math, sm_mhz = c,
                         cap = false }
  end
  local a, b = q(lo), q(hi)
  local t = hi > lo and (f - lo) / (hi - lo) or 0
  return a.power_w + t * (b.power_w - a.power_w),
         a.util_memory + t * (b.util_memory - a.util_memory)
end

-- --refit: the H100 fit (docs/gpu-model.md "The H100 fit").  On the fitted
-- caps: (1) the memory rail, S + P_mem u_m, by least squares on the
-- measured rail; (2) P_const, P_leak, the load's dynamic power D, v_min,
-- the knee and the exponent by Nelder-Mead on the board power at the
-- measured clocks (+-3%, the figures' reading) and the two floor facts
-- (+-10%); (3) p_dyn_w from the BF16 GEMM (P is affine in it), and
-- activity_tf32 = D / p_dyn_w (the load is a TF32 GEMM; activity.gemm is
-- 1).  Prints the fit and what it carries to the PCIe part; the catalogue
-- carries it rounded.
local function refit_h100(rows, path)
  local base = "H100-SXM5-94GB"
  local g = js.gpu(base)
  local fit = {}
  for _, r in ipairs(rows) do
    if H100_FIT_CAPS[num(r, "power_cap_w", path, 0)] then fit[#fit + 1] = r end
  end
  -- (1) The memory rail: u_m depends on the time model only.
  local s1, su, suu, sy, suy = 0, 0, 0, 0, 0
  for _, r in ipairs(fit) do
    local _, u = power_at(base, VIT, num(r, "mean_sm_mhz", path, 0))
    local y = num(r, "memory_power_w", path, 0)
    s1, su, suu, sy, suy = s1 + 1, su + u, suu + u * u, sy + y, suy + u * y
  end
  local pm = (s1 * suy - su * sy) / (s1 * suu - su * su)
  local S = (sy - pm * su) / s1
  -- (2) The SM side, with the load's activity 1 (D is its dynamic power).
  local function define(x, dyn)
    return pcall(js.gpu.define, {
      name = "FIDELITY-H100", base = base, source = "joulesim fidelity --refit",
      p_mem_static_w = S, p_mem_w = pm, p_const_w = x[1], p_leak_w = x[2],
      p_dyn_w = dyn or x[3], v_min = x[4], f_knee_mhz = x[5],
      v_curve_exp = x[6], ["activity.gemm"] = 1, activity_tf32 = 1 })
  end
  local function objective(x)
    if x[1] < 0 or x[2] < 0 or x[3] <= 0 or x[4] < 0.5 or x[4] >= 1
       or x[5] < 500 or x[5] > 1900 or x[6] < 0.5 or x[6] > 4
       or not define(x) then
      return math.huge
    end
    local v = 0
    for _, r in ipairs(fit) do
      local p = power_at("FIDELITY-H100", VIT, num(r, "mean_sm_mhz", path, 0))
      v = v + ((p / num(r, "total_power_w", path, 0) - 1) / 0.03) ^ 2
    end
    local top = x[1] + S + x[2]
    local idle = x[1] + S + x[2] * x[4] ^ 3
    return v + ((top / H100_CONTEXT_W - 1) / 0.1) ^ 2
             + ((idle / H100_IDLE_W - 1) / 0.1) ^ 2
  end
  local function scaled(y)
    return objective{ y[1] * 10, y[2] * 10, y[3] * 100, y[4] / 10,
                      y[5] * 100, y[6] }
  end
  local best, bv
  for _, knee in ipairs{ 900, 1100, 1300 } do
    for _, e in ipairs{ 1, 2 } do
      local x, v = js.nelder_mead{ f = scaled, x = { 1, 5, 5, 7.5, knee / 100, e },
                                   step = 0.5, iterations = 1500 }
      if not bv or v < bv then best, bv = x, v end
    end
  end
  -- A simplex that has collapsed along the fit's flat valley stops short of
  -- its floor: restart from the best point with a fresh, smaller simplex
  -- until a restart gains nothing.  A restart stops once its simplex has
  -- shrunk to 1e-6 of a scaled unit, so the restarts cost a tenth of the
  -- six starts' evaluations, not as many again.
  local tol = { 1e-6, 1e-6, 1e-6, 1e-6, 1e-6, 1e-6 }
  for _ = 1, 20 do
    local x, v = js.nelder_mead{ f = scaled, x = best, step = 0.05, tol = tol,
                                 iterations = 1500 }
    if v >= bv then break end
    best, bv = x, v
  end
  local x = { best[1] * 10, best[2] * 10, best[3] * 100, best[4] / 10,
              best[5] * 100, best[6] }
  -- (3) p_dyn_w from the BF16 GEMM on the 80 GB card at 700 W.
  local gemm = { class = "gemm", math = "bf16", flops = 2 * 8192 ^ 3,
                 bytes = 2 * 3 * 8192 ^ 2 }
  local g80 = js.gpu("H100-SXM5-80GB")
  local top = js.gpu.price{ gpu = g80.name, class = "gemm", math = "bf16",
                            flops = gemm.flops, bytes = gemm.bytes, cap = false }
  local f_gemm = g80.sm_max_mhz * H100_GEMM_TFLOPS
                 / (gemm.flops / top.time_s / 1e12)
  local function p80(dyn)
    js.gpu.define{ name = "FIDELITY-H100-80", base = "H100-SXM5-80GB",
                   source = "joulesim fidelity --refit",
                   p_mem_static_w = S, p_mem_w = pm * g80.mem_bw_gbps / g.mem_bw_gbps,
                   p_const_w = x[1], p_leak_w = x[2], p_dyn_w = dyn,
                   v_min = x[4], f_knee_mhz = x[5], v_curve_exp = x[6] }
    return (power_at("FIDELITY-H100-80", gemm, f_gemm))
  end
  local a0, a1 = p80(500), p80(1000)
  local dyn = 500 + 500 * (700 - a0) / (a1 - a0)
  -- The PCIe part: the same curve read relative to V(1755).
  local vt = x[4] + (1 - x[4]) * ((1755 - x[5]) / (1980 - x[5])) ^ x[6]
  print(("  refit on %d caps: memory rail %.1f W + %.1f W x u_m "
         .. "(%.2f pJ/bit at %d GB/s)"):format(#fit, S, pm,
         pm / (8e-3 * g.mem_bw_gbps), g.mem_bw_gbps))
  print(("  p_const_w %.1f W, p_leak_w %.1f W, v_min %.5f, f_knee_mhz %.2f, "
         .. "v_curve_exp %.2f, the load's dynamic power %.0f W (objective "
         .. "%.6f)"):format(x[1], x[2], x[4], x[5], x[6], x[3], bv))
  print(("  p_dyn_w %.0f W (the BF16 GEMM at %.0f MHz on H100-SXM5-80GB "
         .. "draws 700 W); activity_tf32 %.3f"):format(dyn, f_gemm, x[3] / dyn))
  print(("  floor at 1980 MHz %.1f W (context %.0f), at 345 MHz %.1f W (idle "
         .. "%.1f)"):format(x[1] + S + x[2], H100_CONTEXT_W,
         x[1] + S + x[2] * x[4] ^ 3, H100_IDLE_W))
  print(("  H100-PCIE-80GB: V(1755) %.4f, v_min %.3f, p_dyn_w %.1f W, "
         .. "p_leak_w %.1f W"):format(vt, x[4] / vt,
         dyn * 114 / 132 * 1755 / 1980 * vt ^ 2, x[2] * 114 / 132 * vt ^ 3))
end

-- The cap curve: each cap through js.gpu.price on H100-SXM5-94GB (the
-- catalogue's TF32 GEMM, activity_tf32 from the fit), the clock the cap settles the kernel at
-- and the board power there against the measured means; the memory rail
-- is the model's p_mem_static_w + p_mem_w u_m.  Then the BF16 GEMM facts:
-- the 80 GB card's (fitted: p_dyn_w) and the H200's (predicted).
local function h100_powercap(ds)
  local path = data .. "/measured/" .. ds.file
  local rows = read_csv(path, { "power_cap_w", "total_power_w",
                                "memory_power_w", "mean_sm_mhz" })
  heading(ds.file, "ViT-L/16 in TF32 under power caps (H100-SXM5-94GB; "
          .. "the load as its FC1 GEMM, TF32)")
  -- The memory rail: the board less the same GPU without memory power.
  js.gpu.define{ name = "FIDELITY-VIT-SM", base = "H100-SXM5-94GB",
                 source = "joulesim fidelity: the SM side only",
                 p_mem_static_w = 0, p_mem_w = 0 }
  print(("  %5s %-9s | %7s %7s %6s | %6s %6s %6s | %5s %5s %6s"):format(
    "cap W", "role", "f meas", "f pred", "err %", "P meas", "P pred", "err %",
    "mem m", "mem p", "err %"))
  local err = { fitted = { f = {}, p = {}, m = {} },
                predicted = { f = {}, p = {}, m = {} } }
  for _, r in ipairs(rows) do
    local cap = num(r, "power_cap_w", path, 0)
    local role = H100_FIT_CAPS[cap] and "fitted" or "predicted"
    local q = js.gpu.price{ gpu = "H100-SXM5-94GB", class = VIT.class,
                            flops = VIT.flops, bytes = VIT.bytes,
                            math = VIT.math, power_limit_w = cap }
    local fm, pm = num(r, "mean_sm_mhz", path, 0), num(r, "total_power_w", path, 0)
    local mm = num(r, "memory_power_w", path, 0)
    local mp = q.power_w - js.gpu.price{ gpu = "FIDELITY-VIT-SM",
      class = VIT.class, flops = VIT.flops, bytes = VIT.bytes, math = VIT.math,
      sm_mhz = q.sm_mhz, cap = false }.power_w
    local e = err[role]
    local a, b, c = pct(q.sm_mhz, fm), pct(q.power_w, pm), pct(mp, mm)
    e.f[#e.f + 1], e.p[#e.p + 1], e.m[#e.m + 1] = a, b, c
    print(("  %5d %-9s | %7d %7d %+6.1f | %6.0f %6.0f %+6.1f | %5.0f %5.0f %+6.1f")
          :format(cap, role, fm, q.sm_mhz, a, pm, q.power_w, b, mm, mp, c))
    row_out(ds.file, { case = ("%d W"):format(cap), power_cap_w = cap,
                       meas_sm_mhz = fm, pred_sm_mhz = q.sm_mhz,
                       meas_power_w = pm, pred_power_w = q.power_w,
                       meas_memory_w = mm, pred_memory_w = mp,
                       clock_err_pct = a, power_err_pct = b,
                       memory_err_pct = c, role = role })
  end
  -- The BF16 GEMM facts (tests/data/measured/README.md): 798 TFLOP/s on
  -- the 80 GB card at 700 W (fitted), 769-798 on the H200 with 1500 MHz
  -- sustainable and a locked 1830 MHz not held (predicted).
  local gemm = { flops = 2 * 8192 ^ 3, bytes = 2 * 3 * 8192 ^ 2 }
  local function tflops(gpu)
    local q = js.gpu.price{ gpu = gpu, class = "gemm", math = "bf16",
                            flops = gemm.flops, bytes = gemm.bytes }
    return gemm.flops / q.time_s / 1e12, q
  end
  local t80, q80 = tflops("H100-SXM5-80GB")
  local t200, q200 = tflops("H200-SXM-141GB")
  local e80 = pct(t80, H100_GEMM_TFLOPS)
  local e200 = t200 < 769 and pct(t200, 769) or t200 > 798 and pct(t200, 798) or 0
  print(("  8192^3 BF16 GEMM at 700 W: H100-SXM5-80GB %.0f TFLOP/s at %d MHz "
         .. "(measured 798, %+.1f%%); H200-SXM-141GB %.0f at %d MHz (769-798, "
         .. "1500-1830 MHz: %+.1f%%)"):format(t80, q80.sm_mhz, e80, t200,
         q200.sm_mhz, e200))
  if opt.refit then refit_h100(rows, path) end
  local fr = "fitted (the catalogue's H100 fit on these caps)"
  local pr = "predicted (held out of the H100 fit)"
  local function rec(role, case, e, r)
    record(ds.file, case, "settled SM clock, max abs err", maxabs(e.f), "%", r)
    record(ds.file, case, "board power, max abs err", maxabs(e.p), "%", r)
    record(ds.file, case, "memory rail, max abs err", maxabs(e.m), "%", r)
  end
  rec("fitted", "caps 200, 400, 600, 700 W", err.fitted, fr)
  rec("predicted", "caps 300, 500 W", err.predicted, pr)
  record(ds.file, "BF16 GEMM, H100-SXM5-80GB", "TFLOP/s at 700 W, abs err",
         math.abs(e80), "%", "fitted (p_dyn_w)")
  record(ds.file, "BF16 GEMM, H200-SXM-141GB",
         "TFLOP/s at 700 W, abs err outside 769-798", math.abs(e200), "%",
         "predicted")
end

-- ---- Llama on H100 (published) ------------------------------------------------------

-- Published Llama pre-training throughput on H100 SXM5 80GB
-- (published/llama-h100.csv; its README gives every row's source and
-- recipe): NVIDIA NeMo 24.12's FP8 table (megatron-core, DGX H100; its
-- two GPT-3 175B rows too, recorded apart) and the
-- Llama 3 paper's table 4 (BF16, 8,192 and 16,384 GPUs).  Each row runs
-- as its recipe on H100-SXM5-80GB and the dgx-h100 network: flash
-- attention (Transformer Engine's fused kernel), sequence parallelism
-- where tp > 1, the distributed optimizer (zero = 1), no recomputation,
-- interleaved 1F1B where the row gives virtual stages; NeMo's recipes
-- also overlap the TP collectives with their GEMMs (tp_comm_overlap, on
-- in its performance recipes with TP > 1; the paper does not say, so
-- off there).  TFLOP/s per GPU
-- count model FLOPs as NeMo does (w.model_flops: 6 x the linear layers'
-- parameters + 12 s h per layer of attention, non-causal, no recompute),
-- for both sources: the paper does not give its formula.  The memory
-- check is off: the rows ran, and what the memory model says of them is
-- not what this checks.
local LLAMA_NAME = "published/llama-h100"
local LLAMA_FILE = "published/llama-h100.csv"

-- The Llama 3 paper's recipe beyond its table: an interleaved 1F1B
-- schedule whose virtual stages it does not give (2 here, Megatron's
-- smallest) over 126 layers with one fewer on the first and the last
-- stage, which the generator's equal chunks cannot split; 128 layers
-- stand in (2 x 16 x 4), the rate counted on their own FLOPs.
local PAPER_CHUNKS, PAPER_LAYERS = 2, 128

-- The row the H100 catalogue's fp8_gemm_eff_ratio is fitted on (models/
-- catalogue.c, docs/gpu-model.md "FP8 GEMMs"): the plainest FP8 recipe,
-- one node, TP1 PP1.  Every other row is predicted.
local LLAMA_FIT = { ["nemo-24.12 llama2-7b 8"] = true }

local function llama_tflops(r, path)
  local n = num(r, "gpus", path, 0)
  local tp, pp = num(r, "tp", path, 0), num(r, "pp", path, 0)
  local cp, dp = num(r, "cp", path, 0), num(r, "dp", path, 0)
  if tp * pp * cp * dp ~= n then
    fail(("%s:%d: tp x pp x cp x dp = %d, not the %d GPUs"):format(path,
         r._line, tp * pp * cp * dp, n))
  end
  local vp = r.vp ~= "" and num(r, "vp", path, 0) or nil
  local args = { model = r.model, gpu = "H100-SXM5-80GB", tp = tp, pp = pp,
                 dp = dp, context_parallel = cp,
                 microbatch_size = num(r, "mbs", path, 0),
                 global_batch_size = num(r, "gbs", path, 0),
                 seq_len = num(r, "seq_len", path, 0),
                 precision = r.precision, attention = "flash",
                 sequence_parallel = tp > 1, zero = 1,
                 tp_comm_overlap = tp > 1 and r.source:find("^nemo") ~= nil,
                 recompute = r.recompute == "1", fold = true }
  if vp and vp > 1 then
    args.schedule, args.chunks = "interleaved", vp
  elseif not vp then
    args.schedule, args.chunks = "interleaved", PAPER_CHUNKS
    args.layers = PAPER_LAYERS
  end
  local w = js.gpt(args)
  local c = js.cluster{ gpu = "H100-SXM5-80GB", gpus = n, network = "dgx-h100" }
  local res = js.simulate{ cluster = c, workload = w, check_memory = false }
  return w.model_flops / res.time_s / n * 1e-12, args.chunks or 1
end

local function llama_h100()
  local path = data .. "/" .. LLAMA_FILE
  if not exists(path) and CHECKOUT then
    path = BIN_DIR .. "/tests/data/" .. LLAMA_FILE
  end
  if not exists(path) then
    print(("\n== %s: skipped (no %s in the data)"):format(LLAMA_NAME, LLAMA_FILE))
    return
  end
  local rows = read_csv(path, { "source", "model", "gpus", "tp", "pp", "cp",
    "dp", "vp", "mbs", "gbs", "seq_len", "precision", "recompute",
    "tflops_per_gpu" })
  heading(LLAMA_NAME, "Llama pre-training on H100-SXM5-80GB, simulated "
          .. "TFLOP/s per GPU (model FLOPs) against published (dgx-h100, "
          .. "flash, SP, zero 1)")
  print(("  %-12s %-12s %6s %-13s %5s %4s %10s %10s %8s  %s"):format("source",
        "model", "GPUs", "TPxPPxCPxDP", "prec", "vp", "TF/s pred",
        "TF/s pub", "err %", "role"))
  local errs = {}
  for _, r in ipairs(rows) do
    local pub = num(r, "tflops_per_gpu", path, 0)
    local tf, vp = llama_tflops(r, path)
    local e = pct(tf, pub)
    local fit = LLAMA_FIT[r.source .. " " .. r.model .. " " .. r.gpus]
    local role = fit and "fitted" or "predicted"
    local key = r.source .. (fit and " fit" or "")
                .. (r.model:find("^gpt3") and " gpt3" or "")
    errs[key] = errs[key] or {}
    table.insert(errs[key], e)
    local layout = ("%sx%sx%sx%s"):format(r.tp, r.pp, r.cp, r.dp)
    print(("  %-12s %-12s %6s %-13s %5s %4d %10.1f %10.0f %+8.1f  %s"):format(
          r.source, r.model, r.gpus, layout, r.precision, vp, tf, pub, e,
          role))
    row_out(LLAMA_NAME, { case = r.source .. " " .. r.model .. " "
                            .. r.gpus .. " GPUs " .. layout,
                          gpus = num(r, "gpus", path, 0), pred_tflops = tf,
                          pub_tflops = pub, tflops_err_pct = e, role = role })
  end
  local fit_role = "fitted (the H100's fp8_gemm_eff_ratio)"
  local pred_role = "predicted (fp8_gemm_eff_ratio fitted on Llama 2 7B)"
  local cases = {
    { "nemo-24.12 fit", "NeMo 24.12 FP8, Llama 2 7B", fit_role },
    { "nemo-24.12", "NeMo 24.12 FP8, other rows", pred_role },
    { "nemo-24.12 gpt3", "NeMo 24.12 FP8, GPT-3 175B", pred_role },
    { "llama3-paper", "Llama 3 paper, BF16", "predicted" },
  }
  for _, k in ipairs(cases) do
    local list = errs[k[1]]
    if list then
      record(LLAMA_NAME, k[2], "TFLOP/s per GPU, max abs err", maxabs(list),
             "%", k[3])
      if #list > 1 then
        record(LLAMA_NAME, k[2], "TFLOP/s per GPU, median abs err",
               median_abs(list), "%", k[3])
      end
    end
  end
end

-- ---- node power ---------------------------------------------------------------------

-- The node presets (models/node.c) against published node figures.  Latif
-- et al. (arXiv 2412.08602) measured an 8 x H100 HGX node peaking at about
-- 8.4 kW at the wall while training with the GPUs near full utilisation:
-- hgx-h100's other_w (fans, board) is fitted on it, with the GPUs at their
-- 700 W TDP, the NVSwitches active and the NICs idle (one node).  The DGX
-- rated maxima (DGX A100 User Guide: 6.5 kW; DGX H100 User Guide: 10.2
-- kW) are predicted at full load: GPUs at TDP, CPUs at TDP, NICs and
-- NVSwitches active.  A rating is a provisioning bound, not a measurement:
-- Latif et al.'s peak sat 18% below theirs.
local NODE_NAME = "published/node-power"
local function node_power()
  heading(NODE_NAME, "node wall power at the published points (models/node.c)")
  print(("  %-44s %10s %10s %8s  %s"):format("case", "model W", "published",
        "err %", "role"))
  local cases = {
    { case = "HGX H100, Latif et al. peak", node = "hgx-h100",
      gpu_w = 8 * 700, nic = 0, nvs = 1, pub = 8400,
      role = "fitted (hgx-h100 other_w)" },
    { case = "DGX H100, rated max 10.2 kW",
      node = { preset = "dgx-h100", cpu_load = 1 }, gpu_w = 8 * 700, nic = 1,
      nvs = 1, pub = 10200, role = "predicted (vs a rating, not measured)" },
    { case = "DGX A100, rated max 6.5 kW",
      node = { preset = "dgx-a100", cpu_load = 1 }, gpu_w = 8 * 400, nic = 1,
      nvs = 1, pub = 6500, role = "predicted (vs a rating, not measured)" },
  }
  for _, c in ipairs(cases) do
    local p = js.node_power(c.node, c.gpu_w, c.nic, c.nvs)
    local e = pct(p, c.pub)
    print(("  %-44s %10.0f %10.0f %+8.1f  %s"):format(c.case, p, c.pub, e,
          c.role))
    row_out(NODE_NAME, { case = c.case, model_w = p, published_w = c.pub,
                         err_pct = e, role = c.role })
    record(NODE_NAME, c.case, "node wall power, abs err", math.abs(e), "%",
           c.role)
  end
  -- What each preset's parts rest on (js.node's sources): the fitted part
  -- is the one the HGX row above reproduces, given parts are datasheet
  -- figures, and the rest estimates that no row here checks.
  print("  what each preset's parts rest on (models/node.c):")
  local parts = { "cpu_active_w", "cpu_idle_w", "cpu_load", "dram", "nic",
                  "nvswitch", "other_w", "psu_efficiency" }
  for _, name in ipairs{ "dgx-a100", "dgx-h100", "hgx-h100" } do
    local src = js.node(name).sources
    local by = { fitted = {}, given = {}, estimated = {} }
    for _, p in ipairs(parts) do
      local s = assert(src[p], name .. " " .. p)
      local b = s:find("^fit") and "fitted" or s:find("^estimate") and
                "estimated" or "given"
      table.insert(by[b], p)
    end
    print(("    %-9s fitted: %s; given: %s; estimated: %s"):format(name,
          #by.fitted > 0 and table.concat(by.fitted, ", ") or "none",
          table.concat(by.given, ", "), table.concat(by.estimated, ", ")))
  end
end

-- ---- run -------------------------------------------------------------------------------

if opt.fit then
  run_fit(opt.fit)
  return
end

local ran = 0
for _, ds in ipairs(ZEUS) do
  if selected(ds.file) then zeus(ds); ran = ran + 1 end
end
for _, ds in ipairs(PERSEUS) do
  if selected(ds.file:gsub("_plans%.csv$", "_stage_times.csv")) then
    stage_times(ds)
    if opt.refit and ds.gpu == GPUS.a100 then refit_interface(ds) end
    ran = ran + 1
  end
end
for _, ds in ipairs(PERSEUS) do
  if selected(ds.file:gsub("_plans%.csv$", "_stage_clocks.csv")) then
    stage_clocks(ds)
    ran = ran + 1
  end
end
for _, ds in ipairs(PERSEUS) do
  if selected(ds.file) then
    if opt.short then
      print(("\n== %s: skipped (--short)"):format(ds.file))
    else
      perseus(ds)
    end
    ran = ran + 1
  end
end
if selected(MEGATRON_NAME) then megatron(); ran = ran + 1 end
local KT = { file = "kerneltuner/a100_pcie_40gb_fp32_synthetic.csv" }
if selected(KT.file) then kerneltuner(KT); ran = ran + 1 end
local ST = { file = "kernel-dvfs-study/forward_kernels.csv",
             role = function(r) return r.class == "gemm" and "fitted" or "predicted" end }
if selected(ST.file) then study(ST); ran = ran + 1 end
local HP = { file = "h100-powercap/h100_94gb_vitl16_tf32_caps.csv" }
if selected(HP.file) then h100_powercap(HP); ran = ran + 1 end
if selected(NODE_NAME) then node_power(); ran = ran + 1 end
if selected(LLAMA_NAME) then llama_h100(); ran = ran + 1 end
for _, name in ipairs(TRACES) do
  local path = trace_path(name)
  if path and selected("traces/" .. name) then
    real_trace(name, path)
    ran = ran + 1
  end
end
for _, p in ipairs(PROFILES) do
  if selected("profiles/" .. p.file) then ran = ran + 1 end
end
profiles()
if ran == 0 then
  fail("--only " .. table.concat(opt.only, ", ") .. ": no dataset has that "
       .. "name (see docs/fidelity.md for the list)")
end

print("\n== summary (every case is a prediction unless its role says fitted)")
print(("  %-48s %-24s %-44s %8s  %s"):format("dataset", "case", "metric",
                                           "error", "role"))
for _, s in ipairs(summary) do
  print(("  %-48s %-24s %-44s %7.2f%s  %s"):format(s.dataset, s.case, s.metric,
        s.error, (s.unit == "pt" or s.unit == "%") and s.unit or (" " .. s.unit),
        s.role))
  row_out("fidelity_summary", { dataset = s.dataset, case = s.case,
                                metric = s.metric, error = s.error,
                                unit = s.unit, role = s.role })
end
for _, t in pairs(out_tables) do t:close() end
if opt.out then print("\nwrote " .. opt.out) end
if opt.png then
  local plot = BIN_DIR and (CHECKOUT and BIN_DIR .. "/scenarios/plot.py"
                                     or SHARE .. "/scenarios/plot.py")
  if not plot or not exists(plot) then
    fail("--png: " .. (plot or "scenarios/plot.py") .. " not found (it "
         .. "comes with the repository and with make install)")
  end
  local function q(x) return "'" .. x:gsub("'", "'\\''") .. "'" end
  local ok = os.execute("/usr/bin/python3 " .. plot .. " " .. q(opt.out)
                        .. " -o " .. q(opt.png))
  if not ok then
    fail("--png: " .. plot .. " failed (make plot-deps installs what it "
         .. "needs)")
  end
end

-- ---- --check and --record ------------------------------------------------------------------

-- The record is a CSV file (docs/fidelity-record.csv), one row per case;
-- error is the figure to two decimals in unit.  docs/fidelity.md says how
-- each case is run and points at it.
local RECORD_COLUMNS = { "dataset", "case", "metric", "error", "unit", "role" }
local RECORD_HEAD = {
  '# The fidelity record (docs/fidelity.md, "The record"): written by',
  "# `joulesim fidelity --record`, read by `joulesim fidelity --check`." }

local function case_key(r) return r.dataset .. "|" .. r.case .. "|" .. r.metric end

-- The recorded rows of path, each with _line and its error as a number.
local function read_record(path)
  local rows = read_csv(path, RECORD_COLUMNS)
  for _, r in ipairs(rows) do r.figure = num(r, "error", path) end
  return rows
end

local function csv_field(v)
  if v:find('[",]') then return '"' .. v:gsub('"', '""') .. '"' end
  return v
end

-- Writes path (created when absent) with this run's summary, in the
-- run's order; a recorded row the run did not make stays, after the row
-- it followed.
local function write_record(path)
  local rows = exists(path) and read_record(path) or {}
  local fresh = {}
  for _, s in ipairs(summary) do fresh[case_key(s)] = true end
  local lead, after, prev = {}, {}, nil
  for _, r in ipairs(rows) do
    if fresh[case_key(r)] then
      prev = case_key(r)
    elseif prev then
      after[prev] = after[prev] or {}
      table.insert(after[prev], r)
    else
      lead[#lead + 1] = r
    end
  end
  local out = { table.concat(RECORD_HEAD, "\n"), table.concat(RECORD_COLUMNS, ",") }
  local function add(r)
    local f = {}
    for k, col in ipairs(RECORD_COLUMNS) do f[k] = csv_field(r[col]) end
    out[#out + 1] = table.concat(f, ",")
  end
  for _, r in ipairs(lead) do add(r) end
  for _, s in ipairs(summary) do
    add{ dataset = s.dataset, case = s.case, metric = s.metric,
         error = ("%.2f"):format(s.error), unit = s.unit, role = s.role }
    for _, r in ipairs(after[case_key(s)] or {}) do add(r) end
  end
  local tmp = path .. ".tmp"
  local f, err = io.open(tmp, "w")
  if not f then fail(err) end
  f:write(table.concat(out, "\n"), "\n")
  f:close()
  local ok, rerr = os.rename(tmp, path)
  if not ok then fail(rerr) end
  print(("\nrecord: %d cases written to %s"):format(#summary, path))
end

if opt.check then
  local recorded = {}
  for _, r in ipairs(read_record(opt.check)) do recorded[case_key(r)] = r end
  local worse, missing = {}, {}
  for _, s in ipairs(summary) do
    local key = case_key(s)
    local r = recorded[key]
    if not r then
      missing[#missing + 1] = key
    elseif s.error > r.figure + 0.005 then
      worse[#worse + 1] = ("%s:%d: %s, %s: %s grew from %.2f to %.2f"):format(
        opt.check, r._line, s.dataset, s.case, s.metric, r.figure, s.error)
    end
  end
  if #missing > 0 then
    fail(opt.check .. ": no recorded figure for " .. table.concat(missing, "; "))
  end
  if #worse > 0 then fail(table.concat(worse, "\n")) end
  print(("\ncheck: %d cases, none worse than %s records"):format(#summary,
                                                                opt.check))
end

if opt.record then write_record(opt.record) end
