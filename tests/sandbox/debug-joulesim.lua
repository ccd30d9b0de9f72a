-- expect: attempt to index a nil value
-- debug through the joulesim module or the prelude's environment.
local js = require "joulesim"
local d = js.debug or (js.policy and js.policy.debug) or rawget(js, "debug")
print("ESCAPED", d.getregistry())
