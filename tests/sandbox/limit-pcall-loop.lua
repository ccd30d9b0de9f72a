-- expect: --max-seconds 1 reached
-- An infinite loop that catches the limit's error and goes on (--max-seconds 1).
while true do pcall(function() while true do end end) end
print("ESCAPED")
