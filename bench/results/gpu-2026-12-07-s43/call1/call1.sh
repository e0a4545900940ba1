#!/bin/sh
# s43 call1 on main 168d916: on an H200 the issues' cells (gpu_cells.sh: bwd-bench x2, op trace,
# finetune-e2e, the forward bench's op level, train-bench); on any other card a source-level
# profile of the forward (gpu_prof.sh, B32 L512 and B8 L2048, with the nopos core and flash),
# which no session has taken of the ws forward kernel. At most 8 files come back.
set -u
T0=$(date +%s)
el() { echo $(( $(date +%s) - T0 )); }
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm --format=csv > $OUT/card.txt 2>&1
export DATTN_GIT_COMMIT=168d9169ce743360fd78cde2a07c7e3b0ba9f473
if grep -q H200 $OUT/card.txt; then
  GPU_CELLS_BUDGET=${S43_END:-560} sh scripts/gpu_cells.sh --h200-only > /dev/null 2>&1
  echo "cells rc=$? done $(el)s" >> $OUT/card.txt
  cat $OUT/card.txt $OUT/cells/log.txt
else
  OUT=$OUT/prof timeout 480 sh scripts/gpu_prof.sh --shapes 32x512,8x2048 --no-bwd --nopos \
    > /tmp/prof_stdout.txt 2>&1
  echo "prof rc=$? at $(el)s" >> $OUT/card.txt
  cp /tmp/prof_stdout.txt $OUT/prof/ 2>/dev/null
  rm -f $OUT/prof/prof.ncu-rep  # over the tool's 16 MiB; details.txt and source.csv hold its content
  sh scripts/pack_out.sh $OUT/prof summary.txt env.txt prof_stdout.txt
  cat $OUT/card.txt $OUT/prof/summary.txt
fi
