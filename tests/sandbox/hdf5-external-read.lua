-- expect: keeps its data in external files
-- Issue 27 finding 2: leak.h5 (made by the runner with h5py) is a plain
-- native trace whose /ranks/0/ops reads 4 bytes of ../outside/victim.txt
-- into the op's shape field; the old loader echoed them ("shape N out of
-- range").  The load must be refused before anything outside is read.
local js = require "joulesim"
local ok, e = pcall(js.trace.load, "leak.h5")
if not ok and tostring(e):match("shape %d+ out of range") then
  print("ESCAPED " .. tostring(e))
end
if ok then print("ESCAPED loaded") end
error(e, 0)
