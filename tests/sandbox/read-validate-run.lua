-- expect: sandbox: 
-- js.validate_run{ measured = arg[2] }.
local js = require "joulesim"
local target = assert(arg[2], "the runner gives the file to read")
local c = js.cluster{ gpu = "A100-SXM4-80GB", gpus = 1 }
local r = js.simulate{ cluster = c, workload = js.gpt{ model = "gpt3-125m", microbatches = 1 } }
print("ESCAPED", js.validate_run{ measured = target, result = r })
