-- expect: hard links
-- Issue 27 finding 16: hard.h5 in the work directory is a second name
-- (a hard link, made by the runner) of a results file outside; realpath
-- cannot see that, so appending wrote a row into the outside file.
local js = require "joulesim"
local t = js.results("hard.h5", "t")
t:append{ x = 666 }
t:close()
print("ESCAPED")
