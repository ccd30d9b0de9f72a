#!/bin/sh
# joulesim fidelity (docs/fidelity.md): the short run must not be worse than
# the record in docs/fidelity-record.csv on any case, its HDF5 output holds
# the tables, and bad input (a missing data directory, an unknown --only
# name, a malformed CSV, an unknown option, a Markdown record) is refused
# with exit status 1 and a message naming the file and line.
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

check short-vs-record 0 "^check: [0-9]+ cases, none worse than docs/fidelity-record.csv" -- \
  "$J" fidelity --short --data tests/data --check docs/fidelity-record.csv
cp "$T/out" "$T/short"

# The record against a second path: --check only compares the run with
# figures the run itself wrote, so each figure below is also computed by
# another tool from the same files and options, and must be the same to
# the printed precision.
# fig DATASET CASE METRIC: that row's figure in the short run's summary.
fig() {
  awk -v d="$1" -v c="$2" -v m="$3" '
    index($0, "  " d " ") == 1 && index($0, " " c " ") &&
    (i = index($0, " " m " ")) {
      s = substr($0, i + length(m) + 2)
      if (match(s, /[0-9]+\.[0-9]+/)) print substr(s, RSTART, RLENGTH)
      exit
    }' "$T/short"
}
same() { # same NAME FIDELITY SECOND-PATH
  if [ -n "$2" ] && [ "$2" = "$3" ]; then echo "ok $1 ($2)"
  else echo "FAIL $1: fidelity '$2', second path '$3'"; fails=$((fails+1)); fi
}
# The stage profiles against `joulesim validate` on the same file, GPU and
# limit (seed 1 both): out of the box is its --fit none overall row (every
# clock), the held-out rows its default overall row's fitted columns.
for c in "gpt3-175b+a100_sxm_bf16 A100-SXM4-80GB 500" \
         "bloom+a100_sxm_bf16 A100-SXM4-80GB 500" \
         "gpt3-175b+a40_bf16 A40 300" "bloom+a40_bf16 A40 300"; do
  set -- $c
  p=tests/data/profiles/$1.csv
  "$J" validate "$p" --gpu "$2" --power-limit "$3" --fit none >"$T/none" 2>&1
  "$J" validate "$p" --gpu "$2" --power-limit "$3" --out "$T/v-$1.h5" \
    >"$T/held" 2>&1
  d=profiles/$1.csv
  set -- "$1" $(awk '$1 == "overall" { print $3, $6; exit }' "$T/none") \
    $(awk '$1 == "overall" { print $9, $12; exit }' "$T/held")
  same "$1 out of the box, time" "$(fig "$d" "$1.csv" "out of the box, time MAPE")" "${2-}"
  same "$1 out of the box, energy" "$(fig "$d" "$1.csv" "out of the box, energy MAPE")" "${3-}"
  same "$1 held out, time" "$(fig "$d" "$1.csv" "held-out clocks after a refit, time MAPE")" "${4-}"
  same "$1 held out, energy" "$(fig "$d" "$1.csv" "held-out clocks after a refit, energy MAPE")" "${5-}"
done
# A Zeus sweep and a plan-0 run against plain js.simulate
# (tests/fidelity-rederive.lua).
"$J" run tests/fidelity-rederive.lua tests/data >"$T/re" 2>&1 || cat "$T/re"
re() { sed -n "s/^$1: //p" "$T/re"; }
z=zeus-powerlimit/a40_global.csv
same "a40 gpt3-2.7b sweep, normalised time" \
  "$(fig $z gpt3-2.7b "normalised time, max abs err")" "$(re "sweep normalised time")"
same "a40 gpt3-2.7b sweep, normalised energy" \
  "$(fig $z gpt3-2.7b "normalised energy, max abs err")" "$(re "sweep normalised energy")"
same "a40 gpt3-2.7b sweep, minimum-energy limit" \
  "$(fig $z gpt3-2.7b "minimum-energy limit, abs err")" "$(re "sweep minimum-energy limit")"
