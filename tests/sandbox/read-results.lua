-- expect: sandbox: 
-- js.results opens its file read-write: arg[2] as a results file.
local js = require "joulesim"
local target = assert(arg[2], "the runner gives the file to read")
print("ESCAPED", js.results(target, "t"):rows())
