-- expect: the workers' heaps stayed within --max-memory
-- Six sweep workers each allocate until refused (--max-memory 100M): they
-- share the cap, they do not get it each (REDTEAM finding 7: 622 MB in
-- all).  Each reports the heap it reached; the total must fit.
local js = require "joulesim"
local pts = {} for i = 1, 6 do pts[i] = { x = i } end
local s = js.sweep{ points = pts, out = "sweep.h5", jobs = 6, run = function(p)
  local t = {}
  pcall(function()
    for i = 1, 1000 do t[i] = string.rep(string.char(64 + p.x), 1 << 20) .. i end
  end)
  local kb = collectgarbage("count")
  t = nil
  error(string.format("HEAP %d", kb // 1024))
end }
local total = 0
for _, f in ipairs(s.failures) do total = total + tonumber(f.error:match("HEAP (%d+)")) end
if #s.failures ~= 6 or total > 100 then
  error(string.format("ESCAPED: %d workers reached %d MB of Lua heap in all under --max-memory 100M", #s.failures, total))
end
error(string.format("the workers' heaps stayed within --max-memory: %d MB in all", total))
