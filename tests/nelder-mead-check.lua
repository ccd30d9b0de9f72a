-- tests/nelder-mead-check.lua -- js.nelder_mead, the library's optimiser
-- (models/numeric.c) over a Lua objective.  Run by tests/scenario-fidelity.sh;
-- prints "ok" or raises naming the check.
local js = require "joulesim"

local function near(a, b, tol, what)
  if math.abs(a - b) > tol then
    error(("%s: %.9g, expected %.9g"):format(what, a, b), 0)
  end
end

-- Rosenbrock's valley from the textbook start reaches (1, 1).
local calls = 0
local x, v = js.nelder_mead{
  f = function(p)
    calls = calls + 1
    return (1 - p[1]) ^ 2 + 100 * (p[2] - p[1] ^ 2) ^ 2
  end,
  x = { -1.2, 1 }, step = 0.5, iterations = 2000 }
near(x[1], 1, 1e-6, "rosenbrock x[1]")
near(x[2], 1, 1e-6, "rosenbrock x[2]")
near(v, 0, 1e-12, "rosenbrock value")
assert(#x == 2, "x has one entry per coordinate")

-- tol stops it early: fewer evaluations, still near the minimum.
local early = 0
local y = js.nelder_mead{
  f = function(p)
    early = early + 1
    return (p[1] - 3) ^ 2 + (p[2] + 2) ^ 2
  end,
  x = { 0, 0 }, step = { 1, 1 }, iterations = 2000, tol = { 1e-3, 1e-3 } }
near(y[1], 3, 1e-2, "tol x[1]")
near(y[2], -2, 1e-2, "tol x[2]")
assert(early < calls, "tol stopped before the iteration count")

-- A box: the minimum outside it lands on its face.
local z = js.nelder_mead{ f = function(p) return (p[1] - 5) ^ 2 end,
                          x = { 0 }, step = 1, iterations = 500,
                          lo = { -1 }, hi = { 2 } }
near(z[1], 2, 1e-9, "box x[1]")

-- NaN counts as the worst value; math.huge marks a point out of bounds.
local w = js.nelder_mead{
  f = function(p) return p[1] < 0 and 0 / 0 or (p[1] - 1) ^ 2 end,
  x = { 4 }, step = -1, iterations = 200 }
near(w[1], 1, 1e-6, "nan x[1]")

-- Bad arguments name the function and the argument; f's errors pass through.
local function refuses(args, pat)
  local ok, msg = pcall(js.nelder_mead, args)
  if ok or not tostring(msg):find(pat) then
    error(("expected an error matching '%s', got %s"):format(pat,
          ok and "none" or tostring(msg)), 0)
  end
end
local f = function() return 0 end
refuses({ x = { 1 }, step = 1, iterations = 1 },
        "^js%.nelder_mead: argument 'f' must be a function")
refuses({ f = f, step = 1, iterations = 1 },
        "^js%.nelder_mead: argument 'x' is required")
refuses({ f = f, x = {}, step = 1, iterations = 1 },
        "^js%.nelder_mead: argument 'x' must be a list of 1 to 8")
refuses({ f = f, x = { 1, 2, 3, 4, 5, 6, 7, 8, 9 }, step = 1, iterations = 1 },
        "^js%.nelder_mead: argument 'x' must be a list of 1 to 8")
refuses({ f = f, x = { 1 }, iterations = 1 },
        "^js%.nelder_mead: argument 'step' is required")
refuses({ f = f, x = { 1, 2 }, step = { 1 }, iterations = 1 },
        "^js%.nelder_mead: argument 'step' must be a list of 2 finite")
refuses({ f = f, x = { 1 }, step = 1 },
        "^js%.nelder_mead: argument 'iterations' is required")
refuses({ f = f, x = { 1 }, step = 1, iterations = 0 },
        "^js%.nelder_mead: argument 'iterations' must be an integer")
refuses({ f = f, x = { 1 }, step = 1, iterations = 1, lo = { 0 } },
        "^js%.nelder_mead: arguments 'lo' and 'hi' go together")
refuses({ f = f, x = { 1 }, step = 1, iterations = 1, lo = { 1 }, hi = { 0 } },
        "^js%.nelder_mead: lo%[1%] = 1%.0 is above hi%[1%] = 0%.0")
refuses({ f = f, x = { 1 }, step = 1, iterations = 1, tol = { 1, 2 } },
        "^js%.nelder_mead: argument 'tol' must be a list of 1 finite")
refuses({ f = f, x = { 1 }, step = 1, iterations = 1, steps = 2 },
        "^js%.nelder_mead: unknown argument 'steps' %(did you mean 'step'%?%)")
refuses({ f = function() return "low" end, x = { 1 }, step = 1, iterations = 1 },
        "^js%.nelder_mead: f must return a number %(got string%)")
refuses({ f = function() error("objective failed", 0) end, x = { 1 },
          step = 1, iterations = 1 }, "^objective failed$")
print("ok")
