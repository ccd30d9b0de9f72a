-- expect: --max-instructions 1000000 reached
-- A loop inside a coroutine (--max-instructions 1000000).
local co = coroutine.wrap(function() local i = 0 while true do i = i + 1 end end)
co()
print("ESCAPED")
