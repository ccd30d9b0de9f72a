-- expect: module 'math' is not available in the sandbox
-- require of a standard library: only "joulesim" resolves.
local m = require("math")
print("ESCAPED", m)
