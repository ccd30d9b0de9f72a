-- expect: sandbox: 
-- js.pipeline{ profile = arg[2] }, as a path and as a table's path field.
local js = require "joulesim"
local target = assert(arg[2], "the runner gives the file to read")
local ok, e = pcall(js.pipeline, { profile = { path = target }, microbatches = 2 })
assert(not ok and e:find("sandbox: "), "read through a path field: " .. tostring(e))
print("ESCAPED", js.pipeline{ profile = target, microbatches = 2 })
