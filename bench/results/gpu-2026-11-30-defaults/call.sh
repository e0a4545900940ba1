#!/bin/sh
# call 12 (x2) on the flipped defaults (sm90w1c fwd, tc3b bwd): GPU 0 = gpu_check --no-bench
# (default sweeps + pinned sm90w1b / tc3 / tc2, sanitizers, parity, pytest, finetune, demo);
# GPU 1 after the build: DDP (both GPUs), op bench, bwd bench (fixed diagnostics), per-line
# ncu profile of the backward (default, nopos, flash), train bench.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site
export DATTN_GIT_COMMIT=${DATTN_GIT_COMMIT:?} PYTHONUNBUFFERED=1
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
O=$OUT/res; mkdir -p $O/check $O/bench $O/ddp $O/prof
t0=$(date +%s)
( CUDA_VISIBLE_DEVICES=0 GPU_CHECK_BUDGET=${B:-520} GPU_CHECK_PATHS="${P:-sm90w1b}" JOBS=32 OUT=$O/check sh scripts/gpu_check.sh --no-bench > $O/check/stdout.txt 2>&1 ) &
pc=$!
for i in $(seq 1 100); do grep -q "==== build:" $O/check/gpu_check.log 2>/dev/null && break; sleep 3; done
echo "build seen at $(( $(date +%s) - t0 ))s"
(
  b() { n=$1; lim=$2; shift 2; t=$(date +%s); timeout $lim "$@" > $O/bench/$n.log 2>&1; echo "$n rc=$? $(( $(date +%s) - t ))s" >> $O/bench/summary.txt; }
  OUT=$O/ddp b ddp 120 sh scripts/gpu_ddp.sh
  export CUDA_VISIBLE_DEVICES=1 DATTN_LIBRARY=$(pwd)/build/libdattn.so PYTHONPATH=python:$PYTHONPATH
  b bench 90 python3 bench/gpu_bench.py --json $O/bench/bench.json
  b bwd_bench 80 python3 bench/gpu_bwd_bench.py --json $O/bench/bwd_bench.json
  KERNELS="dattn_bwd|flash_bwd|dattn_fwd|flash_fwd" OUT=$O/prof b prof 120 sh scripts/gpu_prof.sh --shapes 32x512,2x8192 --nopos
  b train_bench 150 python3 bench/gpu_train_bench.py --json $O/bench/train_bench.json
) &
pb=$!
wait $pc; echo "check done at $(( $(date +%s) - t0 ))s"
wait $pb; echo "benches done at $(( $(date +%s) - t0 ))s"
cat $O/check/summary.txt $O/bench/summary.txt
tail -3 $O/ddp/ddp_check.log 2>/dev/null
cat $O/prof/summary.txt 2>/dev/null | head -30
ls -la $O/prof
rm -f $O/prof/prof.ncu-rep
cd $OUT && tar czf /tmp/all.tgz res && rm -rf res && mv /tmp/all.tgz $OUT/
