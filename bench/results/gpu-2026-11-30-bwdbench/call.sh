#!/bin/sh
# call 36 (x1): the op-level forward+backward bench (issue 5's figures) on main after the flush
# changes: build, bench/gpu_bwd_bench.py (default tc3g and the pinned variants, diagnostics).
set -u
export DATTN_GIT_COMMIT=${DATTN_GIT_COMMIT:?} PYTHONUNBUFFERED=1
O=$OUT/res; mkdir -p $O
t0=$(date +%s)
make -j16 CUDA=1 CUDA_ARCHS="-gencode=arch=compute_90a,code=sm_90a" lib > $O/build.log 2>&1; echo "build rc=$? $(( $(date +%s) - t0 ))s"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv > $O/env.txt 2>&1
echo "git $DATTN_GIT_COMMIT" >> $O/env.txt
DATTN_LIBRARY=$(pwd)/build/libdattn.so PYTHONPATH=python timeout 300 python3 bench/gpu_bwd_bench.py --json $O/bwd_bench.json > $O/bwd_bench_stdout.txt 2>&1
echo "bwd bench rc=$? $(( $(date +%s) - t0 ))s"
grep -E "^ *(B|L)|ratio" $O/bwd_bench_stdout.txt | head -20
cd $OUT && tar czf /tmp/all.tgz res && rm -rf res && mv /tmp/all.tgz $OUT/
