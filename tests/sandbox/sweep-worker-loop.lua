-- expect: --max-seconds 2 reached
-- Sweep workers inherit the limits: run() loops forever (--max-seconds 2).
local js = require "joulesim"
local s = js.sweep{ points = { { x = 1 }, { x = 2 } }, out = "sweep.h5", jobs = 2,
                    run = function(p) while true do end end }
error(s.failures[1] and s.failures[1].error or "ESCAPED: no failure")
