-- expect: attempt to load a binary chunk
-- A hand-made binary chunk: malformed bytecode can crash the VM.
local f = assert(load("\27Lua\84\0\25\147\r\n\26\n\4\8\8"))
print("ESCAPED", f)
