-- expect: attempt to index a nil value
-- The string metatable's __index is the string library: its dump.
local lib = getmetatable("").__index
print("ESCAPED", lib.dump)
