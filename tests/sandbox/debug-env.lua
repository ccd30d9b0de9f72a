-- expect: attempt to index a nil value
-- debug through _ENV, _G and rawget.
local d = _ENV.debug or _G.debug or rawget(_G, "debug")
print("ESCAPED", d.getregistry())
