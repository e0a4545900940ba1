#!/bin/sh
# Runs each test program, sums the "N passed, N failed[, N skipped]" line each prints,
# and prints the total the same way. Exit status 77 from a program means "skipped"
# (e.g. CUDA tests without a GPU). Usage: run.sh "WRAPPER" "ARGS" prog...
# Each program's first lines (its seed) and last 40 lines are shown, with its time.
wrap=$1; args=$2; shift 2
tp=0; tf=0; ts=0; bad=0
for t in "$@"; do
  name=$(basename "$t")
  echo "== $name"
  t0=$(date +%s)
  out=$( $wrap "$t" $args 2>&1 ); rc=$?
  t1=$(date +%s)
  n=$(printf '%s\n' "$out" | wc -l)
  if [ "$n" -gt 46 ]; then
    printf '%s\n' "$out" | head -n 3
    echo "... ($((n - 43)) lines)"
  fi
  printf '%s\n' "$out" | tail -n 40
  line=$(printf '%s\n' "$out" | grep -E '^[0-9]+ passed, [0-9]+ failed' | tail -n 1)
  if [ $rc -eq 77 ]; then
    ts=$((ts + 1)); echo "-- $name: skipped ($((t1 - t0)) s)"; continue
  fi
  if [ -z "$line" ]; then
    echo "-- $name: exit $rc without a result line"; bad=1; tf=$((tf + 1)); continue
  fi
  p=$(echo "$line" | sed -E 's/^([0-9]+) passed.*/\1/')
  f=$(echo "$line" | sed -E 's/^[0-9]+ passed, ([0-9]+) failed.*/\1/')
  s=$(echo "$line" | sed -nE 's/.*, ([0-9]+) skipped.*/\1/p')
  tp=$((tp + p)); tf=$((tf + f)); ts=$((ts + ${s:-0}))
  if [ $rc -ne 0 ] && [ "$f" -eq 0 ]; then
    echo "-- $name: exit $rc"; bad=1; tf=$((tf + 1))
  fi
  echo "-- $name: $((t1 - t0)) s"
done
echo "$tp passed, $tf failed, $ts skipped"
[ $tf -eq 0 ] && [ $bad -eq 0 ]
