-- expect: a metatable with __gc is not allowed
-- setmetatable run as a coroutine's body, to dodge the __gc check.
coroutine.wrap(setmetatable)({}, { __gc = print })
print("ESCAPED")
