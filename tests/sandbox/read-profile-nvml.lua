-- expect: sandbox: 
-- js.profile.load_nvml with arg[2] as samples, then as windows.
local js = require "joulesim"
local target = assert(arg[2], "the runner gives the file to read")
local dir = arg[0]:match("^(.*)/[^/]*$") or "."
local ok, e = pcall(js.profile.load_nvml, target, dir .. "/kernels.csv")
assert(not ok and e:find("sandbox: "), "samples were read: " .. tostring(e))
print("ESCAPED", js.profile.load_nvml(dir .. "/kernels.csv", target))
