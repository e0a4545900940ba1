#!/bin/sh
# call 40: the TMA layer's first GPU run (test_tma) and the host cost of one map encode.
set -u
O=$OUT/res; mkdir -p $O
A="-gencode=arch=compute_90a,code=sm_90a"
make CUDA=1 CUDA_ARCHS="$A" build/tests/test_tma > $O/build.log 2>&1; echo "build rc=$?" >> $O/summary.txt
timeout 60 build/tests/test_tma > $O/test_tma.log 2>&1; echo "test_tma rc=$?" >> $O/summary.txt
timeout 60 compute-sanitizer --tool memcheck --error-exitcode 9 build/tests/test_tma > $O/test_tma_memcheck.log 2>&1; echo "memcheck rc=$?" >> $O/summary.txt
timeout 60 compute-sanitizer --tool racecheck --error-exitcode 9 build/tests/test_tma > $O/test_tma_racecheck.log 2>&1; echo "racecheck rc=$?" >> $O/summary.txt
nvcc -O2 -std=c++17 $A -o /tmp/tma_enc .gpu/tma_enc.cu > $O/enc_build.log 2>&1 && timeout 30 /tmp/tma_enc > $O/encode.log 2>&1; echo "encode rc=$?" >> $O/summary.txt
cat $O/summary.txt; tail -5 $O/test_tma.log; cat $O/encode.log
nvidia-smi -q | grep -i -m3 "driver version\|cuda version" >> $O/summary.txt
