-- expect: global 'package'
-- package.searchers: a searcher that returns the os library.
table.insert(package.searchers, 1, function() return function() return os end end)
print("ESCAPED", require("anything"))
