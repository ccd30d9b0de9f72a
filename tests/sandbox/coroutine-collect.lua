-- expect: option 'collect' is not available
-- collectgarbage as a coroutine's body.
coroutine.wrap(collectgarbage)()
print("ESCAPED")
