-- expect: field 'dump'
-- string.dump + load: bytecode that load could run.
local f = load(string.dump(function() return 1 end))
print("ESCAPED", f)
