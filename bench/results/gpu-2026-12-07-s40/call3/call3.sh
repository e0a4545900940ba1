#!/bin/sh
# s40 call3: the cells on an H200 (main bc6e473); on any other card, exit at once
set -u
T0=$(date +%s)
export DATTN_GIT_COMMIT=bc6e4737b02d590545e8af161c737fe08d8574fd
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm --format=csv > $OUT/card.txt 2>&1
cat $OUT/card.txt
case $(cat $OUT/card.txt) in *H200*) ;; *) echo "not an H200: nothing run"; exit 0 ;; esac
D=$OUT/h200; mkdir -p $D
lg() { echo "$1 rc=$2 at $(( $(date +%s) - T0 ))s" >> $D/log.txt; }
make -j16 CUDA=1 CUDA_ARCHS="-gencode=arch=compute_90a,code=sm_90a" lib > $D/build.txt 2>&1; lg build $?
E="env PYTHONUNBUFFERED=1 DATTN_LIBRARY=$(pwd)/build/libdattn.so PYTHONPATH=python"
timeout 120 $E python3 bench/gpu_bwd_bench.py --json $D/bwd1.json > $D/bwd1.txt 2>&1; lg bwd1 $?
timeout 60 $E python3 bench/gpu_op_trace.py --json $D/op_trace.json > $D/op_trace.txt 2>&1; lg trace $?
timeout 120 $E python3 bench/gpu_bwd_bench.py --json $D/bwd2.json > $D/bwd2.txt 2>&1; lg bwd2 $?
timeout 150 $E python3 bench/gpu_bench.py --op-only --json $D/fwd.json > $D/fwd.txt 2>&1; lg fwd $?
timeout 170 $E python3 bench/gpu_train_bench.py --json $D/train_bench.json > $D/train.txt 2>&1; lg train $?
if [ $(( $(date +%s) - T0 )) -lt 420 ]; then
  timeout 120 $E python3 scripts/finetune_e2e.py --device cuda --json $D/finetune_e2e.json > $D/finetune.txt 2>&1; lg finetune $?
fi
cat $D/log.txt; tail -5 $D/bwd1.txt $D/bwd2.txt; tail -12 $D/op_trace.txt $D/fwd.txt; tail -14 $D/train.txt; tail -3 $D/finetune.txt 2>/dev/null
sh scripts/pack_out.sh $D log.txt bwd1.json bwd2.json op_trace.txt fwd.json train_bench.json
