-- expect: global 'package'
-- package.cpath: load a C module (the runner builds evil.so in arg[1]).
package.cpath = arg[1] .. "/?.so"
print("ESCAPED", require("evil"))
