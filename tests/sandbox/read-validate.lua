-- expect: sandbox: 
-- js.validate{ profile = arg[2] }.
local js = require "joulesim"
local target = assert(arg[2], "the runner gives the file to read")
print("ESCAPED", js.validate{ profile = target, gpu = "A100-SXM4-80GB" })
