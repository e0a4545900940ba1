#!/bin/sh
# call 62 (x1): the library's warp-specialized backward (84a5b87): build, SASS, its sweep and the
# whole backward sweep (default path = ws where it applies), compute-sanitizer on --quick,
# pytest on CUDA (gradients vs transformers, training), the op-level fwd+bwd bench
set -u
export PYTHONUNBUFFERED=1 DATTN_GIT_COMMIT=84a5b87c8a1c33115a102bf94c7015e2de69893a
O=$OUT/res; mkdir -p $O
t0=$(date +%s)
{ date -u +%Y-%m-%dT%H:%M:%SZ; echo "git $DATTN_GIT_COMMIT"; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; } > $O/env.txt
make -j16 CUDA=1 CUDA_ARCHS="-gencode=arch=compute_90a,code=sm_90a" NVCCFLAGS="-Xptxas -v" lib tests-build > $O/build.log 2>&1
echo "build rc=$? $(($(date +%s)-t0))s" | tee $O/summary.txt
grep -A3 "Compiling entry function 'dattn_bwd_ws" $O/build.log | grep -E "entry|Used|spill" > $O/resources.txt
o=build/src/cuda/bwd_ws_d64_sm90.o
echo "sass ws: HGMMA $(cuobjdump -sass $o | grep -c HGMMA) LDL/STL $(cuobjdump -sass $o | grep -cE 'LDL|STL') UTMALDG $(cuobjdump -sass $o | grep -c UTMALDG) UBLKRED $(cuobjdump -sass $o | grep -cE 'UBLKRED|UBLKCP')" | tee -a $O/summary.txt
timeout 150 build/tests/test_cuda_bwd --sweep ws > $O/sweep_ws.log 2>&1; echo "sweep ws rc=$? $(tail -1 $O/sweep_ws.log) $(($(date +%s)-t0))s" | tee -a $O/summary.txt
timeout 240 build/tests/test_cuda_bwd > $O/bwd_full.log 2>&1; echo "test_cuda_bwd rc=$? $(tail -1 $O/bwd_full.log) $(($(date +%s)-t0))s" | tee -a $O/summary.txt
for tool in memcheck racecheck synccheck initcheck; do
  timeout 150 compute-sanitizer --tool $tool --error-exitcode 9 build/tests/test_cuda_bwd --quick --seed 7 > $O/san_$tool.log 2>&1
  echo "san $tool rc=$? $(tail -2 $O/san_$tool.log | tr '\n' ' ') $(($(date +%s)-t0))s" | tee -a $O/summary.txt
done
timeout 200 env DATTN_LIBRARY="$(pwd)/build/libdattn.so" PYTHONPATH=python python3 -m pytest -q -rfEs -k cuda -p no:cacheprovider tests/python > $O/pytest.log 2>&1
echo "pytest rc=$? $(tail -1 $O/pytest.log) $(($(date +%s)-t0))s" | tee -a $O/summary.txt
timeout 200 env DATTN_LIBRARY="$(pwd)/build/libdattn.so" PYTHONPATH=python python3 bench/gpu_bwd_bench.py --json $O/bwd_bench.json > $O/bwd_bench.log 2>&1
echo "bwd-bench rc=$? $(($(date +%s)-t0))s" | tee -a $O/summary.txt
grep -E "FAIL" $O/sweep_ws.log $O/bwd_full.log | head -20
grep -E "fwd\+bwd|ratio" $O/bwd_bench.log | head -30
cd $OUT && tar czf /tmp/all.tgz res && rm -rf res && mv /tmp/all.tgz $OUT/
