-- expect: coroutine.close nested too deeply
-- Lua 5.4.4's "C-stack overflow with deep nesting of coroutine.close": each
-- coroutine's __close closes the previous one, 20,000 deep (a SEGV before
-- the guard; REDTEAM finding 5).
local coro = false
for i = 1, 20000 do
  local previous = coro
  coro = coroutine.create(function()
    local cc <close> = setmetatable({}, { __close = function()
      if previous then assert(coroutine.close(previous)) end end })
    coroutine.yield()
  end)
  coroutine.resume(coro)
end
assert(coroutine.close(coro))
print("ESCAPED: closed them all")
