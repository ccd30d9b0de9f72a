-- expect: an external link
-- Issue 27 finding 1, variant: /results/t of elink.h5 is an HDF5 external
-- link to a results table outside; appending would add a row there.
local js = require "joulesim"
local t = js.results("elink.h5", "t")
print("ESCAPED rows outside: " .. t:rows())
t:append{ x = 666 }
t:close()
