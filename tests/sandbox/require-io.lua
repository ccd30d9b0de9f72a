-- expect: module 'io' is not available in the sandbox
-- require of a standard library: only "joulesim" resolves.
local m = require("io")
print("ESCAPED", m)
