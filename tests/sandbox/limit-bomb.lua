-- expect: the Lua heap reached its limit
-- An allocation bomb (--max-memory 64M).
local t = {}
for i = 1, 1e9 do t[i] = string.rep("x", 1 << 20) .. i end
print("ESCAPED")
