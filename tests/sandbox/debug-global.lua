-- expect: global 'debug'
-- The debug library by its global name.
print("ESCAPED", debug.getregistry())
