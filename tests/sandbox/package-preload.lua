-- expect: global 'package'
-- package.preload: register a loader, then require it.
package.preload.x = function() return io end
print("ESCAPED", require("x"))
