#!/bin/sh
# `joulesim trace` end to end: gen -> info -> export (and import of the real
# Kineto traces), the timeline's JSON, and exit statuses for bad input:
# 0 ok, 1 user error (message names the file), 2 usage error; no output
# file (and no temporary file) is left behind by a failed command.
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
absent() { # absent NAME FILE: a failed command left no file
  if [ -e "$2" ]; then echo "FAIL $1: $2 exists"; fails=$((fails+1)); else echo "ok $1"; fi
}
no_temp() {
  if ls -A "$T" | grep -q '\.tmp-'; then
    echo "FAIL $1: temporary files left:"; ls -A "$T"; fails=$((fails+1))
  else
    echo "ok $1"
  fi
}
PY=""
if command -v python3 >/dev/null 2>&1; then PY=python3; fi

# --- help and usage --------------------------------------------------------
check trace-help 0 "commands:" -- "$J" trace --help
for sub in gen import info export; do
  check "trace-$sub-help" 0 "usage: joulesim trace $sub" -- "$J" trace $sub --help
done
check trace-no-args 2 "usage" -- "$J" trace
check trace-unknown 2 "unknown command 'frob'" -- "$J" trace frob

# --- gen -> info -> export --------------------------------------------------
check gen 0 "8 ranks" -- "$J" trace gen --model gpt3-125m --tp 2 --pp 2 --dp 2 \
  --microbatches 4 --seq-len 512 -o "$T/g.h5"
check info 0 "ranks         8" -- "$J" trace info "$T/g.h5"
check info-classes 0 "ops per class" -- "$J" trace info "$T/g.h5"
check info-groups 0 "  tp " -- "$J" trace info "$T/g.h5"
check export 0 "op events" -- "$J" trace export --chrome "$T/g.json" --iterations 2 "$T/g.h5"
check export-subset 0 "op events" -- "$J" trace export --chrome "$T/s.json" \
  --gpus 0,3-4 --window 1ms:3ms "$T/g.h5"
check export-fixed 0 "fixed" -- "$J" trace export --chrome="$T/f.json" \
  --policy fixed:1200 --cluster-gpu A100-SXM4-80GB --network dgx-a100 "$T/g.h5"
if [ -n "$PY" ]; then
  check export-json 0 "pids 8" -- $PY -c "
import json
d = json.load(open('$T/g.json'))
ev = d['traceEvents']
x = [e for e in ev if e['ph'] == 'X']
pids = sorted({e['pid'] for e in x})
assert pids == list(range(8)), pids
assert all(e['dur'] >= 0 and ('class' in e['args'] or e['cat'] == 'blocked') for e in x)
assert any(e['ph'] == 'C' and e['name'] == 'power_w' for e in ev)
assert any(e['ph'] == 'C' and e['name'] == 'sm_mhz' for e in ev)
assert any(e['ph'] == 'M' and e['name'] == 'thread_name' for e in ev)
print('pids', len(pids))
"
  check export-subset-json 0 "subset ok" -- $PY -c "
import json
ev = json.load(open('$T/s.json'))['traceEvents']
assert ev and {e['pid'] for e in ev} <= {0, 3, 4}, {e['pid'] for e in ev}
for e in ev:
    if e['ph'] == 'X':
        assert e['ts'] <= 3000.001 and e['ts'] + e['dur'] >= 999.999, e
    if e['ph'] == 'C':
        assert 1000 <= e['ts'] <= 3000, e
print('subset ok')
"
  check export-fixed-json 0 "clock ok" -- $PY -c "
import json
ev = json.load(open('$T/f.json'))['traceEvents']
c = [e['args']['sm_mhz'] for e in ev if e['ph'] == 'C' and e['name'] == 'sm_mhz']
assert c and max(c) <= 1200, c[:5]
print('clock ok')
"
else
  echo "skip JSON checks (no python3)"
fi

# --- usage errors (2) --------------------------------------------------------
check gen-unknown-option 2 "unknown option '--frob'" -- "$J" trace gen --frob -o "$T/x.h5"
check gen-missing-o 2 "missing -o" -- "$J" trace gen --model gpt3-125m
check gen-bad-number 2 "\-\-tp" -- "$J" trace gen --tp two -o "$T/x.h5"
check gen-o-without-value 2 "\-o needs" -- "$J" trace gen -o
check info-missing-file 2 "missing FILE" -- "$J" trace info
check info-unknown-option 2 "unknown option" -- "$J" trace info --frob "$T/g.h5"
check export-missing-chrome 2 "missing --chrome" -- "$J" trace export "$T/g.h5"
check export-missing-input 2 "missing TRACE" -- "$J" trace export --chrome "$T/x.json"
check export-bad-window 2 "window" -- "$J" trace export --chrome "$T/x.json" --window 2:1 "$T/g.h5"
check export-bad-policy 2 "\-\-policy" -- "$J" trace export --chrome "$T/x.json" --policy turbo "$T/g.h5"
check export-bad-iterations 2 "\-\-iterations" -- "$J" trace export --chrome "$T/x.json" --iterations 0 "$T/g.h5"
absent no-json-after-usage-errors "$T/x.json"

