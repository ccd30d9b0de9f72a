-- expect: sandbox: 
-- js.trace.save at arg[2].
local js = require "joulesim"
local target = assert(arg[2], "the runner gives the target path")
local w = js.gpt{ model = "gpt3-125m", microbatches = 1 }
js.trace.save(w, target)
print("ESCAPED")
