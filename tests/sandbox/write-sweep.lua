-- expect: sandbox: 
-- js.sweep{ out = arg[2] }.
local js = require "joulesim"
local target = assert(arg[2], "the runner gives the target path")
js.sweep{ points = { { x = 1 } }, out = target, jobs = 1,
          run = function(p) return { y = p.x } end }
print("ESCAPED")
