#!/bin/sh
# s40 call2: the runner on main bc6e473 (noplanes + nkh merged), trimmed: the forward's and tc3g's steps skipped (unchanged kernels)
set -u
T0=$(date +%s)
export DATTN_GIT_COMMIT=bc6e4737b02d590545e8af161c737fe08d8574fd
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm --format=csv > $OUT/card.txt 2>&1
OUT=$OUT/gc GPU_CHECK_BUDGET=330 GPU_CHECK_SKIP="test_cuda_fwd;test_cuda_bwd --path tc3g;test_cuda_fwd --path sm80;test_cuda_fwd --path sm90w1g;test_cuda_fwd --path sm90w1h --same-as sm90w1g;test_cuda_fwd --path wskg;test_cuda_fwd --only-f32 --f32-force simple;san-memcheck(test_cuda_fwd);san-racecheck(test_cuda_fwd);san-initcheck(test_cuda_fwd);san-synccheck(test_cuda_fwd);san-memcheck(test_cuda_bwd --path tc3g);san-racecheck(test_cuda_bwd --path tc3g);san-synccheck(test_cuda_bwd --path tc3g);san-racecheck(test_cuda_fwd --path sm90w1g);san-synccheck(test_cuda_fwd --path sm90w1g);san-racecheck(test_cuda_fwd --path ws);san-synccheck(test_cuda_fwd --path ws);san-racecheck(test_cuda_fwd --path wskg);san-synccheck(test_cuda_fwd --path wskg);san-racecheck(test_cuda_fwd --path wskgt);san-synccheck(test_cuda_fwd --path wskgt)" sh scripts/gpu_check.sh --no-train > /tmp/gc_stdout.txt 2>&1; echo "gc rc=$? at $(( $(date +%s) - T0 ))s" >> $OUT/card.txt
cp /tmp/gc_stdout.txt $OUT/gc/ 2>/dev/null
OUT=$OUT/gt GPU_CHECK_BUDGET=170 GPU_CHECK_SKIP="bench;train-bench;finetune-e2e;host-step-ab;demo(cuda)" sh scripts/gpu_check.sh --train > /tmp/gt_stdout.txt 2>&1; echo "gt rc=$? at $(( $(date +%s) - T0 ))s" >> $OUT/card.txt
cp /tmp/gt_stdout.txt $OUT/gt/ 2>/dev/null
python3 bench/gpu_op_trace.py --json $OUT/gt/op_trace.json > $OUT/gt/op_trace.txt 2>&1; echo "trace rc=$? at $(( $(date +%s) - T0 ))s" >> $OUT/card.txt
sh scripts/pack_out.sh $OUT/gc summary.txt
sh scripts/pack_out.sh $OUT/gt summary.txt bwd_bench.json op_trace.txt
cat $OUT/card.txt $OUT/gc/summary.txt $OUT/gt/summary.txt; tail -15 $OUT/gt/op_trace.txt
