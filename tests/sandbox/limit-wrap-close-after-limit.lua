-- expect: --max-instructions 100000 reached
-- coroutine.wrap closes a coroutine that failed at once: when the limit
-- stopped it, its __close would run with hooks off (--max-instructions
-- 100000).
local f = coroutine.wrap(function()
  local x <close> = setmetatable({}, { __close = function()
    local n = 0 for i = 1, 1e8 do n = n + 1 end print("ESCAPED: __close ran", n) end })
  while true do end
end)
print(pcall(f))
print("ESCAPED: went on")
