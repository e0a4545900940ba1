#!/bin/sh
# s42: the --train half's timed steps on main 4de3b50 (s40 call4's pattern): train-bench,
# finetune-e2e (issue 5's fine-tune criterion, not yet run on an H200) and the CUDA demo.
set -u
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm --format=csv > $OUT/card.txt 2>&1
export DATTN_GIT_COMMIT=4de3b50162d65c885584170fa30ea898c12b108a
OUT=$OUT/g3 GPU_CHECK_BUDGET=${S42_BUDGET:-400} GPU_CHECK_SKIP="bench;pytest(cuda);bwd-bench;host-step-ab" sh scripts/gpu_check.sh --train > /tmp/g3_stdout.txt 2>&1
echo "g3 rc=$?" >> $OUT/card.txt
cp /tmp/g3_stdout.txt $OUT/g3/ 2>/dev/null
sh scripts/pack_out.sh $OUT/g3 summary.txt train_bench.json finetune_e2e.json
cat $OUT/card.txt $OUT/g3/summary.txt
