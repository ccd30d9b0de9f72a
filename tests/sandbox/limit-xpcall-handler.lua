-- expect: --max-instructions 100000 reached
-- An xpcall message handler called for the limit's own error (Lua runs it
-- inside the hook, with hooks off) loops 10^8 times (--max-instructions
-- 100000; REDTEAM finding 6).
local n = 0
xpcall(function() while true do end end,
       function(m) for i = 1, 1e8 do n = n + 1 end; print("ESCAPED: handler ran", n); return m end)
print("ESCAPED: went on")
