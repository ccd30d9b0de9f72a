-- expect: global 'package'
-- package.loaded would hand back every library the globals lack.
package.loaded.os.execute("echo ESCAPED")
print("ESCAPED")
