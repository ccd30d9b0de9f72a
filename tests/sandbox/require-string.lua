-- expect: module 'string' is not available in the sandbox
-- require of a standard library: only "joulesim" resolves.
local m = require("string")
print("ESCAPED", m)
