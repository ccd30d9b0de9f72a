-- expect: module 'coroutine' is not available in the sandbox
-- require of a standard library: only "joulesim" resolves.
local m = require("coroutine")
print("ESCAPED", m)
