-- expect: keeps its data in external files
-- Issue 27 finding 1: evil.h5 (made by the runner with h5py) passes for a
-- results file, but its table keeps its rows in ../outside/victim.txt
-- (HDF5 external storage): an append would write the script's bytes
-- there, e.g. a command into a shell rc file.
local js = require "joulesim"
local payload = "\ntouch ESCAPED #"
while #payload % 8 ~= 0 do payload = payload .. " " end
local t = js.results("evil.h5", "t")
for i = 1, #payload, 8 do t:append{ x = string.unpack("<i8", payload, i) } end
t:close()
print("ESCAPED")
