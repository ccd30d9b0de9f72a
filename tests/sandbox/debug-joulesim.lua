-- expect: js.policy.debug: no such policy
-- debug through the joulesim module or the prelude's environment (an
-- unknown js.policy name raises "no such policy", issue 28).
local js = require "joulesim"
local d = js.debug or rawget(js, "debug")
  or rawget(js.policy, "debug") or js.policy.debug
print("ESCAPED", d.getregistry())
