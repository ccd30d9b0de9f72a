-- expect: module 'utf8' is not available in the sandbox
-- require of a standard library: only "joulesim" resolves.
local m = require("utf8")
print("ESCAPED", m)
