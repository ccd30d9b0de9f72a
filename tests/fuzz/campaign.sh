#!/bin/sh
# tests/fuzz/campaign.sh TARGET CPU_SECONDS [extra libFuzzer flags]
#
# One long fuzzing run of build-fuzz/fuzz-TARGET (build it first with
# `make fuzz-build`), niced, one process, until it has used CPU_SECONDS of
# CPU time (user + system; on a shared machine wall time says little), then
# interrupted.  Same options as `make fuzz`.  Prints one summary line:
#
#   TARGET cpu_s=N wall_s=N execs=N new_units=N findings=N
#
# and keeps the libFuzzer log in build-fuzz/campaign-TARGET.log.  The
# working corpus (build-fuzz/corpus/TARGET) carries over between runs;
# findings are saved as build-fuzz/crash-TARGET-*.
set -eu
t=$1
budget=$2
shift 2
root=$(pwd)
bin=$root/build-fuzz/fuzz-$t
[ -x "$bin" ] || { echo "no $bin: run make fuzz-build" >&2; exit 2; }
case $t in
  kineto|chakra|h5raw) maxlen=16384 ;;
  profile|sched) maxlen=8192 ;;
  lua-args) maxlen=2048 ;;
  *) maxlen=4096 ;;
esac
extra=""
# (tests/fuzz/fuzz.mk says why h5raw has a longer timeout)
[ "$t" = h5raw ] && extra="-timeout=60"
dict=""
[ -f tests/fuzz/$t.dict ] && dict="-dict=tests/fuzz/$t.dict"
mkdir -p build-fuzz/corpus/$t
log=build-fuzz/campaign-$t.log
start=$(date +%s)
export LSAN_OPTIONS=suppressions=$root/tests/fuzz/lsan.supp
nice -n 19 "$bin" -timeout=10 -rss_limit_mb=2048 -malloc_limit_mb=128 \
  $extra -max_len=$maxlen $dict \
  -print_final_stats=1 -artifact_prefix="$root/build-fuzz/crash-$t-" \
  "$@" "$root/build-fuzz/corpus/$t" "$root/tests/fuzz/corpus/$t" \
  >"$log" 2>&1 &
pid=$!
# CPU time of the fuzzer and its reaped children from /proc (clock ticks
# -> seconds).
hz=$(getconf CLK_TCK)
cpu=0
while kill -0 $pid 2>/dev/null; do
  if [ -r /proc/$pid/stat ]; then
    # fields 14 to 17: utime and stime of the fuzzer and of the children
    # it has waited for (io/h5open.h checks each HDF5 file in a child);
    # the name field has no spaces here
    ticks=$(awk '{print $14 + $15 + $16 + $17}' /proc/$pid/stat \
            2>/dev/null || echo 0)
    cpu=$((ticks / hz))
    if [ "$cpu" -ge "$budget" ]; then
      kill -INT $pid
      break
    fi
  fi
  sleep 5
done
wait $pid || true
end=$(date +%s)
execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | awk '{print $2}')
new=$(grep -o 'stat::new_units_added: *[0-9]*' "$log" | awk '{print $2}')
# Findings are the inputs this run saved as its own (libFuzzer's "Test
# unit written" in the log; a slow unit is no finding), not files named
# crash-*: io/h5open.h's children are forks of the fuzzer, and one that
# libhdf5 kills may leave such a file while the parent refuses the input
# cleanly, as it should.
saved=$(grep -c "Test unit written to" "$log" || true)
slow=$(grep -c "Test unit written to .*slow-unit" "$log" || true)
echo "$t cpu_s=$cpu wall_s=$((end - start)) execs=${execs:-?}" \
     "new_units=${new:-?} findings=$((saved - slow))"
