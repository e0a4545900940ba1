#!/bin/sh
# call 64 (x1): 0220174: the whole backward sweep on the default path (ws), then the GPU runner's
# steps that call 63's budget cut (parity, pytest, the benches, training, the demo), each as
# scripts/gpu_check.sh runs it
set -u
export PYTHONUNBUFFERED=1 DATTN_GIT_COMMIT=0220174553973d6cc8faaae5bedaa87a4aff5baf
O=$OUT/res; mkdir -p $O
t0=$(date +%s)
{ date -u +%Y-%m-%dT%H:%M:%SZ; echo "git $DATTN_GIT_COMMIT"; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; } > $O/env.txt
make -j16 CUDA=1 CUDA_ARCHS="-gencode=arch=compute_90a,code=sm_90a" lib tests-build > $O/build.log 2>&1
echo "build rc=$? $(($(date +%s)-t0))s" | tee $O/summary.txt
timeout 150 build/tests/test_cuda_bwd > $O/bwd_full.log 2>&1; echo "test_cuda_bwd (full, default path) rc=$? $(tail -1 $O/bwd_full.log) $(($(date +%s)-t0))s" | tee -a $O/summary.txt
grep FAIL $O/bwd_full.log | head
L=$(pwd)/build/libdattn.so
timeout 60 env DATTN_LIBRARY=$L python3 bench/gpu_parity.py --json $O/parity.json > $O/parity.log 2>&1
echo "parity rc=$? $(grep -E '^[0-9]+ passed' $O/parity.log | tail -1) $(($(date +%s)-t0))s" | tee -a $O/summary.txt
timeout 90 env DATTN_LIBRARY=$L PYTHONPATH=python python3 -m pytest -q -rfEs -k cuda -p no:cacheprovider tests/python > $O/pytest.log 2>&1
echo "pytest rc=$? $(tail -1 $O/pytest.log) $(($(date +%s)-t0))s" | tee -a $O/summary.txt
timeout 60 env DATTN_LIBRARY=$L PYTHONPATH=python python3 bench/gpu_bwd_bench.py --json $O/bwd_bench.json > $O/bwd_bench.log 2>&1
echo "bwd-bench rc=$? $(($(date +%s)-t0))s" | tee -a $O/summary.txt
timeout 200 env DATTN_LIBRARY=$L PYTHONPATH=python python3 bench/gpu_train_bench.py --json $O/train_bench.json > $O/train_bench.log 2>&1
echo "train-bench rc=$? $(($(date +%s)-t0))s" | tee -a $O/summary.txt
grep -E "time ratio|targets (met|NOT)" $O/train_bench.log | tee -a $O/summary.txt
left=$((540 - ($(date +%s)-t0)))
[ $left -gt 130 ] && { timeout 120 env DATTN_LIBRARY=$L PYTHONPATH=python python3 scripts/finetune_e2e.py --device cuda --json $O/finetune_e2e.json > $O/finetune.log 2>&1
  echo "finetune-e2e rc=$? $(grep -E '^finetune_e2e: initial' $O/finetune.log | tail -1) $(($(date +%s)-t0))s" | tee -a $O/summary.txt; }
left=$((570 - ($(date +%s)-t0)))
[ $left -gt 40 ] && { timeout $((left - 5)) env DATTN_LIBRARY=$L PYTHONPATH=python python3 -m dattn demo --device cuda --quiet > $O/demo.log 2>&1
  echo "demo rc=$? $(($(date +%s)-t0))s" | tee -a $O/summary.txt; }
grep -E "^B= *[0-9]+ L=" $O/bwd_bench.log
cd $OUT && tar czf /tmp/all.tgz res && rm -rf res && mv /tmp/all.tgz $OUT/
