#!/bin/sh
# The sandbox escape suite (issue 13; docs/lua-api.md, "The sandbox").
#
# Every script in tests/sandbox/ is one attempt to get out of
# `joulesim run --sandbox`; its first line says what the error must contain
# ("-- expect: TEXT").  An attempt passes when the run exits 1 with that
# error, never prints ESCAPED, and leaves every file of the test's tree
# (the sandbox's directory, a directory outside it, the links between
# them) and /tmp/x exactly as they were.  The write-* and read-* scripts
# are run once per target in the lists below.  allowed.lua is the control:
# everything the sandbox does allow must keep working.
set -u
J=${JOULESIM:-./joulesim}
case $J in /*) ;; *) J=$(pwd)/$J ;; esac
S=$(cd "$(dirname "$0")/sandbox" && pwd)
T=$(mktemp -d)
L=$(mktemp)
trap 'rm -rf "$T" "$L"' EXIT
W=$T/work       # every run's current directory: the writable one
O=$T/outside    # never to be touched
A=$T/allowed    # --allow-write in the control
R=$T/readable   # --allow-read in the control
mkdir -p "$W" "$O" "$A" "$R"
echo "victim" >"$O/victim.txt"
echo "a researcher's notes" >"$W/notes.txt"
ln -s "$O/victim.txt" "$W/out-link"
ln -s "$O" "$W/dir-link"
ln -s /etc/passwd "$W/passwd-link"
ln -s "$O/missing.h5" "$W/dangling-link"
"$J" trace gen --model gpt3-125m --microbatches 1 -o "$R/trace.h5" >/dev/null
# A real C module for package-cpath.lua to try.
printf '#include <lua.h>\nint luaopen_evil(lua_State *L);\nint luaopen_evil(lua_State *L) { lua_pushstring(L, "ESCAPED"); return 1; }\n' >"$O/evil.c"
cc -shared -fPIC $(pkg-config --cflags lua5.4 2>/dev/null) "$O/evil.c" \
  -o "$O/evil.so" 2>/dev/null || echo "note: no C compiler, package-cpath runs without evil.so"

# An Nsight Systems database outside, and files in the work directory
# whose names are SQLite URIs of it (uri-sqlite.lua, issue 27 finding 3).
URI_ABS="file:$(printf '%s' "$O/prof.sqlite" | sed 's|/|%2F|g')"
URI_SQL='CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL(start INTEGER, "end" INTEGER,
  deviceId INTEGER, streamId INTEGER, correlationId INTEGER, shortName TEXT);
INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES(1000, 5000, 0, 7, 1, '"'CONFIDENTIAL'"');'
if command -v sqlite3 >/dev/null 2>&1; then
  printf '%s\n' "$URI_SQL" | sqlite3 "$O/prof.sqlite"
elif command -v python3 >/dev/null 2>&1; then
  python3 -c 'import sqlite3, sys; sqlite3.connect(sys.argv[1]).executescript(sys.argv[2])' \
    "$O/prof.sqlite" "$URI_SQL"
else
  echo "note: neither sqlite3 nor python3: uri-sqlite reads no database"
fi
echo "not a database" >"$W/file:..%2Foutside%2Fprof.sqlite"
# A results file outside with a second name (hard link) inside
# (hardlink-results.lua, issue 27 finding 16).
printf 'local js = require "joulesim"\nlocal t = js.results(arg[1], "t") t:append{ x = 1 } t:close()\n' >"$O/mkres.lua"
"$J" run "$O/mkres.lua" "$O/results.h5" >/dev/null && ln "$O/results.h5" "$W/hard.h5"
echo "not a database" >"$W/$URI_ABS"
# HDF5 files that point outside (hdf5-external-*.lua, issue 27 findings 1
# and 2), made with h5py (python3-h5py, which CI installs).
PY=/usr/bin/python3
if "$PY" -c 'import h5py' 2>/dev/null; then
  "$PY" - "$W" "$O" <<'PYEOF'
import os, sys
import h5py, numpy as np
from h5py import h5d, h5f, h5p, h5s, h5t
w, o = sys.argv[1], sys.argv[2]
victim = os.path.join(o, "victim.txt")
def results_root(f):
    f.attrs["joulesim_version"] = "0.1.0"
    return f.create_group("results")
with h5py.File(os.path.join(w, "evil.h5"), "w") as f:
    g = results_root(f)
    dcpl = h5p.create(h5p.DATASET_CREATE)
    dcpl.set_layout(h5d.CONTIGUOUS)
    dcpl.set_external(victim.encode(), os.path.getsize(victim), h5f.UNLIMITED)
    space = h5s.create_simple((0,), (h5s.UNLIMITED,))
    h5d.create(g.id, b"t", h5t.py_create(np.dtype([("x", "<i8")])), space,
               dcpl=dcpl)
with h5py.File(os.path.join(w, "elink.h5"), "w") as f:
    g = results_root(f)   # to the results file mkres.lua wrote outside
    g["t"] = h5py.ExternalLink(os.path.join(o, "results.h5"), "/results/t")
ops = np.dtype({"names": ["ref_ns", "shape", "name", "peer", "wait",
                          "microbatch", "layer", "kind", "class", "phase",
                          "stream"],
                "formats": ["<i8", "<u4", "<u4", "<u4", "<u4", "<u2", "u1",
                            "u1", "u1", "u1", "u1"],
                "offsets": [0, 8, 12, 16, 20, 24, 26, 27, 28, 29, 30],
                "itemsize": 32})
shapes = np.dtype({"names": ["flops", "bytes", "name", "klass", "coll",
                             "tensor"],
                   "formats": ["<f8", "<f8", "<u4", "u1", "u1", "u1"],
                   "offsets": [0, 8, 16, 20, 21, 22], "itemsize": 24})
u32 = np.uint32
with h5py.File(os.path.join(w, "leak.h5"), "w") as f:
    f.attrs["format"] = np.bytes_(b"joulesim-trace")
    f.attrs["format_version"] = u32(1)
    f.attrs["n_ranks"] = u32(1)
    for a in ("tp", "pp", "dp", "microbatches"):
        f.attrs[a] = u32(1)
    f.attrs["tokens_per_iteration"] = np.float64(2048)
    f.create_dataset("strings", data=["k"], dtype=h5py.string_dtype("utf-8"))
    f.create_dataset("shapes", data=np.array([(1e9, 1e6, 0, 0, 0, 1)],
                                             dtype=shapes))
    f.create_dataset("groups/offsets", data=np.array([0], dtype=u32))
    f.create_dataset("groups/ranks", data=np.array([], dtype=u32))
    r = f.create_group("ranks/0")
    r.attrs["stage"] = u32(0)
    r.create_dataset("ops", shape=(1,), dtype=ops,
                     external=[("/dev/zero", 0, 8), (victim, 0, 4),
                               ("/dev/zero", 0, 20)])
    r.create_dataset("stream_off", data=np.array([0, 1], dtype=u32))
PYEOF
else
  echo "note: no h5py: the hdf5-external-* attempts meet no such files"
fi

# Every file of the tree but ./work/sweep.h5, the results file of the
# sweep-worker-* attempts (allowed: it records their failures).
snapshot() {
  (cd "$T" && find . -path ./work/sweep.h5 -prune -o -printf '%p %y %s %l\n' |
   sort && find . -path ./work/sweep.h5 -prune -o -type f -exec sha256sum {} + |
   sort)
  # /tmp/x may be a directory that something else uses: then only its
  # kind is compared (its entries and times change under other processes).
  if [ -f /tmp/x ]; then ls -la /tmp/x && sha256sum /tmp/x
  else stat -c '%n %F' /tmp/x 2>/dev/null; fi
}

pass=0
fails=0
# attempt NAME WANT_STATUS PATTERN [joulesim run options...] SCRIPT [ARGS...]
attempt() {
  name=$1; want=$2; pat=$3; shift 3
  before=$(snapshot)
  # timeout: an attempt that escapes its limits must not hang the suite.
  (cd "$W" && timeout 60 "$J" run "$@") >"$L" 2>&1
  got=$?
  after=$(snapshot)
  why=""
  [ "$got" -eq "$want" ] || why="exit $got, want $want"
  [ -z "$why" ] && ! grep -qF -- "$pat" "$L" && why="output lacks '$pat'"
  [ -z "$why" ] && grep -q ESCAPED "$L" && why="printed ESCAPED"
  [ -z "$why" ] && [ "$want" -ne 0 ] && [ "$before" != "$after" ] &&
    why="changed files: $(printf '%s\n' "$before" >"$L.b"; printf '%s\n' "$after" | diff "$L.b" - | tr '\n' ' ')"
  rm -f "$L.b"
  if [ -n "$why" ]; then
    echo "FAIL $name: $why"; cat "$L"; fails=$((fails + 1))
  else
    pass=$((pass + 1))
  fi
}
expect() { sed -n '1s/^-- expect: //p' "$1"; }

# Escapes through the language: one script each.
for s in "$S"/*.lua; do
  n=$(basename "$s" .lua)
  case $n in write-*|read-*|limit-*|sweep-worker-*|allowed) continue ;; esac
  attempt "$n" 1 "$(expect "$s")" --sandbox "$s" "$O"
done

# Writes through the joulesim API: outside (absolute, relative, through a
# link to a file or a directory, a dangling link) and over a file that is
# not joulesim's.
for s in "$S"/write-*.lua "$S"/sweep-worker-write.lua; do
  n=$(basename "$s" .lua)
  for t in /tmp/x "$O/x" ../x out-link dir-link/x dangling-link notes.txt; do
    attempt "$n $t" 1 "$(expect "$s")" --sandbox "$s" "$O" "$t"
  done
done

# Reads through every path-taking function.
for s in "$S"/read-*.lua; do
  n=$(basename "$s" .lua)
  for t in /etc/passwd passwd-link ../../../../../../../../etc/passwd \
           dir-link/victim.txt "$O/victim.txt"; do
    attempt "$n $t" 1 "$(expect "$s")" --sandbox "$s" "$O" "$t"
  done
done

# The absolute SQLite URI (uri-sqlite.lua ran with the relative one above).
attempt "uri-sqlite absolute" 1 "$(expect "$S/uri-sqlite.lua")" --sandbox "$S/uri-sqlite.lua" "$O" "$URI_ABS"

# Limits, sandboxed or not, and in sweep workers.
attempt limit-loop 1 "$(expect "$S/limit-loop.lua")" --max-seconds 1 "$S/limit-loop.lua"
attempt limit-loop-sandbox 1 "$(expect "$S/limit-loop.lua")" --sandbox --max-seconds 1 "$S/limit-loop.lua"
attempt limit-pcall-loop 1 "$(expect "$S/limit-pcall-loop.lua")" --sandbox --max-seconds 1 "$S/limit-pcall-loop.lua"
attempt limit-coroutine 1 "$(expect "$S/limit-coroutine.lua")" --sandbox --max-instructions 1000000 "$S/limit-coroutine.lua"
attempt limit-bomb 1 "$(expect "$S/limit-bomb.lua")" --max-memory 64M "$S/limit-bomb.lua"
attempt limit-bomb-sandbox 1 "$(expect "$S/limit-bomb.lua")" --sandbox --max-memory 64M "$S/limit-bomb.lua"
# Lua 5.4.4's nested coroutine.close (a SEGV without the guard), and Lua
# code that would run with hooks off after a limit: an xpcall handler, the
# __close of a coroutine the limit stopped (sandboxed or not).
attempt limit-coroutine-close 1 "$(expect "$S/limit-coroutine-close.lua")" --sandbox --max-memory 64M --max-instructions 100000000 "$S/limit-coroutine-close.lua"
attempt limit-coroutine-close-deep 1 "$(expect "$S/limit-coroutine-close-deep.lua")" --sandbox --max-instructions 100000000 "$S/limit-coroutine-close-deep.lua"
for s in limit-xpcall-handler limit-close-after-limit limit-wrap-close-after-limit; do
  attempt "$s" 1 "$(expect "$S/$s.lua")" --sandbox --max-instructions 100000 "$S/$s.lua"
  attempt "$s unsandboxed" 1 "$(expect "$S/$s.lua")" --max-instructions 100000 "$S/$s.lua"
done
attempt limit-c-time 1 "$(expect "$S/limit-c-time.lua")" --max-seconds 1 "$S/limit-c-time.lua"
rm -f "$W/sweep.h5"
attempt sweep-worker-require 1 "$(expect "$S/sweep-worker-require.lua")" --sandbox "$S/sweep-worker-require.lua"
rm -f "$W/sweep.h5"
# --max-memory is one limit for the sweep: its workers share it (the heaps
# they report, and sandboxed or not the memory they own in /proc); jobs
# is bounded.
attempt limit-sweep-memory 1 "$(expect "$S/limit-sweep-memory.lua")" --sandbox --max-memory 100M "$S/limit-sweep-memory.lua"
rm -f "$W/sweep.h5"
# Under AddressSanitizer a process owns its shadow memory and quarantine
# too: the program's own memory is not what /proc shows.
if ldd "$J" 2>/dev/null | grep -q libasan; then
  echo "skip limit-sweep-rss (built with AddressSanitizer)"
else
  attempt limit-sweep-rss 1 "$(expect "$S/limit-sweep-rss.lua")" --max-memory 100M "$S/limit-sweep-rss.lua"
  rm -f "$W/sweep.h5"
fi
attempt limit-sweep-jobs 1 "$(expect "$S/limit-sweep-jobs.lua")" --sandbox "$S/limit-sweep-jobs.lua"
rm -f "$W/sweep.h5"
attempt sweep-worker-loop 1 "$(expect "$S/sweep-worker-loop.lua")" --sandbox --max-seconds 2 "$S/sweep-worker-loop.lua"
rm -f "$W/sweep.h5"

# The control.
attempt allowed 0 "ALLOWED-OK" --sandbox --allow-write "$A" --allow-read "$R" "$S/allowed.lua" "$O" "$A" "$R"
for f in here.h5 t.json r.h5 v.h5 fit.gpu; do
  [ -s "$W/$f" ] || { echo "FAIL allowed: $f not written"; fails=$((fails + 1)); }
done
for f in there.h5 t.json r.h5 s.h5; do
  [ -s "$A/$f" ] || { echo "FAIL allowed: $A/$f not written"; fails=$((fails + 1)); }
done
# Options: --allow-* need --sandbox, and name existing directories.
attempt allow-needs-sandbox 2 "only with --sandbox" --allow-write "$A" "$S/allowed.lua"
attempt allow-missing-dir 1 "no/such" --sandbox --allow-write "$T/no/such" "$S/allowed.lua"

echo "sandbox: $pass attempts held, $fails failed"
[ "$fails" -eq 0 ]
