-- tests/lua-api-check.lua DOC.md -- docs/lua-api.md against the module.
--
-- Run by tests/scenario-docs.sh as `joulesim run tests/lua-api-check.lua
-- docs/lua-api.md` from the source tree.  Fails, naming each, on:
--   * a name of the `js` table or of any table under it (functions and
--     other values: js.policy.kernel, js.version) that no heading, list
--     entry or table row of DOC names as `js.a.b` -- the place a reader
--     looks for it;
--   * a `js.a.b` written anywhere in DOC that the module does not have
--     (a function renamed or removed);
--   * a field of a result -- js.simulate's with the baseline, a planned, a
--     pipeline policy, a timeline and an uncertainty interval, and of its
--     sub-tables (per_gpu, iterations, plan, plan_summary rows, frontier,
--     intervals) -- that appears in no code span of DOC.
local js = require "joulesim"
local doc_path = assert(arg[1], "usage: lua-api-check.lua DOC.md")
local f = assert(io.open(doc_path, "r"))
local doc = f:read("a")
f:close()

-- The module's names, recursively (js.gpu is a table that is also called).
local have, names = {}, {}
local function walk(t, prefix, seen)
  if seen[t] then return end
  seen[t] = true
  for k, v in pairs(t) do
    if type(k) == "string" then
      local name = prefix .. "." .. k
      have[name] = true
      names[#names + 1] = name
      if type(v) == "table" then walk(v, name, seen) end
    end
  end
end
walk(js, "js", {})
have.js = true
table.sort(names)

-- What DOC documents: `js.` names on headings, list entries and table
-- rows; every `js.` name anywhere; every identifier inside a code span.
local entry, anywhere, in_code = {}, {}, {}
-- A table is named with its members: js.perseus by js.perseus.load_schedule.
local function js_names(s, into)
  for n in s:gmatch("js%.[%l%d_%.]*[%l%d_]") do
    into[n] = true
    for prefix in n:gmatch("()%.") do into[n:sub(1, prefix - 1)] = true end
  end
end
for line in (doc .. "\n"):gmatch("(.-)\n") do
  if line:match("^#+ ") or line:match("^%s*[-*] ") or line:match("^|") then
    js_names(line, entry)
  end
end
js_names(doc, anywhere)
local function code_ids(s)
  for id in s:gmatch("[%a_][%w_]*") do in_code[id] = true end
end
-- Fenced blocks first (their backticks would pair with the spans').
local prose = doc:gsub("\n```[^\n]*\n(.-)\n```", function(block)
  code_ids(block)
  return "\n"
end)
for span in prose:gmatch("`([^`]+)`") do code_ids(span) end

local bad = {}
for _, n in ipairs(names) do
  if not entry[n] then
    bad[#bad + 1] = n .. ": not documented (no heading, list entry or "
                    .. "table row names it)"
  end
end
local stale = {}
for n in pairs(anywhere) do
  if not have[n] then stale[#stale + 1] = n end
end
table.sort(stale)
for _, n in ipairs(stale) do
  bad[#bad + 1] = n .. ": documented but the module has no such name"
end

-- Result fields.
local prof = "tests/data/profiles/gpt3-175b+a100_sxm_bf16.csv"
local c = js.cluster{ gpu = "A100-SXM4-80GB", gpus = 2 }
local w = js.gpt{ model = "gpt3-125m", pp = 2, microbatches = 2,
                  seq_len = 256 }
local tl = os.tmpname()
os.remove(tl)
local results = {
  js.simulate{ cluster = c, workload = w, timeline = tl .. ".json" },
  js.simulate{ cluster = c, workload = w,
               policy = js.policy.iteration{ slowdown = 0.05 } },
  js.simulate{ cluster = c, workload = w,
               policy = js.policy.perseus{ slowdown = 0.05 } },
  js.simulate{ cluster = c, workload = w, policy = js.policy.zeus{} },
  js.simulate{ cluster = c, workload = w,
               uncertainty = { profile = prof, samples = 2 } },
}
os.remove(tl .. ".json")
local fields = {}
local function add(t, where)
  for k in pairs(t) do
    -- "_name": the binding's own, not the API's.
    if type(k) == "string" and k:sub(1, 1) ~= "_" then
      fields[k] = fields[k] or where
    end
  end
end
for _, r in ipairs(results) do
  add(r, "r")
  add(r.per_gpu[1], "r.per_gpu[g]")
  add(r.iterations[1], "r.iterations[i]")
  for _, k in ipairs{ "plan", "frontier", "energy_interval" } do
    if r[k] then add(r[k], "r." .. k) end
  end
  if r.plan_summary then add(r.plan_summary[1], "r.plan_summary[i]") end
  if r.frontier then add(r.frontier[1], "r.frontier[i]") end
end
local fnames = {}
for k in pairs(fields) do fnames[#fnames + 1] = k end
table.sort(fnames)
for _, k in ipairs(fnames) do
  if not in_code[k] then
    bad[#bad + 1] = fields[k] .. "." .. k .. ": result field not documented"
  end
end

if #bad > 0 then
  error(doc_path .. ":\n  " .. table.concat(bad, "\n  "), 0)
end
print(string.format("ok %d module names and %d result fields documented",
                    #names, #fnames))
