#!/bin/sh
# call 3 (x2 machine): GPU 0 runs the runner; GPU 1 the issue-7 fp32 grid meanwhile; then DDP on both.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site
export DATTN_GIT_COMMIT=${DATTN_GIT_COMMIT:?}
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
O=$OUT/res; mkdir -p $O/check $O/i7 $O/ddp
t0=$(date +%s)
( CUDA_VISIBLE_DEVICES=0 GPU_CHECK_BUDGET=${B:-430} JOBS=32 OUT=$O/check sh scripts/gpu_check.sh > $O/check/stdout.txt 2>&1 ) &
pc=$!
# wait for the runner's build, then the fp32 grid on GPU 1
for i in $(seq 1 60); do grep -q "==== build:" $O/check/gpu_check.log 2>/dev/null && break; sleep 3; done
( CUDA_VISIBLE_DEVICES=1 PYTHONPATH=python:$PYTHONPATH DATTN_LIBRARY=$(pwd)/build/libdattn.so timeout 280 \
   python3 -m dattn bench --device cuda --dtypes fp32 --budget 250 --quiet --out $O/i7 > $O/i7/bench7.log 2>&1; echo "i7 rc=$?" >> $O/i7/bench7.log ) &
pb=$!
wait $pc; echo "check done at $(( $(date +%s) - t0 ))s"
wait $pb; echo "i7 done at $(( $(date +%s) - t0 ))s"; tail -3 $O/i7/bench7.log
cat $O/check/summary.txt
OUT=$O/ddp timeout 120 sh scripts/gpu_ddp.sh > $O/ddp/stdout.txt 2>&1; echo "ddp rc=$? at $(( $(date +%s) - t0 ))s"; tail -2 $O/ddp/stdout.txt
cd $OUT && tar czf /tmp/all.tgz res && rm -rf res && mv /tmp/all.tgz $OUT/
