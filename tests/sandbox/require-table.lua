-- expect: module 'table' is not available in the sandbox
-- require of a standard library: only "joulesim" resolves.
local m = require("table")
print("ESCAPED", m)
