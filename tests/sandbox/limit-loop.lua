-- expect: --max-seconds 1 reached
-- An infinite loop (run with --max-seconds 1).
while true do end
print("ESCAPED")
