-- expect: text chunks given as strings only
-- load with a reader function (pieces could assemble a binary chunk).
local parts = { "\27Lua", "" }
local i = 0
local f = load(function() i = i + 1; return parts[i] end)
print("ESCAPED", f)
