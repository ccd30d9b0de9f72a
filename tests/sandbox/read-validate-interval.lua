-- expect: sandbox: 
-- js.validate_interval{ profile = arg[2] }.
local js = require "joulesim"
local target = assert(arg[2], "the runner gives the file to read")
print("ESCAPED", js.validate_interval{ profile = target, gpu = "A100-SXM4-80GB",
                                        fn = function() return 1 end })
