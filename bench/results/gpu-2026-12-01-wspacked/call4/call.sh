#!/bin/sh
# call 4: the final commit (the reduce back to main's): an ncu profile of the reduce kernel (one
# launch at B8 L512, every section named), then the whole test_cuda_bwd (default = ws) beside
# compute-sanitizer memcheck / racecheck / synccheck on its --quick cases, pytest -k cuda of
# test_train.py, then bwd-bench
set -u
export PYTHONUNBUFFERED=1
O=$OUT/res; mkdir -p $O
A="-gencode=arch=compute_90a,code=sm_90a"
{ date -u +%Y-%m-%dT%H:%M:%SZ; echo "commit: ${DATTN_GIT_COMMIT:-?}"; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; } > $O/env.txt
make -j16 CUDA=1 CUDA_ARCHS="$A" lib tests-build > $O/build.log 2>&1 || { tail -20 $O/build.log; exit 1; }
DATTN_LIBRARY=build/libdattn.so timeout 120 ncu --clock-control none -k regex:ws_reduce -c 1 --section SpeedOfLight \
  --section Occupancy --section LaunchStats --section MemoryWorkloadAnalysis --section SchedulerStats \
  --section WarpStateStats python3 .gpu/red_probe.py 8 512 > $O/ncu_reduce_details.txt 2>&1
grep -E "Duration|Memory Throughput|DRAM Throughput|Achieved Occupancy|Theoretical Occupancy|Registers Per|Block Limit|Issue Slots Busy|Warp Cycles Per Issued|Eligible Warps|No Eligible|Waves Per SM" $O/ncu_reduce_details.txt
T=build/tests/test_cuda_bwd
( $T --seed 201 > $O/t_bwd.log 2>&1; echo "rc $?" >> $O/t_bwd.log ) &
for tool in memcheck racecheck synccheck; do
  ( timeout 200 compute-sanitizer --tool $tool --error-exitcode 9 $T --quick --seed 7 > $O/san_$tool.log 2>&1; echo "rc $?" >> $O/san_$tool.log ) &
done
wait
for f in $O/t_*.log $O/san_*.log; do echo "$f: $(grep -E '^[0-9]+ passed' $f | tail -1) $(grep -E 'ERROR SUMMARY' $f | tail -1) $(tail -1 $f)"; done
DATTN_LIBRARY=$(pwd)/build/libdattn.so PYTHONPATH=python timeout 120 python3 -m pytest -q -k cuda -p no:cacheprovider tests/python/test_train.py > $O/pytest_train.log 2>&1; tail -1 $O/pytest_train.log
DATTN_LIBRARY=$(pwd)/build/libdattn.so PYTHONPATH=python timeout 100 python3 bench/gpu_bwd_bench.py --json $O/bwd_bench.json > $O/bwd_bench.log 2>&1; grep -E "^B=" $O/bwd_bench.log
cd $OUT && tar czf /tmp/all.tgz res && rm -rf res && mv /tmp/all.tgz $OUT/
