-- expect: attempt to call a nil value
-- A joulesim object's __gc, called by hand, would free a workload still
-- in use.
local js = require "joulesim"
local w = js.gpt{ model = "gpt3-125m", microbatches = 1 }
getmetatable(w).__gc(w)
print("ESCAPED", js.trace.info(w).ops)
