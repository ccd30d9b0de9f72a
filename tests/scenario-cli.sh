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
# What each power term rests on: the H100's are scaled from the A100 fit,
# the A100 SXM4 80GB's fitted on its stage profile and held out on Bloom's.
check gpus-trust-h100 0 "^power model: estimated" -- "$J" gpus H100-SXM5-80GB
check gpus-trust-h100-term 0 "^  p_dyn_w  *fitted  *fit to tests/data/measured/h100-powercap" -- "$J" gpus H100-SXM5-80GB
check gpus-trust-h100-mem 0 "^  p_mem_static_w  *estimated  estimate: the H100 94GB fit's memory rail" -- "$J" gpus H100-SXM5-80GB
# The measured card of the H100 cap curve: HBM2e at 2.41 TB/s, 700 W.
check gpus-h100-94gb 0 "^H100-SXM5-94GB: NVIDIA H100 SXM 94GB .HBM2e, 700 W" -- "$J" gpus H100-SXM5-94GB
check gpus-h100-94gb-bw 0 "^  mem_bw_gbps  *2410 GB/s" -- "$J" gpus H100-SXM5-94GB
check gpus-h100-94gb-limit 0 "^  power_limit_w  *700 W" -- "$J" gpus H100-SXM5-94GB
check gpus-h100-94gb-trust 0 "estimates: stall_activity .as the A100 fit" -- "$J" gpus H100-SXM5-94GB
check gpus-trust-a100 0 "^power model: validated" -- "$J" gpus A100-SXM4-80GB
check gpus-trust-a100-term 0 "^  p_dyn_w  *fitted  *fit to tests/data/profiles/gpt3-175b+a100_sxm_bf16.csv" -- "$J" gpus A100-SXM4-80GB
check gpus-trust-pcie-limits 0 "^power limits checked on this GPU: 200-300 W" -- "$J" gpus A100-PCIE-80GB

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
# arg[-1] is the binary itself (as /proc/self/exe names it), wherever the
# script is run from: scripts find what came with it from there.
printf 'print("bin=" .. tostring(arg[-1]))\n' >"$T/bin.lua"
check script-binary 0 "bin=$(readlink -f "$J")\$" -- sh -c \
  "cd '$T' && '$(readlink -f "$J")' run bin.lua"

# Lua's warnings reach stderr through the session's print hook.
printf 'warn("@on")\nwarn("careful", "!")\n' >"$T/warn.lua"
check lua-warning 0 "Lua warning: careful!" -- "$J" run "$T/warn.lua"

# A bad JOULESIM_GPU_PATH is a warning; the built-in catalogue still works.
check gpu-path-warning 0 "JOULESIM_GPU_PATH: " -- env JOULESIM_GPU_PATH="$T/no-such-dir" "$J" gpus
check gpus-sources 0 "^sources: docs/sources.md" -- "$J" gpus A100-SXM4-80GB

