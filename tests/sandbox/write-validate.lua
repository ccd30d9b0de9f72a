-- expect: sandbox: 
-- js.validate{ out = arg[2] } (the profile is in the script's directory).
local js = require "joulesim"
local target = assert(arg[2], "the runner gives the target path")
local dir = arg[0]:match("^(.*)/[^/]*$") or "."
js.validate{ profile = dir .. "/kernels.csv", gpu = "A100-SXM4-80GB", out = target }
print("ESCAPED")
