#!/bin/sh
# s43 call3. On an H200: the issues' cells on main (gpu_cells.sh from .gpu/base, a copy of main
# 0047edd without bench/results; kernels of 168d916), then, if 200 s are left, the sodp A/B. On
# any other card: the sodp chain's A/B (main -> dkdv step 57875d5 in .gpu/dkdv -> both steps, the
# working tree), ncu at B32 L512, B8 L2048, B2 L8192 with the gradients bit for bit, then sodp's
# tests (ws sweep, --quick, racecheck on --quick). At most 8 files come back.
set -u
T0=$(date +%s)
el() { echo $(( $(date +%s) - T0 )); }
END=${S43_END:-490}
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm --format=csv > $OUT/card.txt 2>&1
ab() {
  DATTN_GIT_COMMIT=${S43_SHA:?} sh scripts/gpu_kernel_ab.sh --base .gpu/base --tree dkdv=.gpu/dkdv > /tmp/ab_log.txt 2>&1
  echo "ab rc=$? done $(el)s" >> $OUT/tests.txt
  cp /tmp/ab_log.txt $OUT/ab/ 2>/dev/null
  sh scripts/pack_out.sh $OUT/ab ratios.txt ab.txt
}
if grep -q H200 $OUT/card.txt; then
  ROOT=$(pwd)
  (cd .gpu/base && OUT=$OUT DATTN_GIT_COMMIT=0047edd9e64be016f4bb494700ece33ad9049adb GPU_CELLS_BUDGET=${S43_CELLS:-380} \
    sh scripts/gpu_cells.sh --h200-only > /dev/null 2>&1)
  echo "cells rc=$? done $(el)s" >> $OUT/tests.txt
  cd "$ROOT"
  [ $((END - $(el))) -ge 200 ] && ab
  cat $OUT/card.txt $OUT/tests.txt $OUT/cells/log.txt; cat $OUT/ab/ratios.txt 2>/dev/null
  exit 0
fi
ab
make -j16 CUDA=1 CUDA_ARCHS="-gencode=arch=compute_90a,code=sm_90a" tests-build > /tmp/build.txt 2>&1 || { tail -30 /tmp/build.txt >> $OUT/tests.txt; cat $OUT/tests.txt; exit 3; }
{ timeout $((END - $(el) - 60)) build/tests/test_cuda_bwd --sweep ws --seed 442 | tail -3
  build/tests/test_cuda_bwd --quick --seed 443 | tail -3
  echo "tests done $(el)s"
  compute-sanitizer --tool racecheck --error-exitcode 9 build/tests/test_cuda_bwd --quick --seed 444 > /tmp/rc.txt 2>&1; echo "racecheck rc=$?"; tail -4 /tmp/rc.txt
  echo "sanitizers done $(el)s"; } >> $OUT/tests.txt 2>&1
cat $OUT/card.txt; tail -25 $OUT/ab/ab_log.txt 2>/dev/null; cat $OUT/ab/ratios.txt; cat $OUT/tests.txt
