-- expect: not a database
-- Issue 27 finding 3: an SQLite URI as a file name.  "file:..%2Foutside%2F
-- prof.sqlite" is one name in the current directory (the runner puts a
-- file that is not a database there), so the path check allows it; SQLite
-- must not decode it and open ../outside/prof.sqlite.  arg[2]: the name to
-- try (by default the relative one).
local js = require "joulesim"
local name = arg[2] or "file:..%2Foutside%2Fprof.sqlite"
local w = js.trace.import(name)
print("ESCAPED", js.trace.info(w).provenance.trace_gpu_span_ns)
