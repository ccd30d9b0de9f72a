-- expect: module 'os' is not available in the sandbox
-- require of a standard library: only "joulesim" resolves.
local m = require("os")
print("ESCAPED", m)
