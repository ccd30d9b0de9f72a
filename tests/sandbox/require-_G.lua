-- expect: module '_G' is not available in the sandbox
-- require of a standard library: only "joulesim" resolves.
local m = require("_G")
print("ESCAPED", m)
