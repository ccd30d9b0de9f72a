-- expect: a metatable with __gc is not allowed
-- A finalizer runs with hooks off: a loop there escapes the limits.
setmetatable({}, { __gc = function() while true do end end })
print("ESCAPED")
