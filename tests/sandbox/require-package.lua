-- expect: module 'package' is not available in the sandbox
-- require of a standard library: only "joulesim" resolves.
local m = require("package")
print("ESCAPED", m)
