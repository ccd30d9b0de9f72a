-- expect: sandbox: 
-- js.results at a path outside the allowed directories (arg[2]).
local js = require "joulesim"
local target = assert(arg[2], "the runner gives the target path")
local t = js.results(target, "t")
t:append{ x = 1 }
t:close()
print("ESCAPED")
