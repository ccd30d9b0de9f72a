-- tests/readme-check.lua README.md HEADLINE.txt FIDELITY.txt -- the
-- README's figures against the commands that produce them.
--
-- Run by tests/scenario-docs.sh with the output of `joulesim run
-- scenarios/headline.lua` and of `joulesim fidelity --data tests/data
-- --only traces/`.  Fails, naming the row, when:
--   * a table row that headline.lua prints has no README row of the same
--     first cell, or its cells hold a different count of numbers;
--   * a number of such a README row is more than 10% from headline.lua's;
--   * the README's "within X% of the measured one" for the Kineto traces
--     is more than 10% from the worst "step time, host streams" error.
local readme_path, head_path, fid_path = arg[1], arg[2], arg[3]
assert(readme_path and head_path and fid_path,
       "usage: readme-check.lua README.md HEADLINE.txt FIDELITY.txt")
local function read(p)
  local f = assert(io.open(p, "r"))
  local s = f:read("a")
  f:close()
  return s
end
local readme, head, fid = read(readme_path), read(head_path), read(fid_path)

local function cells(line)
  local t = {}
  for c in line:gmatch("|([^|]*)") do t[#t + 1] = c:match("^%s*(.-)%s*$") end
  if t[#t] == "" then t[#t] = nil end
  return t
end
-- Every number of the cells after the first, in order.
local function numbers(t)
  local v = {}
  for i = 2, #t do
    for n in t[i]:gmatch("%d+%.?%d*") do v[#v + 1] = tonumber(n) end
  end
  return v
end

local rows = {}
for line in readme:gmatch("[^\n]+") do
  if line:match("^|") then
    local t = cells(line)
    if t[1] then rows[t[1]] = t end
  end
end

local bad, checked = {}, 0
local function near(a, b) return math.abs(a - b) <= 0.1 * math.abs(b) end
for line in head:gmatch("[^\n]+") do
  local t = line:match("^|") and cells(line)
  if t and t[1] ~= "---" and not t[2]:match("^model$|^TFLOP") then
    local r = rows[t[1]]
    if r == nil then
      bad[#bad + 1] = "'" .. t[1] .. "': no README row"
    elseif t[2] ~= "model" and t[2] ~= "TFLOP/s per GPU" then
      local want, got = numbers(t), numbers(r)
      if #want ~= #got then
        bad[#bad + 1] = string.format("'%s': %d numbers in the README, %d "
                                      .. "printed", t[1], #got, #want)
      else
        for i = 1, #want do
          checked = checked + 1
          if not near(got[i], want[i]) then
            bad[#bad + 1] = string.format("'%s': README %g, printed %g",
                                          t[1], got[i], want[i])
          end
        end
      end
    end
  end
end

local claim = tonumber(readme:match("step within ([%d.]+)%% of the measured"))
local worst = 0
for e in fid:gmatch("step time, host streams, abs err%s+([%d.]+)%%") do
  worst = math.max(worst, tonumber(e))
end
if not claim then
  bad[#bad + 1] = "the Kineto step figure ('step within X% of the "
                  .. "measured') is not in the README"
elseif worst == 0 then
  bad[#bad + 1] = "no 'step time, host streams' error in the fidelity output"
elseif not near(claim, worst) then
  bad[#bad + 1] = string.format("Kineto steps: README within %g%%, the "
                                .. "worst now %g%%", claim, worst)
end

if #bad > 0 then error(readme_path .. ":\n  " .. table.concat(bad, "\n  "), 0) end
print(string.format("ok %d README figures within 10%% (Kineto steps: "
                    .. "%g%%, worst %g%%)", checked + 1, claim, worst))