same "a40 gpt3-2.7b sweep, top limit" \
  "$(fig $z gpt3-2.7b "iteration time at the top limit, abs err")" "$(re "sweep top limit")"
same "a40 gpt3-2.7b plan 0, iteration time" \
  "$(fig perseus-runs/gpt3-2.7b_a40_dp1_pp8_tp1_stage_times.csv gpt3-2.7b \
     "iteration time, abs err")" "$(re "plan-0 iteration time")"
# The H100 fit reproduces from its data (docs/gpu-model.md "The H100 fit"),
# activity_tf32 as the catalogue carries it.
check h100-refit 0 "p_dyn_w 786 W .*activity_tf32 0\.622" -- \
  "$J" fidelity --data tests/data --only h100-powercap --refit
check h100-tf32-catalogue 0 "activity_tf32 +0\.622 x +fit to " -- \
  "$J" gpus H100-SXM5-94GB
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
# The *_pct columns hold %: fidelity's profiles table against the
# validate_summary tables `joulesim validate --out` wrote above.
if /usr/bin/python3 -c 'import h5py' 2>/dev/null; then
  check profiles-table 0 "^compared 4 profiles$" -- sh -c "
    '$J' fidelity --short --data tests/data --only profiles/ --out '$T/p.h5' &&
    /usr/bin/python3 -c \"
import h5py
with h5py.File('$T/p.h5') as f:
    rows = f['/results/profiles'][:]
for r in rows:
    case = r['case'].decode()
    with h5py.File('$T/v-' + case[:-4] + '.h5') as g:
        s = [x for x in g['/results/validate_summary'][:] if x['op'] == b'overall'][0]
    for a, b in (('oob_time_mape_pct', 'oob_all_time_mape_pct'),
                 ('oob_energy_mape_pct', 'oob_all_energy_mape_pct'),
                 ('heldout_time_mape_pct', 'fit_time_mape_pct'),
                 ('heldout_energy_mape_pct', 'fit_energy_mape_pct')):
        assert abs(r[a] - s[b]) <= 1e-9 * abs(s[b]), (case, a, r[a], s[b])
print('compared', len(rows), 'profiles')
\""
fi
check png-needs-out 1 "--png needs --out FILE.h5" -- "$J" fidelity --png "$T/x"

check nelder-mead 0 "^ok$" -- "$J" run tests/nelder-mead-check.lua

# The check can fail: a record with a smaller figure for one case.
sed 's/^\(kerneltuner[^,]*,[^,]*,"time, max abs err",\)[0-9.]*/\10.01/' \
  docs/fidelity-record.csv >"$T/record.csv"
check check-grew 1 "record\.csv:[0-9]+: kerneltuner.*time, max abs err grew from 0\.01" -- \
  "$J" fidelity --short --data tests/data --only kerneltuner --check "$T/record.csv"

# The default data is found from the binary, not the current directory:
# run elsewhere, a checkout's binary reads the shared data beside the
# checkout or its tests/data; an installed one (PREFIX/bin) reads
# PREFIX/share/joulesim/data; with neither, the error names where it looked.
R=$(pwd)
JA=$(cd "$(dirname "$J")" && pwd)/$(basename "$J")
check data-elsewhere 0 "^data: ($(dirname "$R")/shared/data|$R/tests/data) \(" -- \
  sh -c "cd '$T' && '$JA' fidelity --short --only kerneltuner"
mkdir -p "$T/prefix/bin" "$T/prefix/share/joulesim/data" \
  "$T/prefix/share/joulesim/tools"
cp "$JA" "$T/prefix/bin/joulesim"
cp tools/fidelity.lua "$T/prefix/share/joulesim/tools/"
cp -r tests/data/measured "$T/prefix/share/joulesim/data/"
check data-installed 0 "^data: $T/prefix/share/joulesim/data \(installed with the binary\)" -- \
  sh -c "cd '$T' && '$T/prefix/bin/joulesim' fidelity --short --only kerneltuner"
