-- expect: the sweep's processes stayed within --max-memory
-- Not sandboxed (it reads /proc): six sweep workers each allocate until
-- refused under --max-memory 100M, then report the memory they own
-- (/proc/self/smaps_rollup: Private_Clean + Private_Dirty + Swap).  With
-- this process's resident memory, the total must be about the cap: within
-- 25% for malloc's overhead, far from the 6 x 100 MB of REDTEAM finding 7.
local js = require "joulesim"
local function kb_of(path, fields)
  local f = assert(io.open(path))
  local text = f:read("a")
  f:close()
  local kb = 0
  for _, name in ipairs(fields) do
    kb = kb + assert(tonumber(text:match(name .. ":%s+(%d+) kB")), name)
  end
  return kb
end
local pts = {} for i = 1, 6 do pts[i] = { x = i } end
local s = js.sweep{ points = pts, out = "sweep.h5", jobs = 6, run = function(p)
  local t = {}
  pcall(function()
    for i = 1, 1000 do t[i] = string.rep(string.char(64 + p.x), 1 << 20) .. i end
  end)
  local kb = kb_of("/proc/self/smaps_rollup", { "Private_Clean", "Private_Dirty", "Swap" })
  t = nil
  error(string.format("OWN %d", kb))
end }
local total = kb_of("/proc/self/status", { "VmRSS" })
for _, f in ipairs(s.failures) do total = total + assert(tonumber(f.error:match("OWN (%d+)")), f.error) end
local mb = total // 1024
if #s.failures ~= 6 or mb > 125 then
  error(string.format("ESCAPED: %d workers and their parent own %d MB under --max-memory 100M", #s.failures, mb))
end
error(string.format("the sweep's processes stayed within --max-memory: %d MB in all", mb))
