#!/bin/sh
# call 63 (x1): 8b814ac (ws backward with masks): the whole backward sweep on the default path
# (ws where it applies: padded, any mask, no dropout), then the GPU runner in its quick form
# (every path's quick sweep, compute-sanitizer, SASS, parity, benches, pytest, training)
set -u
export PYTHONUNBUFFERED=1 DATTN_GIT_COMMIT=8b814acea4d75cd4cc72046e943d36e682bf2509
O=$OUT/res; mkdir -p $O
t0=$(date +%s)
make -j16 CUDA=1 CUDA_ARCHS="-gencode=arch=compute_90a,code=sm_90a" NVCCFLAGS="-Xptxas -v" lib tests-build > $O/build.log 2>&1
echo "build rc=$? $(($(date +%s)-t0))s" | tee $O/summary.txt
timeout 150 build/tests/test_cuda_bwd > $O/bwd_full.log 2>&1; echo "test_cuda_bwd (full, default path) rc=$? $(tail -1 $O/bwd_full.log) $(($(date +%s)-t0))s" | tee -a $O/summary.txt
grep FAIL $O/bwd_full.log | head
OUT=$O/check GPU_CHECK_BUDGET=$((560 - ($(date +%s)-t0))) sh scripts/gpu_check.sh --quick > $O/gpu_check_stdout.log 2>&1
echo "gpu_check --quick rc=$? $(($(date +%s)-t0))s" | tee -a $O/summary.txt
cat $O/check/summary.txt
cd $OUT && tar czf /tmp/all.tgz res && rm -rf res && mv /tmp/all.tgz $OUT/
