-- expect: attempt to call a nil value (local 'dump')
-- string.dump through the string metatable (""):dump.
local dump = ("").dump
print("ESCAPED", dump(print))
