#!/bin/sh
# s42 call1 on main 4de3b50 (kernels of ubal 72f6f59 + 2d49b0c's host split code; ops' C apply):
# on an H200 the issues' cells (gpu_cells.sh: bwd-bench x2, op trace with per-launch gaps, the
# forward bench's op level, train-bench); on any other card the runner's backward half (s40's
# call2 pattern: gpu_check.sh --no-train without the forward's and tc3g's steps, then --train
# without the timed steps). S42_MODE=runner takes the runner's half on any card (a second call on
# a warm H200). At most 8 files come back.
set -u
T0=$(date +%s)
el() { echo $(( $(date +%s) - T0 )); }
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm --format=csv > $OUT/card.txt 2>&1
export DATTN_GIT_COMMIT=4de3b50162d65c885584170fa30ea898c12b108a
END=${S42_END:-570}
if [ "${S42_MODE:-auto}" != runner ] && grep -q H200 $OUT/card.txt; then
  GPU_CELLS_BUDGET=$END sh scripts/gpu_cells.sh --h200-only > /dev/null 2>&1
  echo "cells rc=$? done $(el)s" >> $OUT/card.txt
  cat $OUT/card.txt $OUT/cells/log.txt
else
  OUT=$OUT/gc GPU_CHECK_BUDGET=340 GPU_CHECK_SKIP="test_cuda_fwd;test_cuda_bwd --path tc3g;test_cuda_fwd --path sm80;test_cuda_fwd --path sm90w1g;test_cuda_fwd --path sm90w1h --same-as sm90w1g;test_cuda_fwd --path wskg;test_cuda_fwd --only-f32 --f32-force simple;san-memcheck(test_cuda_fwd);san-racecheck(test_cuda_fwd);san-initcheck(test_cuda_fwd);san-synccheck(test_cuda_fwd);san-memcheck(test_cuda_bwd --path tc3g);san-racecheck(test_cuda_bwd --path tc3g);san-synccheck(test_cuda_bwd --path tc3g);san-racecheck(test_cuda_fwd --path sm90w1g);san-synccheck(test_cuda_fwd --path sm90w1g);san-racecheck(test_cuda_fwd --path ws);san-synccheck(test_cuda_fwd --path ws);san-racecheck(test_cuda_fwd --path wskg);san-synccheck(test_cuda_fwd --path wskg);san-racecheck(test_cuda_fwd --path wskgt);san-synccheck(test_cuda_fwd --path wskgt)" sh scripts/gpu_check.sh --no-train > /tmp/gc_stdout.txt 2>&1
  echo "gc rc=$? at $(el)s" >> $OUT/card.txt
  cp /tmp/gc_stdout.txt $OUT/gc/ 2>/dev/null
  LEFT=$((END - $(el)))
  OUT=$OUT/gt GPU_CHECK_BUDGET=$LEFT GPU_CHECK_SKIP="bench;train-bench;finetune-e2e;host-step-ab;demo(cuda)" sh scripts/gpu_check.sh --train > /tmp/gt_stdout.txt 2>&1
  echo "gt rc=$? at $(el)s" >> $OUT/card.txt
  cp /tmp/gt_stdout.txt $OUT/gt/ 2>/dev/null
  sh scripts/pack_out.sh $OUT/gc summary.txt
  sh scripts/pack_out.sh $OUT/gt summary.txt bwd_bench.json
  cat $OUT/card.txt $OUT/gc/summary.txt $OUT/gt/summary.txt
fi
