-- expect: ALLOWED-OK
-- The control: everything the sandbox allows works (run with --allow-write
-- arg[2] --allow-read arg[3]; arg[3] holds trace.h5).  If this fails, the
-- refusals above prove nothing.
local js = require "joulesim"
local out, inp = arg[2], arg[3]
local dir = arg[0]:match("^(.*)/[^/]*$") or "."
local c = js.cluster{ gpu = "A100-SXM4-80GB", gpus = 1 }
local w = js.gpt{ model = "gpt3-125m", microbatches = 1 }
js.trace.save(w, "here.h5")
js.trace.save(w, "here.h5")                 -- replacing its own trace
js.trace.save(w, out .. "/there.h5")
assert(js.trace.info(js.trace.load(inp .. "/trace.h5")).ops > 0)
assert(js.trace.info(js.trace.load("here.h5")).ops > 0)
local r = js.simulate{ cluster = c, workload = w, timeline = "t.json" }
js.simulate{ cluster = c, workload = w, timeline = { path = out .. "/t.json" } }
js.simulate{ cluster = c, workload = w, timeline = "t.json" }  -- its own timeline
local t = js.results("r.h5", "t")
t:append{ time_s = r.time_s }
t:close()
t = js.results(out .. "/r.h5", "t", { mode = "replace" })
t:append{ time_s = r.time_s }
assert(t:rows() == 1)
t:close()
js.sweep{ points = { { x = 1 }, { x = 2 } }, out = out .. "/s.h5", jobs = 2,
          run = function(p) return { y = 2 * p.x } end }
js.validate{ profile = dir .. "/kernels.csv", gpu = "A100-SXM4-80GB",
             out = "v.h5", save_gpu = "SANDBOX-FIT", save_gpu_file = "fit.gpu" }
js.validate{ profile = dir .. "/kernels.csv", gpu = "A100-SXM4-80GB",
             save_gpu = "SANDBOX-FIT2", save_gpu_file = "fit.gpu" }
assert(js.profile.load(dir .. "/kernels.csv").ops)
assert(load("return 1 + 1")() == 2 and string.format("%d", 3) == "3")
assert(("x"):rep(3) == "xxx" and math.random(1, 6) >= 1 and utf8.char(72) == "H")
assert(coroutine.wrap(function() coroutine.yield(7) end)() == 7)
assert(collectgarbage("count") > 0 and getmetatable("") ~= nil)
assert(string.dump == nil and io == nil and os == nil and debug == nil)
print("ALLOWED-OK")
