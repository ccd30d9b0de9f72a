-- expect: module 'debug' is not available in the sandbox
-- require of a standard library: only "joulesim" resolves.
local m = require("debug")
print("ESCAPED", m)
