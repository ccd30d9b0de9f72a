-- expect: attempt to load a binary chunk
-- Asking load for binary mode explicitly.
local f = assert(load("\27Lua\84\0", "=x", "b"))
print("ESCAPED", f)
