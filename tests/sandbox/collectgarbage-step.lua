-- expect: option 'step' is not available in the sandbox
-- collectgarbage("step") in a loop: the collector as a denial of service.
while true do collectgarbage("step") end
print("ESCAPED")