rm -rf "$T/prefix/share/joulesim/data"
check data-none 1 "no data: none of $T/prefix/share/joulesim/data holds measured/README.md; give --data DIR" -- \
  sh -c "cd '$R' && '$T/prefix/bin/joulesim' fidelity --short --only kerneltuner"
# The program itself is a script beside the binary (tools/fidelity.lua),
# found the same way; without it the error names both places.
rm -rf "$T/prefix/share"
check script-none 1 "the fidelity script is neither $T/prefix/bin/tools/fidelity\.lua \(a checkout\) nor $T/prefix/share/joulesim/tools/fidelity\.lua \(installed\)" -- \
  sh -c "cd '$R' && '$T/prefix/bin/joulesim' fidelity --short --only kerneltuner"
# --record rewrites the record from the run: the altered figure is the
# run's again, the rows the run skipped stay, and the file is the record
# again byte for byte.
check record 0 "^record: 3 cases written to $T/record\.csv" -- \
  "$J" fidelity --short --data tests/data --only kerneltuner --record "$T/record.csv"
t=$(sed -n 's/^  kerneltuner.* time, max abs err *\([0-9.]*\)%.*/\1/p' "$T/out")
if grep -q "^kerneltuner[^,]*,[^,]*,\"time, max abs err\",$t,%," "$T/record.csv" &&
   cmp -s docs/fidelity-record.csv "$T/record.csv"; then
  echo "ok record-rewrites"
else
  echo "FAIL record-rewrites"; diff docs/fidelity-record.csv "$T/record.csv"; fails=$((fails+1))
fi
# A new record file is created with the run's rows.
check record-new 0 "^record: 3 cases written to $T/new\.csv" -- \
  "$J" fidelity --short --data tests/data --only kerneltuner --record "$T/new.csv"
check record-new-check 0 "^check: 3 cases, none worse than $T/new\.csv" -- \
  "$J" fidelity --short --data tests/data --only kerneltuner --check "$T/new.csv"
# The record is data: a Markdown file is refused before anything runs, and
# left as it was.
printf '# notes\n\nno table here\n' >"$T/plain.md"
cp "$T/plain.md" "$T/plain.orig"
check record-md 1 "^joulesim fidelity: --record $T/plain\.md: the record is a CSV file \(docs/fidelity-record\.csv\), not a Markdown table" -- \
  "$J" fidelity --short --data tests/data --only kerneltuner --record "$T/plain.md"
cmp -s "$T/plain.md" "$T/plain.orig" ||
  { echo "FAIL record-md: the file changed"; fails=$((fails+1)); }
check check-md 1 "--check docs/fidelity\.md: the record is a CSV file" -- \
  "$J" fidelity --short --data tests/data --only kerneltuner --check docs/fidelity.md
printf 'dataset,case,metric,figure,unit,role\n' >"$T/cols.csv"
check record-columns 1 "cols\.csv:1: missing column 'error'" -- \
  "$J" fidelity --short --data tests/data --only kerneltuner --check "$T/cols.csv"
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
check short-row 1 "forward_kernels\.csv:[0-9]+: 2 columns, the header has 9" -- \
  "$J" fidelity --data "$T/d" --only kernel-dvfs
C="$T/d/measured/perseus-runs/bloom-3b_a100_dp1_pp4_tp1_stage_clocks.csv"
sed '3s/^0,forward/4,forward/' "$C" >"$C.new" && mv "$C.new" "$C"
check stage-clocks-rank 1 "tp1_stage_clocks\.csv:3: rank 0\.\.3, a whole sm_mhz and pass forward or backward expected" -- \
  "$J" fidelity --data "$T/d" --only bloom-3b_a100_dp1_pp4_tp1_stage_clocks

[ "$fails" -eq 0 ]
