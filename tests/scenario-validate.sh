#!/bin/sh
# tests/scenario-validate.sh -- `joulesim validate` end to end: the readable
# report on a shared measured profile, HDF5 output, --save-gpu and
# JOULESIM_GPU_PATH, the NVML sample path, exit statuses for usage and user
# errors, and scenarios/validate_profile.lua.  Run from the repository root
# with $JOULESIM set to the binary.
set -u
J=${JOULESIM:-./joulesim}
D=tests/data/profiles
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

# The report: both models, the held-out clocks, the fitted parameters.
"$J" validate "$D/gpt3-175b+a100_sxm_bf16.csv" --gpu A100-SXM4-80GB \
  --power-limit 500 --seed 1 --out "$tmp/v.h5" --save-gpu A100-mine \
  --gpu-dir "$tmp" >"$tmp/out.txt" 2>"$tmp/err.txt" \
  || { cat "$tmp/err.txt"; fail "validate exited $?"; }
grep -q '^overall ' "$tmp/out.txt" || fail "no overall row"
grep -q '10 of 38 clocks held out (seed 1)' "$tmp/out.txt" \
  || fail "holdout line missing"
grep -q 'P_const' "$tmp/out.txt" || fail "fitted parameters missing"
[ -s "$tmp/v.h5" ] || fail "no HDF5 output"
[ -s "$tmp/A100-mine.gpu" ] || fail "--save-gpu wrote nothing"
grep -q 'saved GPU' "$tmp/out.txt" || fail "no save message"
# Held-out energy MAPE of the fitted model below the out-of-box one (the
# overall row: $3/$6 = out-of-box time/energy MAPE, $9/$12 = fitted).
awk '$1 == "overall" && NF >= 14 { if ($12 < $6 && $9 < $3) ok = 1 }
     END { exit ok ? 0 : 1 }' "$tmp/out.txt" \
  || { grep overall "$tmp/out.txt"; fail "fitted not better than out of box"; }

# Same seed, same bits; another seed, other held-out clocks.
for k in 2 3; do
  "$J" validate "$D/gpt3-175b+a100_sxm_bf16.csv" --gpu A100-SXM4-80GB \
    --power-limit 500 --seed 7 --points >"$tmp/out$k.txt" || fail "run $k"
done
cmp -s "$tmp/out2.txt" "$tmp/out3.txt" || fail "not deterministic"
grep -q '(seed 7)' "$tmp/out2.txt" || fail "seed not reported"

# The saved entry is in the catalogue through JOULESIM_GPU_PATH.
JOULESIM_GPU_PATH="$tmp" "$J" gpus A100-mine >"$tmp/gpu.txt" \
  || fail "saved GPU not found through JOULESIM_GPU_PATH"
grep -q 'joulesim validate' "$tmp/gpu.txt" || fail "fit source missing"
JOULESIM_GPU_PATH="$tmp" "$J" validate "$D/bloom+a100_sxm_bf16.csv" \
  --gpu A100-mine --power-limit 500 --fit none >/dev/null \
  || fail "validate against the saved GPU"

# k-fold and the other modes run.
for m in none time power; do
  "$J" validate "$D/bloom+a40_bf16.csv" --gpu A40 --fit $m --folds 4 \
    >/dev/null || fail "--fit $m --folds 4"
done

# NVML samples + windows -> a per-kernel profile.
{
  echo "timestamp, clocks.current.sm [MHz], power.draw [W]"
  i=0
  for clk in 1410 1200 1005 810; do
    j=0
    while [ $j -lt 30 ]; do
      s=$((i / 10)); ms=$(((i % 10) * 100))
      p=$((100 + clk / 10))
      printf '2024/05/01 12:%02d:%02d.%03d, %d MHz, %d.00 W\n' \
        $((s / 60)) $((s % 60)) $ms $clk $p
      i=$((i + 1)); j=$((j + 1))
    done
  done
} >"$tmp/samples.csv"
cat >"$tmp/windows.csv" <<EOF
kernel,start,end,count
gemm,0.5,2.5,100
gemm,3.5,5.5,130
gemm,6.5,8.5,160
gemm,9.5,11.5,200
EOF
"$J" validate --nvml "$tmp/samples.csv" "$tmp/windows.csv" --gpu A100-SXM4-80GB \
  --points >"$tmp/nvml.txt" 2>"$tmp/err.txt" \
  || { cat "$tmp/err.txt"; fail "validate --nvml"; }