# One option grammar for every command (cli/options.h): --opt=VALUE is
# --opt VALUE, a missing value is a usage error (2) naming the option, and
# a flag given a value is an unknown option.
P=tests/data/profiles
TR=tests/data/traces
check run-opt-eq 0 "args.lua	a" -- "$J" run --seed=7 --max-instructions=100000000 --max-seconds=60 "$T/args.lua" a
check run-opt-missing 2 "--max-seconds needs a number of seconds > 0 (got 'nothing')" -- "$J" run --max-seconds
check run-opt-missing-seed 2 "--seed needs a non-negative integer" -- "$J" run --seed
check run-flag-value 2 "unknown option '--quiet=1'" -- "$J" run --quiet=1 "$T/args.lua"
check gen-opt-eq 0 "wrote $T/eq.h5: 2 ranks" -- "$J" trace gen --model=gpt3-125m --tp=2 --microbatches=2 --output="$T/eq.h5"
check gen-short-o 0 "wrote $T/eq2.h5: 1 ranks" -- "$J" trace gen --model gpt3-125m --microbatches 2 -o "$T/eq2.h5"
# trace gen prints the GPU memory per rank: GPT-3 13B at TP1 needs 18 x
# 12.85e9 = 231 GB of parameters and Adam state alone.
check gen-gpu-memory 0 "peak: stage 0, 309.6 GB of the H100-SXM5-80GB's 80 GB: does not fit" -- "$J" trace gen --model gpt3-13b --microbatches 1 --gpu H100-SXM5-80GB -o "$T/g13.h5"
check gen-gpu-memory-fits 0 "optimizer 1.5 + activations" -- "$J" trace gen --model gpt3-125m --microbatches 2 -o "$T/g125.h5"
# FSDP shards that state over the 16 ranks (18/16 bytes per parameter, plus
# the gathered root and two layers and one layer's gradient): it fits;
# sharded only within nodes of 8 (hybrid), it does not.
check gen-zero3-fits 0 "peak: stage 0, 74.4 GB of the H100-SXM5-80GB's 80 GB: fits" -- "$J" trace gen --model gpt3-13b --impl hf --dp 16 --microbatches 1 --zero 3 --gpu H100-SXM5-80GB -o "$T/z13.h5"
check gen-zero3-node 0 "peak: stage 0, 90.3 GB of the H100-SXM5-80GB's 80 GB: does not fit" -- "$J" trace gen --model gpt3-13b --impl hf --dp 16 --microbatches 1 --zero 3 --zero-group node --gpus-per-node 8 --gpu H100-SXM5-80GB -o "$T/z13n.h5"
# --tp-comm-overlap reaches the generator (the trace records it).
check gen-tp-overlap 0 "wrote $T/ov.h5: 4 ranks" -- "$J" trace gen --model gpt3-125m --tp 4 --sequence-parallel --tp-comm-overlap --microbatches 2 -o "$T/ov.h5"
check gen-tp-overlap-info 0 "tp_comm_overlap  *true" -- "$J" trace info "$T/ov.h5"
check gen-opt-missing 2 "--tp needs an integer from 1 to 1024 (got 'nothing')" -- "$J" trace gen --tp
check gen-o-missing 2 "-o needs a value" -- "$J" trace gen -o
check import-opt-eq 0 "wrote $T/imp.h5" -- "$J" trace import $TR/two_rank_rank0.json $TR/two_rank_rank1.json --output="$T/imp.h5" --step=first
check import-opt-missing 2 "-o needs a file name" -- "$J" trace import $TR/two_rank_rank0.json -o
check info-opt-eq 0 "ranks         2" -- "$J" trace info "$T/eq.h5" --gpu=A100-SXM4-80GB
check info-opt-missing 2 "--step needs N, first, median or all" -- "$J" trace info "$T/eq.h5" --step
check export-opt-eq 0 "op events" -- "$J" trace export --chrome="$T/eq.json" --iterations=1 --policy=max --gpus-per-node=2 "$T/eq.h5"
check export-opt-missing 2 "--window needs a value" -- "$J" trace export --chrome "$T/eq.json" "$T/eq.h5" --window
check validate-opt-eq 0 "fit: none" -- "$J" validate $P/bloom+a40_bf16.csv --gpu=A40 --fit=none --seed=3
check validate-opt-missing 2 "option --gpu needs a value" -- "$J" validate $P/bloom+a40_bf16.csv --gpu
check validate-opt-unknown 2 "unknown option '--frob'" -- "$J" validate $P/bloom+a40_bf16.csv --frob x
check fidelity-opt-eq 0 "kerneltuner" -- "$J" fidelity --data=tests/data --only=kerneltuner
check fidelity-opt-missing 1 "--only needs a value" -- "$J" fidelity --only
check bench-opt-eq 0 "bench" -- "$J" bench --quick --only=no-such-case
check bench-opt-missing 2 "unknown option '--only'" -- "$J" bench --only
# bench: every case names its GPUs; a case whose memory estimate does not
# fit under --max-memory is refused before it allocates (exit 0: not a
# failure) with its estimate; a bad size is a usage error.
check bench-gpus 0 '"id": "replay/6.7b-8", "label": "replay gpt3-6.7b tp2 pp2 dp2", "gpus": 8, "ok": true' -- "$J" bench --quick --json --only replay/6.7b-8
check bench-refused 0 '"gpus": 1, "ok": false, "refused": "memory"' -- "$J" bench --quick --json --max-memory 1M --only replay/1gpu
check bench-refused-text 0 "REFUSED: joulesim: gpt3-1.3b tp1 pp1 dp1 (43777 ops) would need about" -- "$J" bench --quick --max-memory=1M --only replay/1gpu
check bench-max-memory-bad 2 "'0' is not a size" -- "$J" bench --quick --max-memory 0
check bench-case-args 2 "bench --case replay: needs 8 arguments" -- "$J" bench --case replay gpt3-125m 1 1 1 1 0
check bench-case-policy 1 "not kernel or perseus" -- "$J" bench --case policy frob gpt3-125m 1 1 1 2 0 0
# A recipe case (Llama 3 405B as trained: 126 layers split 7, 8 x 14, 7 over
# 16 stages) passes the generator's checks before the memory check refuses
# it; an unknown recipe is an error naming it.
check bench-recipe-refused 0 '"gpus": 16384, "ok": false, "refused": "memory"' -- "$J" bench --json --max-memory 1M --only replay/llama3-405b-16384
check bench-recipe-text 0 "REFUSED: joulesim: llama3-405b tp8 pp16 dp128 (" -- "$J" bench --max-memory 1M --only replay/llama3-405b-16384
check bench-case-recipe 1 "bench --case recipe: no recipe 'frob'" -- "$J" bench --case recipe frob
# The threads case: 5 alternated pairs, the same bits on 1 and 2 threads.
check bench-case-threads 0 'threads=2 pairs=5 .* speedup_best=[0-9.]* .*identical=1' -- "$J" bench --case threads gpt3-125m 2 2 2 4 2

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
