-- expect: sandbox: 
-- A sweep worker writes a trace outside the allowed directories (arg[2]).
local js = require "joulesim"
local target = arg[2]
local s = js.sweep{ points = { { x = 1 } }, out = "sweep.h5", jobs = 2,
  run = function(p)
    js.trace.save(js.gpt{ model = "gpt3-125m", microbatches = 1 }, target)
    return { y = p.x }
  end }
error(s.failures[1] and s.failures[1].error or "ESCAPED: no failure")
