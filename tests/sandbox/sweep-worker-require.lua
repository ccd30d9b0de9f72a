-- expect: not available in the sandbox
-- A sweep worker (a fork()ed process) inherits the sandbox: require("io")
-- inside run() fails there, and the error reaches the results.
local js = require "joulesim"
local s = js.sweep{ points = { { x = 1 }, { x = 2 } }, out = "sweep.h5", jobs = 2,
                    run = function(p) return { y = require("io") and p.x } end }
error(s.failures[1] and s.failures[1].error or "ESCAPED: no failure")
