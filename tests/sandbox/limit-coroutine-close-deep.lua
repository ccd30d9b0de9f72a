-- expect: coroutine.close nested too deeply
-- The same chain of closes, fewer of them, with about 180 C calls between
-- one close and the next: each close starts Lua's count of C calls afresh,
-- so a limit on nested closes alone lets through 180 x that many C frames.
local coro = false
local function deep(n, f)
  if n == 0 then return f() end
  local ok, e = pcall(deep, n - 1, f)
  if not ok then error(e, 0) end
end
for i = 1, 190 do
  local previous = coro
  coro = coroutine.create(function()
    local cc <close> = setmetatable({}, { __close = function()
      if previous then deep(180, function() assert(coroutine.close(previous)) end) end
    end })
    coroutine.yield()
  end)
  coroutine.resume(coro)
end
local ok, e = coroutine.close(coro)
error(ok and "ESCAPED: closed them all" or e, 0)
