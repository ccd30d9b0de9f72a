-- expect: sandbox: 
-- js.simulate{ uncertainty = { profile = arg[2] } }.
local js = require "joulesim"
local target = assert(arg[2], "the runner gives the file to read")
local c = js.cluster{ gpu = "A100-SXM4-80GB", gpus = 1 }
local w = js.gpt{ model = "gpt3-125m", microbatches = 1 }
print("ESCAPED", js.simulate{ cluster = c, workload = w, uncertainty = { profile = target } })
