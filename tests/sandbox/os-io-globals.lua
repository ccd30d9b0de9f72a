-- expect: global 'os'
-- The plain globals.
os.execute("echo ESCAPED")
io.open("/etc/hostname"):read("l")
print("ESCAPED")
