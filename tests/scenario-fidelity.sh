#!/bin/sh
# joulesim fidelity (docs/fidelity.md): the short run must not be worse than
# the record in docs/fidelity.md on any case, its HDF5 output holds the
# tables, and bad input (a missing data directory, an unknown --only name,
# a malformed CSV, an unknown option) is refused with exit status 1 and a
# message naming the file and line.
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
    echo "FAIL $name: exit $got, want $want"; tail -20 "$T/out"; fails=$((fails+1)); return
  fi
  if [ -n "$pat" ] && ! grep -Eq -- "$pat" "$T/out"; then
    echo "FAIL $name: output lacks '$pat'"; tail -20 "$T/out"; fails=$((fails+1)); return
  fi
  echo "ok $name"
}

check short-vs-record 0 "^check: [0-9]+ cases, none worse than docs/fidelity.md" -- \
  "$J" fidelity --short --data tests/data --check docs/fidelity.md
# The H100 fit reproduces from its data (docs/gpu-model.md "The H100 fit").
check h100-refit 0 "p_dyn_w 786 W .*the load's activity 0\.622" -- \
  "$J" fidelity --data tests/data --only h100-powercap --refit
check help 0 "usage: joulesim fidelity" -- "$J" fidelity --help
check out 0 "wrote $T/f.h5" -- \
  "$J" fidelity --data tests/data --only kerneltuner --out "$T/f.h5"
if /usr/bin/python3 -c 'import h5py' 2>/dev/null; then
  check out-tables 0 "rows 10 [0-9]+" -- /usr/bin/python3 -c "
import h5py
with h5py.File('$T/f.h5') as f:
    k = f['/results/kerneltuner_a100_pcie_40gb_fp32_synthetic']
    s = f['/results/fidelity_summary']
    print('rows', len(k), len(s))
"
fi

if /usr/bin/python3 -c 'import h5py, matplotlib' 2>/dev/null; then
  check png 0 "validation_kerneltuner_a100_pcie_40gb_fp32_synthetic\.png" -- \
    "$J" fidelity --data tests/data --only kerneltuner --out "$T/g.h5" \
    --png "$T/png"
  [ -s "$T/png/validation_kerneltuner_a100_pcie_40gb_fp32_synthetic.png" ] ||
    { echo "FAIL png: no PNG written"; fails=$((fails+1)); }
fi
check png-needs-out 1 "--png needs --out FILE.h5" -- "$J" fidelity --png "$T/x"

# The check can fail: a record with a smaller figure for one case.
sed 's/^\(| `kerneltuner[^|]*| [^|]*| time, max abs err | \)[0-9.]*/\10.01/' \
  docs/fidelity.md >"$T/record.md"
check check-grew 1 "record\.md:[0-9]+: kerneltuner.*time, max abs err grew from 0\.01" -- \
  "$J" fidelity --short --data tests/data --only kerneltuner --check "$T/record.md"

check missing-data 1 "no/such: not a data directory \(no measured/README.md\)" -- \
  "$J" fidelity --data "$T/no/such"
check unknown-only 1 "--only frobnicate: no dataset has that name" -- \
  "$J" fidelity --data tests/data --only frobnicate
check unknown-option 1 "unknown argument '--bogus'" -- "$J" fidelity --bogus
check missing-value 1 "--out needs a value" -- "$J" fidelity --out
mkdir -p "$T/d"
cp -r tests/data/measured "$T/d/"
chmod -R u+w "$T/d"
Z="$T/d/measured/zeus-powerlimit/a100_pcie_pp4_global.csv"
sed 's/,61\.54543566703797,/,fast,/' "$Z" >"$Z.new" && mv "$Z.new" "$Z"
check malformed-number 1 "a100_pcie_pp4_global\.csv:8: column 'time': 'fast' is not a number" -- \
  "$J" fidelity --data "$T/d" --only zeus-powerlimit/a100
K="$T/d/measured/kerneltuner/a100_pcie_40gb_fp32_synthetic.csv"
sed '1s/power_w/watts/' "$K" >"$K.new" && mv "$K.new" "$K"
check missing-column 1 "a100_pcie_40gb_fp32_synthetic\.csv:1: missing column 'power_w'" -- \
  "$J" fidelity --data "$T/d" --only kerneltuner
S="$T/d/measured/kernel-dvfs-study/forward_kernels.csv"
printf '99,extra\n' >>"$S"
check short-row 1 "forward_kernels\.csv:[0-9]+: 2 fields, the header has 9" -- \
  "$J" fidelity --data "$T/d" --only kernel-dvfs

[ "$fails" -eq 0 ]
