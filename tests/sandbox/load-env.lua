-- expect: attempt to index a nil value
-- load with a crafted environment: a chunk that looks up io through an
-- __index chain back to the globals.
local env = setmetatable({}, { __index = _G })
local f = assert(load("return io.open(\"/etc/passwd\")", "=x", "t", env))
print("ESCAPED", f())