grep -q '^gemm .*1410' "$tmp/nvml.txt" || fail "nvml points missing"

# Usage errors: exit 2.
"$J" validate "$D/bloom+a40_bf16.csv" >/dev/null 2>&1
[ $? -eq 2 ] || fail "missing --gpu is not a usage error"
"$J" validate "$D/bloom+a40_bf16.csv" --gpu A40 --fit most >/dev/null 2>&1
[ $? -eq 2 ] || fail "bad --fit is not a usage error"
"$J" validate "$D/bloom+a40_bf16.csv" --gpu A40 --holdout 1.5 >/dev/null 2>&1
[ $? -eq 2 ] || fail "bad --holdout is not a usage error"
"$J" validate --help | grep -q 'usage: joulesim validate' || fail "--help"

# User errors: exit 1 with the file, line and column.
printf 'stage,instruction,frequency,time,energy\n0,forward,1410,0.05,x\n' \
  >"$tmp/bad.csv"
"$J" validate "$tmp/bad.csv" --gpu A100-SXM4-80GB >/dev/null 2>"$tmp/err.txt"
[ $? -eq 1 ] || fail "malformed profile is not a user error"
grep -q 'bad.csv:2: column 5 (energy)' "$tmp/err.txt" || fail "error location"
printf 'stage,instruction,frequency,time,energy\n0,forward,1410,0.05,20\n' \
  >"$tmp/one.csv"
"$J" validate "$tmp/one.csv" --gpu A100-SXM4-80GB >/dev/null 2>"$tmp/err.txt"
[ $? -eq 1 ] || fail "a single clock is not a user error"
grep -q 'cannot\|at least 3' "$tmp/err.txt" || fail "single-clock message"
"$J" validate "$D/bloom+a40_bf16.csv" --gpu A100-SXM4-80GB >/dev/null \
  2>"$tmp/err.txt"
[ $? -eq 1 ] || fail "clocks outside the GPU are not a user error"
grep -q '1425 MHz is outside' "$tmp/err.txt" || fail "range message"
"$J" validate "$D/bloom+a40_bf16.csv" --gpu A4O >/dev/null 2>"$tmp/err.txt"
[ $? -eq 1 ] || fail "unknown GPU is not a user error"
grep -q "did you mean" "$tmp/err.txt" || fail "GPU suggestion"

