#!/bin/sh
# call 5 (x1): the MNLI-shaped run alone (no other job on the host), then ncu of the forward
# (default sm90w1), the tc3 backward (DATTN_CUDA_BWD=tc3) and SDPA flash.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site
export DATTN_GIT_COMMIT=${DATTN_GIT_COMMIT:?}
export TRITON_CACHE_DIR=/tmp/triton-cache PYTHONUNBUFFERED=1
O=$OUT/res; mkdir -p $O/mnli $O/ncu
t0=$(date +%s)
make -j16 CUDA=1 CUDA_ARCHS="-gencode=arch=compute_90a,code=sm_90a" lib > $O/build.log 2>&1 || { echo build failed; tail $O/build.log; }
echo "built at $(( $(date +%s) - t0 ))s"
export PYTHONPATH=python:$PYTHONPATH DATTN_LIBRARY=$(pwd)/build/libdattn.so
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm --format=csv > $O/env.txt 2>&1
timeout 300 python3 -m dattn mnli --device cuda --budget 250 --out $O/mnli > $O/mnli/mnli.log 2>&1; echo "mnli rc=$? at $(( $(date +%s) - t0 ))s"
tail -10 $O/mnli/mnli.log
cp .gpu/prof.py $O/ncu/
DATTN_CUDA_BWD=tc3 timeout 200 ncu --profile-from-start off -k regex:"dattn_fwd|dattn_bwd|flash" \
  --section SpeedOfLight --section Occupancy --section LaunchStats --section ComputeWorkloadAnalysis \
  --section MemoryWorkloadAnalysis --section SchedulerStats --section WarpStateStats \
  python3 .gpu/prof.py > $O/ncu/details.txt 2>&1; echo "ncu rc=$? at $(( $(date +%s) - t0 ))s"
grep -E "dattn_|flash|Duration|Issue Slots Busy|Theoretical Occupancy|Achieved Occupancy|Block Limit (Shared|Registers)|Registers Per|Warp Cycles Per Issued|Shared Memory Bandwidth|Compute \(SM\) Throughput" $O/ncu/details.txt | head -150 > $O/ncu/summary.txt
cd $OUT && tar czf /tmp/all.tgz res && rm -rf res && mv /tmp/all.tgz $OUT/
