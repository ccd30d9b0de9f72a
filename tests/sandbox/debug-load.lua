-- expect: attempt to index a nil value
-- debug through a loaded chunk's environment.
local d = load("return debug")()
print("ESCAPED", d.sethook())