# The Lua API.
cat >"$tmp/api.lua" <<'EOF'
local js = require "joulesim"
local dir = arg[1]
-- js.profile, js.validate, js.validate_interval, js.validate_run and their
-- errors.
local p = js.profile.load("tests/data/profiles/gpt3-175b+a100_sxm_bf16.csv")
assert(p.format == "perseus" and p.stages == 8 and #p.ops == 16 and #p.clocks == 38, "profile fields")
assert(tostring(p):find("16 ops"))
local t, e = p:at("stage3.backward", 1000)
assert(t > 0.1 and e > 30, "at")
assert(p:op("stage0.forward").points[1].sm_mhz == 855)
local ok, err = pcall(js.validate, { profile = p, gpu = "A100-SXM4-80GB", holdot = 0.2 })
assert(not ok and err:find("holdout"), err)
ok, err = pcall(js.validate, { profile = p, gpu = "A100-SXM4-80GB", fit = "most" })
assert(not ok and err:find("none"), err)
ok, err = pcall(p.at, p, "stage3.backward", 2000)
assert(not ok and err:find("outside the measured range"), err)
ok, err = pcall(js.profile.load, dir .. "/nope.csv")
assert(not ok and err:find("nope.csv"), err)
local r = js.validate { profile = p, gpu = "A100-SXM4-80GB", power_limit_w = 500, fit = "time", folds = 4 }
assert(r.folds == 4 and r.overall.fit.time_mape < r.overall.oob.time_mape)
assert(#r.points == 608 and #r.ops == 16 and r.model.ops[1].t0_s > 0)
ok, err = pcall(js.validate_interval, { profile = p, gpu = "A100-SXM4-80GB", samples = 3,
  fn = function(m) error("boom") end })
assert(not ok and err:find("boom"), err)
local kept
local iv = js.validate_interval { profile = p, gpu = "A100-SXM4-80GB", samples = 4, fit = "power",
  fn = function(m) kept = m; local t, e = m:predict("stage0.forward", 1200); assert(js.gpu(m.gpu)); return e end }
assert(iv.lo <= iv.hi and iv.samples == 4)
ok, err = pcall(function() return kept:predict("stage0.forward", 1200) end)
assert(not ok and err:find("only valid inside"), err)
-- whole run
local c = js.cluster { gpu = "A100-SXM4-80GB", gpus = 1 }
local w = js.gpt { model = "gpt3-125m", tp = 1, pp = 1, dp = 1, microbatch_size = 1, microbatches = 2, seq_len = 2048 }
local s = js.simulate { cluster = c, workload = w, iterations = 2 }
local f = io.open(dir .. "/run.csv", "w")
f:write(string.format("rank,time_s,energy_j\n0,%.9f,%.9f\n", s.iteration_time_s * 1.1, s.energy_j / 2 * 1.25))
f:close()
local v = js.validate_run { measured = dir .. "/run.csv", result = s }
assert(math.abs(v.energy_err - (1 / 1.25 - 1)) < 1e-6, v.energy_err)
assert(math.abs(v.ranks[1].time_err - (1 / 1.1 - 1)) < 1e-6)
assert(v.text:find("1 ranks"))
f = io.open(dir .. "/run2.csv", "w"); f:write("rank,time_s,energy_j\n0,1,1\n1,1,1\n"); f:close()
ok, err = pcall(js.validate_run, { measured = dir .. "/run2.csv", result = s })
assert(not ok and err:find("2 ranks, the simulation 1 GPUs"), err)
print("lua ok")
EOF
"$J" run "$tmp/api.lua" "$tmp" >"$tmp/api.txt" 2>&1 \
  || { cat "$tmp/api.txt"; fail "Lua API"; }
grep -q 'lua ok' "$tmp/api.txt" || fail "Lua API output"

# The scenario runs as is (sandboxed: only the joulesim API writes).
"$J" run --sandbox --allow-write "$tmp" scenarios/validate_profile.lua "$D" \
  "$tmp/s.h5" quick \
  >"$tmp/scen.txt" 2>"$tmp/err.txt" \
  || { cat "$tmp/err.txt"; fail "scenario"; }
grep -q 'Held-out MAPE' "$tmp/scen.txt" || fail "scenario summary"
# Without DIR, from another directory: the profiles beside the script.
R=$(pwd)
JA=$(cd "$(dirname "$J")" && pwd)/$(basename "$J")
mkdir "$tmp/elsewhere"
(cd "$tmp/elsewhere" && "$JA" run "$R/scenarios/validate_profile.lua") \
  >"$tmp/else.txt" 2>&1 || { cat "$tmp/else.txt"; fail "scenario elsewhere"; }
grep -q "^profiles: $R/scenarios/../tests/data/profiles\$" "$tmp/else.txt" ||
  fail "scenario elsewhere: profiles not found beside the script"
grep -q '90% interval' "$tmp/scen.txt" || fail "scenario interval"
[ -s "$tmp/s.h5" ] || fail "scenario HDF5"
echo "ok"
