#!/bin/sh
# The command line: exit statuses (0 ok, 1 user error, 2 usage), messages
# that name the file and line, and the quickstart scenario end to end.
set -u
J=${JOULESIM:-./joulesim}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fails=0
check() { # check NAME EXPECTED_STATUS PATTERN -- command...
  name=$1; want=$2; pat=$3; shift 4
  "$@" >"$T/out" 2>&1
  got=$?
  if [ "$got" -ne "$want" ]; then
    echo "FAIL $name: exit $got, want $want"; cat "$T/out"; fails=$((fails+1)); return
  fi
  if [ -n "$pat" ] && ! grep -q -- "$pat" "$T/out"; then
    echo "FAIL $name: output lacks '$pat'"; cat "$T/out"; fails=$((fails+1)); return
  fi
  echo "ok $name"
}

check version 0 "joulesim 0" -- "$J" --version
check help 0 "commands:" -- "$J" --help
check no-args 2 "usage" -- "$J"
check unknown-command 2 "unknown command" -- "$J" frobnicate
check run-help 0 "SCENARIO.lua" -- "$J" run --help
check run-missing-script 2 "missing SCENARIO" -- "$J" run
check run-bad-seed 2 "--seed" -- "$J" run --seed abc x.lua
check run-missing-file 1 "nope.lua" -- "$J" run "$T/nope.lua"
check gpus-list 0 "H100-SXM5-80GB" -- "$J" gpus
check gpus-one 0 "source" -- "$J" gpus A100-SXM4-80GB
check gpus-unknown 1 "A100-SXM4-80GB" -- "$J" gpus Z100

printf 'local js = require "joulesim"\nlocal x = = 2\n' >"$T/syntax.lua"
check syntax-error 1 "syntax.lua:2:" -- "$J" run "$T/syntax.lua"

printf 'local js = require "joulesim"\n\njs.cluster{ gpu = "B300", gpus = 8 }\n' >"$T/gpu.lua"
check unknown-gpu 1 "gpu.lua:3:" -- "$J" run "$T/gpu.lua"

printf 'local js = require "joulesim"\nlocal c = js.cluster{ gpus = 8 }\nlocal w = js.gpt{ model = "gpt3-125m", tp = 2, microbatches = 1 }\njs.simulate{ cluster = c, workload = w }\n' >"$T/mismatch.lua"
check rank-mismatch 1 "mismatch.lua:4:" -- "$J" run "$T/mismatch.lua"

printf 'local js = require "joulesim"\njs.gpt{ model = "gpt3-125m", pp = -1 }\n' >"$T/neg.lua"
check negative-size 1 "'pp'" -- "$J" run "$T/neg.lua"

mkdir "$T/dir.h5"
printf 'local js = require "joulesim"\nlocal o = js.results(arg[1], "t")\n' >"$T/unwritable.lua"
check unwritable-dir 1 "dir.h5" -- "$J" run "$T/unwritable.lua" "$T/dir.h5"
check unwritable-missing 1 "no/such/dir" -- "$J" run "$T/unwritable.lua" "$T/no/such/dir/x.h5"

printf 'print(arg[0], arg[1], arg[2], ...)\n' >"$T/args.lua"
check script-args 0 "args.lua	a	b	a	b" -- "$J" run "$T/args.lua" a b

# The sandbox itself: tests/scenario-sandbox.sh and tests/sandbox/.
# A real C module loads outside the sandbox (tests/sandbox/package-cpath.lua
# is the same script refused inside).
printf '#include <lua.h>\nint luaopen_evil(lua_State *L);\nint luaopen_evil(lua_State *L) { lua_pushstring(L, "c-module-loaded"); return 1; }\n' >"$T/evil.c"
if cc -shared -fPIC $(pkg-config --cflags lua5.4) "$T/evil.c" -o "$T/evil.so" 2>/dev/null; then
  printf 'package.cpath = arg[1] .. "/?.so"\nprint(require "evil")\n' >"$T/cmod.lua"
  check c-module-normal 0 "c-module-loaded" -- "$J" run "$T/cmod.lua" "$T"
else
  echo "skip c-module tests (no C compiler)"
fi

check quickstart 0 "energy by class" -- "$J" run scenarios/quickstart.lua "$T/q.h5" small
if [ -f "$T/q.h5" ]; then echo "ok quickstart-wrote-h5"; else echo "FAIL no q.h5"; fails=$((fails+1)); fi
if /usr/bin/python3 -c "import h5py" 2>/dev/null; then
  check quickstart-h5py 0 "rows 3" -- /usr/bin/python3 -c "
import h5py
f = h5py.File('$T/q.h5', 'r')
d = f['/results/quickstart']
print('rows', d.shape[0])
assert set(d.dtype.names) >= {'policy', 'iteration_time_s', 'energy_per_iteration_j'}
assert d['iteration_time_s'][1] > d['iteration_time_s'][0]
"
else
  echo "skip quickstart-h5py (python3-h5py not installed)"
fi
exit $fails
