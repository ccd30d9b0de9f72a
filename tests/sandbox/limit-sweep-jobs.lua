-- expect: must be an integer in 1..
-- A thousand sweep workers: jobs is bounded (256, or twice the cores).
local js = require "joulesim"
local pts = {} for i = 1, 1000 do pts[i] = { x = i } end
js.sweep{ points = pts, out = "sweep.h5", jobs = 1000, run = function(p) return { y = p.x } end }
print("ESCAPED: 1000 workers")