# --- user errors (1) ---------------------------------------------------------
check gen-bad-model 1 "gpt3-175b" -- "$J" trace gen --model gpt9 -o "$T/x.h5"
check gen-bad-split 1 "tp" -- "$J" trace gen --model gpt3-125m --tp 5 -o "$T/x.h5"
absent gen-failed-no-file "$T/x.h5"
mkdir "$T/dir.h5" "$T/dir.json"
check gen-dir-output 1 "dir.h5" -- "$J" trace gen --model gpt3-125m -o "$T/dir.h5"
check gen-missing-dir 1 "no/such/x.h5" -- "$J" trace gen --model gpt3-125m -o "$T/no/such/x.h5"
check info-missing 1 "nope.h5" -- "$J" trace info "$T/nope.h5"
head -c 5000 "$T/g.h5" >"$T/trunc.h5"
check info-truncated 1 "trunc.h5.*truncated" -- "$J" trace info "$T/trunc.h5"
printf 'not a trace\n' >"$T/text.h5"
check info-not-hdf5 1 "text.h5" -- "$J" trace info "$T/text.h5"
check info-directory 1 "directory" -- "$J" trace info "$T/dir.h5"
check export-missing 1 "nope.h5" -- "$J" trace export --chrome "$T/x.json" "$T/nope.h5"
check export-truncated 1 "trunc.h5" -- "$J" trace export --chrome "$T/x.json" "$T/trunc.h5"
check export-dir-output 1 "dir.json" -- "$J" trace export --chrome "$T/dir.json" "$T/g.h5"
check export-bad-gpus 1 "g.h5: GPU list '9'" -- "$J" trace export --chrome "$T/x.json" --gpus 9 "$T/g.h5"
check export-clock-range 1 "5000" -- "$J" trace export --chrome "$T/x.json" --policy fixed:5000 "$T/g.h5"
check export-unknown-gpu 1 "Z100" -- "$J" trace export --chrome "$T/x.json" --cluster-gpu Z100 "$T/g.h5"
check export-unknown-network 1 "dgx-a100" -- "$J" trace export --chrome "$T/x.json" --network nvl72 "$T/g.h5"
absent export-failed-no-file "$T/x.json"
no_temp no-temporary-files

# --- import (the Kineto traces) ----------------------------------------------
D=""
for d in tests/data/traces/kineto tests/data/traces ../shared/data/traces/kineto; do
  if ls "$d"/*.json.gz >/dev/null 2>&1; then D=$d; break; fi
done
if [ -z "$D" ]; then
  echo "skip import: no Kineto traces in tests/data/traces or ../shared/data/traces/kineto"
elif ! "$J" trace import --help >/dev/null 2>&1; then
  echo "skip import: joulesim trace import is not available"
else
  A=$(ls "$D"/*.json.gz | head -n 1)
  check import 0 "wrote" -- "$J" trace import "$A" -o "$T/k.h5"
  check import-info 0 "GPU busy time" -- "$J" trace info "$T/k.h5"
  check import-info-json 0 "ops per class" -- "$J" trace info "$A"
  check import-export 0 "op events" -- "$J" trace export --chrome "$T/k.json" "$T/k.h5"
  check import-export-json-input 0 "op events" -- "$J" trace export --chrome "$T/k2.json" "$A"
  if [ -n "$PY" ]; then
    # Real kernel names (C++ templates, mangled names) stay valid JSON.
    check import-export-parses 0 "same events" -- $PY -c "
import json
a = json.load(open('$T/k.json'))['traceEvents']
b = json.load(open('$T/k2.json'))['traceEvents']
xa = [e for e in a if e['ph'] == 'X']
assert xa and all(e['name'] for e in xa)
assert len(a) == len(b)
print('same events', len(a))
"
  fi
  # Two ranks of one job.
  if ls "$D"/sampled_world128_rank*.json.gz >/dev/null 2>&1; then
    check import-two-ranks 0 "2 ranks" -- "$J" trace import \
      "$D"/sampled_world128_rank*.json.gz -o "$T/two.h5"
    check import-two-ranks-info 0 "ranks         2" -- "$J" trace info "$T/two.h5"
  fi
  head -c 1000 "$A" >"$T/cut.json.gz"
  check import-truncated-gzip 1 "cut.json.gz" -- "$J" trace import "$T/cut.json.gz" -o "$T/cut.h5"
  absent import-truncated-no-file "$T/cut.h5"
  : >"$T/empty.json"
  check import-empty 1 "empty.json" -- "$J" trace import "$T/empty.json" -o "$T/empty.h5"
  absent import-empty-no-file "$T/empty.h5"
  check import-missing-o 2 "missing -o" -- "$J" trace import "$A"
  check import-missing-files 2 "missing trace FILES" -- "$J" trace import -o "$T/n.h5"
  check import-dir-output 1 "dir.h5" -- "$J" trace import "$A" -o "$T/dir.h5"
  check import-mixed 1 "native" -- "$J" trace import "$T/g.h5" "$A" -o "$T/m.h5"
  absent import-mixed-no-file "$T/m.h5"
  no_temp no-temporary-files-after-import
fi
exit $fails
