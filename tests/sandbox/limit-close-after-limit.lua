-- expect: --max-instructions 100000 reached
-- A coroutine stopped by the limit dies with hooks off; closing it later
-- runs its pending __close (--max-instructions 100000).
local co = coroutine.create(function()
  local x <close> = setmetatable({}, { __close = function()
    local n = 0 for i = 1, 1e8 do n = n + 1 end print("ESCAPED: __close ran", n) end })
  while true do end
end)
print(coroutine.resume(co))
print(pcall(coroutine.close, co))
print("ESCAPED: went on")
