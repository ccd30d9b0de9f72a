-- expect: inside joulesim's C code
-- A simulation far longer than --max-seconds 1: the hook cannot stop C code,
-- the alarm 2 s later does.
local js = require "joulesim"
local c = js.cluster{ gpu = "A100-SXM4-80GB", gpus = 64 }
local w = js.gpt{ model = "gpt3-13b", tp = 8, pp = 2, dp = 4, microbatches = 16 }
js.simulate{ cluster = c, workload = w, iterations = 100000 }
print("ESCAPED")
