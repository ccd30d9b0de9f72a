-- expect: global 'dofile'
-- dofile and loadfile read any file as Lua.
print(loadfile)
dofile("/etc/passwd")
print("ESCAPED")
