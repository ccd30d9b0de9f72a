-- expect: module 'io' is not available
-- A coroutine wrapping a C function: require run as the coroutine's body.
local io2 = coroutine.wrap(require)("io")
print("ESCAPED", io2)
