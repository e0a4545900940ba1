#!/bin/sh
# s40 call1: chain main -> noplanes -> nkh(s40) A/B, then s40's tests and initcheck
set -u
T0=$(date +%s)
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm --format=csv > $OUT/card.txt 2>&1
sh scripts/gpu_kernel_ab.sh --base .gpu/base --tree noplanes=.gpu/noplanes --pack > $OUT/ab_log.txt 2>&1
echo "ab done $(( $(date +%s) - T0 ))s" >> $OUT/tests.txt
make -j16 CUDA=1 CUDA_ARCHS="-gencode=arch=compute_90a,code=sm_90a" tests-build > /tmp/build.txt 2>&1 || { cp /tmp/build.txt $OUT/; tail -30 /tmp/build.txt; exit 3; }
{ build/tests/test_cuda_bwd --sweep ws --seed 401 | tail -3
  build/tests/test_cuda_bwd --quick --seed 402 | tail -3
  echo "tests done $(( $(date +%s) - T0 ))s"
  compute-sanitizer --tool initcheck --error-exitcode 9 build/tests/test_cuda_bwd --quick --seed 403 > /tmp/ic.txt 2>&1; echo "initcheck rc=$?"; tail -4 /tmp/ic.txt
  echo "initcheck done $(( $(date +%s) - T0 ))s"
  build/tests/test_cuda_bwd --sweep wspacked --seed 404 | tail -3
  echo "all done $(( $(date +%s) - T0 ))s"; } >> $OUT/tests.txt 2>&1
cat $OUT/card.txt; tail -25 $OUT/ab_log.txt; cat $OUT/tests.txt
