#!/bin/sh
set -u
O=$OUT/res; mkdir -p $O
A="-gencode=arch=compute_90a,code=sm_90a"
make CUDA=1 CUDA_ARCHS="$A" build/tests/test_tma > $O/build.log 2>&1; echo "build rc=$?" >> $O/summary.txt
timeout 60 build/tests/test_tma > $O/test_tma.log 2>&1; echo "test_tma rc=$?" >> $O/summary.txt
which strace gdb cuda-gdb >> $O/summary.txt 2>&1
command -v strace && timeout 60 strace -f -o $O/strace.txt build/tests/test_tma > /dev/null 2>&1
CUDA_LAUNCH_BLOCKING=1 timeout 60 build/tests/test_tma > $O/test_tma_blocking.log 2>&1; echo "blocking rc=$?" >> $O/summary.txt
cat $O/summary.txt; cat $O/test_tma.log; tail -30 $O/strace.txt 2>/dev/null
