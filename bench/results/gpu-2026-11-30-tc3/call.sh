#!/bin/sh
# call 4 (x2): GPU 0 the runner (main + bwd3); GPU 1 the issue-7 fp32 packed B=16 cells, then the MNLI run.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site
export DATTN_GIT_COMMIT=${DATTN_GIT_COMMIT:?}
export TRITON_CACHE_DIR=/tmp/triton-cache
O=$OUT/res; mkdir -p $O/check $O/i7
t0=$(date +%s)
( CUDA_VISIBLE_DEVICES=0 GPU_CHECK_BUDGET=${B:-520} JOBS=32 OUT=$O/check sh scripts/gpu_check.sh > $O/check/stdout.txt 2>&1 ) &
pc=$!
for i in $(seq 1 60); do grep -q "==== build:" $O/check/gpu_check.log 2>/dev/null && break; sleep 3; done
(
  export CUDA_VISIBLE_DEVICES=1 PYTHONPATH=python:$PYTHONPATH DATTN_LIBRARY=$(pwd)/build/libdattn.so PYTHONUNBUFFERED=1
  timeout 200 python3 -m dattn bench --device cuda --dtypes fp32 --layouts packed --batches 16 --lengths 2048,4096,8192 \
     --budget 180 --out $O/i7/fp32p > $O/i7/fp32p.log 2>&1; echo "fp32p rc=$?" >> $O/i7/fp32p.log
  left=$(( 540 - ($(date +%s) - t0) ))
  timeout $left python3 -m dattn mnli --device cuda --budget $(( left - 40 )) --out $O/i7/mnli > $O/i7/mnli.log 2>&1; echo "mnli rc=$?" >> $O/i7/mnli.log
) &
pb=$!
wait $pc; echo "check done at $(( $(date +%s) - t0 ))s"
wait $pb; echo "i7 done at $(( $(date +%s) - t0 ))s"; tail -3 $O/i7/fp32p.log $O/i7/mnli.log
cat $O/check/summary.txt
cd $OUT && tar czf /tmp/all.tgz res && rm -rf res && mv /tmp/all.tgz $OUT/
