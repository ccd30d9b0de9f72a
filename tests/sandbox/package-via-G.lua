-- expect: attempt to index a nil value
-- package through _G and _ENV instead of the global name.
local p = _G.package or _ENV.package or rawget(_G, "package")
print("ESCAPED", p.loaded.io)
