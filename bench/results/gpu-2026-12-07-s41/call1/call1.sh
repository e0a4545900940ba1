#!/bin/sh
# s41 call1: ubal (72f6f59) against main (687640f, kernels of bc6e473) A/B, ubal's tests and two
# sanitizers (on an H200, bwd-bench once before them); then with what is left of ~570 s: on an H200 the issue cells (gpu_cells.sh), on any
# other card the --train half's pytest(cuda) and bwd-bench. At most 8 files come back: ab/ and the
# tail's folder are packed.
set -u
T0=$(date +%s)
el() { echo $(( $(date +%s) - T0 )); }
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm --format=csv > $OUT/card.txt 2>&1
export DATTN_GIT_COMMIT=72f6f594e4c57e12005d3ae792942afc124cb80f
sh scripts/gpu_kernel_ab.sh --base .gpu/base > /tmp/ab_log.txt 2>&1
echo "ab rc=$? done $(el)s" >> $OUT/tests.txt
cp /tmp/ab_log.txt $OUT/ab/ 2>/dev/null
sh scripts/pack_out.sh $OUT/ab ratios.txt ab.txt
make -j16 CUDA=1 CUDA_ARCHS="-gencode=arch=compute_90a,code=sm_90a" tests-build > /tmp/build.txt 2>&1 || { tail -30 /tmp/build.txt >> $OUT/tests.txt; cat $OUT/tests.txt; exit 3; }
{ build/tests/test_cuda_bwd --sweep ws --seed 411 | tail -3
  build/tests/test_cuda_bwd --quick --seed 412 | tail -3
  echo "tests done $(el)s"
  if grep -q H200 $OUT/card.txt; then
    make -j16 CUDA=1 CUDA_ARCHS="-gencode=arch=compute_90a,code=sm_90a" lib > /dev/null 2>&1
    env PYTHONUNBUFFERED=1 DATTN_LIBRARY=$(pwd)/build/libdattn.so PYTHONPATH=python timeout 90 python3 bench/gpu_bwd_bench.py --json $OUT/bwd0.json > /tmp/b0.txt 2>&1; echo "bwd-bench (H200) rc=$? $(el)s"; tail -8 /tmp/b0.txt
  fi
  compute-sanitizer --tool racecheck --error-exitcode 9 build/tests/test_cuda_bwd --quick --seed 413 > /tmp/rc.txt 2>&1; echo "racecheck rc=$?"; tail -4 /tmp/rc.txt
  compute-sanitizer --tool memcheck --error-exitcode 9 build/tests/test_cuda_bwd --quick --seed 414 > /tmp/mc.txt 2>&1; echo "memcheck rc=$?"; tail -4 /tmp/mc.txt
  echo "sanitizers done $(el)s"; } >> $OUT/tests.txt 2>&1
LEFT=$((${S41_END:-565} - $(el)))
if [ $LEFT -lt 60 ]; then
  echo "no tail: $LEFT s left" >> $OUT/tests.txt
elif grep -q H200 $OUT/card.txt; then
  GPU_CELLS_BUDGET=$LEFT sh scripts/gpu_cells.sh --h200-only > /dev/null 2>&1
  echo "cells rc=$? done $(el)s" >> $OUT/tests.txt
  sh scripts/pack_out.sh $OUT/cells log.txt
else
  OUT=$OUT/gt GPU_CHECK_BUDGET=$LEFT GPU_CHECK_SKIP="bench;train-bench;finetune-e2e;host-step-ab;demo(cuda)" sh scripts/gpu_check.sh --train > /tmp/gt_stdout.txt 2>&1
  echo "gt rc=$? done $(el)s" >> $OUT/tests.txt
  cp /tmp/gt_stdout.txt $OUT/gt/ 2>/dev/null
  sh scripts/pack_out.sh $OUT/gt summary.txt bwd_bench.json
fi
cat $OUT/card.txt; tail -25 $OUT/ab/ab_log.txt 2>/dev/null || tail -25 /tmp/ab_log.txt; cat $OUT/ab/ratios.txt; cat $OUT/tests.txt; cat $OUT/cells/log.txt $OUT/gt/summary.txt 2>/dev/null
