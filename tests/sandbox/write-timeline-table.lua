-- expect: sandbox: 
-- js.simulate{ timeline = { path = arg[2] } }.
local js = require "joulesim"
local target = assert(arg[2], "the runner gives the target path")
local w = js.gpt{ model = "gpt3-125m", microbatches = 1 }
local c = js.cluster{ gpu = "A100-SXM4-80GB", gpus = 1 }
js.simulate{ cluster = c, workload = w, timeline = { path = target } }
print("ESCAPED")
