#!/bin/sh
# call 1: runner on main+bwd2, ncu profile, issue-7 fp32 L8192 B16 padded
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site
export DATTN_GIT_COMMIT=${DATTN_GIT_COMMIT:?}
O=$OUT/res; mkdir -p $O/check $O/prof $O/i7
GPU_CHECK_BUDGET=360 OUT=$O/check sh scripts/gpu_check.sh
cat $O/check/summary.txt
export DATTN_LIBRARY=$(pwd)/build/libdattn.so
timeout 90 ncu --clock-control none --profile-from-start off \
  --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats \
  --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis \
  -o $O/prof/prof python3 .gpu/prof.py > $O/prof/ncu.log 2>&1
echo "ncu rc=$?"; tail -3 $O/prof/ncu.log
[ -f $O/prof/prof.ncu-rep ] && ncu --import $O/prof/prof.ncu-rep --print-summary per-kernel > $O/prof/summary.txt 2>&1
[ -f $O/prof/prof.ncu-rep ] && ncu --import $O/prof/prof.ncu-rep > $O/prof/details.txt 2>&1
PYTHONPATH=python:$PYTHONPATH timeout 90 python3 -m dattn bench --device cuda --dtypes fp32 --layouts padded --lengths 8192 --batches 16 --quiet --out $O/i7 > $O/i7/log.txt 2>&1
echo "i7 rc=$?"; tail -5 $O/i7/log.txt
cd $OUT && tar czf /tmp/all.tgz res && rm -rf res && mv /tmp/all.tgz $OUT/
