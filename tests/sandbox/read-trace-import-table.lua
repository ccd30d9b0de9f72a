-- expect: sandbox: 
-- js.trace.import{ arg[2] }.
local js = require "joulesim"
local target = assert(arg[2], "the runner gives the file to read")
print("ESCAPED", js.trace.import{ target })
