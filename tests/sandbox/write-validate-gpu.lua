-- expect: sandbox: 
-- js.validate{ save_gpu_file = arg[2] }.
local js = require "joulesim"
local target = assert(arg[2], "the runner gives the target path")
local dir = arg[0]:match("^(.*)/[^/]*$") or "."
js.validate{ profile = dir .. "/kernels.csv", gpu = "A100-SXM4-80GB",
             save_gpu = "X", save_gpu_file = target }
print("ESCAPED")
