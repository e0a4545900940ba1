#!/bin/sh
# s43 call2: grb (G's half carried between band tiles; the chain main 168d916 -> dq kernel alone
# (4bc6bb1, .gpu/dq) -> both kernels (the working tree)) (ncu
# A/B at B32 L512, B8 L2048, B2 L8192, gradients bit for bit), grb's tests (ws sweep, --quick,
# racecheck and memcheck on --quick); then with what is left of S43_END (~565 s): on an H200 the
# issues' cells on grb (gpu_cells.sh), elsewhere bwd-bench on grb. Working tree at grb, .gpu/base
# = main (carry .gpu). At most 8 files come back: ab/ and cells/ are packed.
set -u
T0=$(date +%s)
el() { echo $(( $(date +%s) - T0 )); }
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm --format=csv > $OUT/card.txt 2>&1
export DATTN_GIT_COMMIT=${S43_SHA:?set S43_SHA to grb\'s full sha}
sh scripts/gpu_kernel_ab.sh --base .gpu/base --tree dq=.gpu/dq > /tmp/ab_log.txt 2>&1
echo "ab rc=$? done $(el)s" >> $OUT/tests.txt
cp /tmp/ab_log.txt $OUT/ab/ 2>/dev/null
sh scripts/pack_out.sh $OUT/ab ratios.txt ab.txt
make -j16 CUDA=1 CUDA_ARCHS="-gencode=arch=compute_90a,code=sm_90a" tests-build > /tmp/build.txt 2>&1 || { tail -30 /tmp/build.txt >> $OUT/tests.txt; cat $OUT/tests.txt; exit 3; }
{ build/tests/test_cuda_bwd --sweep ws --seed 431 | tail -3
  build/tests/test_cuda_bwd --quick --seed 432 | tail -3
  echo "tests done $(el)s"
  compute-sanitizer --tool racecheck --error-exitcode 9 build/tests/test_cuda_bwd --quick --seed 433 > /tmp/rc.txt 2>&1; echo "racecheck rc=$?"; tail -4 /tmp/rc.txt
  compute-sanitizer --tool memcheck --error-exitcode 9 build/tests/test_cuda_bwd --quick --seed 434 > /tmp/mc.txt 2>&1; echo "memcheck rc=$?"; tail -4 /tmp/mc.txt
  echo "sanitizers done $(el)s"; } >> $OUT/tests.txt 2>&1
LEFT=$((${S43_END:-565} - $(el)))
if [ $LEFT -lt 60 ]; then
  echo "no tail: $LEFT s left" >> $OUT/tests.txt
elif grep -q H200 $OUT/card.txt; then
  GPU_CELLS_BUDGET=$LEFT sh scripts/gpu_cells.sh --h200-only > /dev/null 2>&1
  echo "cells rc=$? done $(el)s" >> $OUT/tests.txt
  sh scripts/pack_out.sh $OUT/cells log.txt
else
  make -j16 CUDA=1 CUDA_ARCHS="-gencode=arch=compute_90a,code=sm_90a" lib > /dev/null 2>&1
  env PYTHONUNBUFFERED=1 DATTN_LIBRARY=$(pwd)/build/libdattn.so PYTHONPATH=python timeout $LEFT \
    python3 bench/gpu_bwd_bench.py --json $OUT/bwd_bench.json > /tmp/b1.txt 2>&1
  echo "bwd-bench rc=$? $(el)s" >> $OUT/tests.txt; tail -8 /tmp/b1.txt >> $OUT/tests.txt
fi
cat $OUT/card.txt; tail -25 $OUT/ab/ab_log.txt 2>/dev/null || tail -25 /tmp/ab_log.txt; cat $OUT/ab/ratios.txt; cat $OUT/tests.txt; cat $OUT/cells/log.txt 2>/dev/null
