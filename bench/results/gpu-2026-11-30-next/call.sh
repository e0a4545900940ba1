#!/bin/sh
# call 10 (x2): GPU 0 = correctness runner (--no-bench: tests of every pinned path, sanitizers,
# parity, pytest incl. host-path / shape checks, finetune, demo); GPU 1 = timings after the
# build (op bench fwd incl. w1c / w1d columns, bwd bench incl. tc3b + tile-kind diagnostics,
# host overhead), then the train bench (compile + busy profile). DDP needs both GPUs: call 11.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site
export DATTN_GIT_COMMIT=${DATTN_GIT_COMMIT:?} PYTHONUNBUFFERED=1
O=$OUT/res; mkdir -p $O/check $O/bench
t0=$(date +%s)
( CUDA_VISIBLE_DEVICES=0 GPU_CHECK_BUDGET=${B:-540} GPU_CHECK_PATHS="${P:-sm80 sm90w1c sm90w1d}" JOBS=32 OUT=$O/check sh scripts/gpu_check.sh --no-bench > $O/check/stdout.txt 2>&1 ) &
pc=$!
for i in $(seq 1 100); do grep -q "==== build:" $O/check/gpu_check.log 2>/dev/null && break; sleep 3; done
echo "build seen at $(( $(date +%s) - t0 ))s"
(
  export CUDA_VISIBLE_DEVICES=1 DATTN_LIBRARY=$(pwd)/build/libdattn.so PYTHONPATH=python:$PYTHONPATH
  b() { n=$1; lim=$2; shift 2; t=$(date +%s); timeout $lim "$@" > $O/bench/$n.log 2>&1; echo "$n rc=$? $(( $(date +%s) - t ))s" >> $O/bench/summary.txt; }
  b bench 150 python3 bench/gpu_bench.py --json $O/bench/bench.json
  b bwd_bench 150 python3 bench/gpu_bwd_bench.py --json $O/bench/bwd_bench.json
  b host 40 python3 bench/host_overhead.py --device cuda --json $O/bench/host_cuda.json
  b host_packed 40 python3 bench/host_overhead.py --device cuda --packed --json $O/bench/host_cuda_packed.json
  b train_bench 190 python3 bench/gpu_train_bench.py --json $O/bench/train_bench.json
) &
pb=$!
wait $pc; echo "check done at $(( $(date +%s) - t0 ))s"
wait $pb; echo "benches done at $(( $(date +%s) - t0 ))s"
cat $O/check/summary.txt $O/bench/summary.txt
grep -E "tc3b|tile kind|w1c|w1d" $O/bench/*.log | head -20
cd $OUT && tar czf /tmp/all.tgz res && rm -rf res && mv /tmp/all.tgz $OUT/
