#!/bin/sh
# call 16 (x2) on main (tc3d default, dropout keep bits reworked): GPU 0: build, test_cuda_bwd
# default (tc3d; its dropout sweep runs the reworked forward), the dropout sweep with the
# mma.sync forward pinned, test_cuda_fwd --quick, sanitizers on the default backward + the
# dropout sweep, pytest -k cuda, finetune-e2e (dropout 0.1). GPU 1 after the build: DDP fp32 +
# bf16 (both GPUs; the fixed gate), bwd bench (dropout timings), train bench, the fp16 encoder
# grid at B16 L >= 1024 (GPU-bound cells).
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site
export DATTN_GIT_COMMIT=${DATTN_GIT_COMMIT:?} PYTHONUNBUFFERED=1
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
O=$OUT/res; mkdir -p $O/check $O/bench $O/ddp $O/i7
t0=$(date +%s)
S=$O/check/summary.txt; L=$O/check/log.txt; : > $S
st() { n=$1; lim=$2; shift 2; t=$(date +%s); echo "==== $n: $*" >> $L; timeout $lim "$@" >> $L 2>&1; rc=$?; printf '%-48s rc=%s %4ss  %s\n' "$n" $rc $(( $(date +%s) - t )) "$(tail -1 $L | cut -c1-80)" >> $S; }
st build 240 make -j32 CUDA=1 CUDA_ARCHS="-gencode=arch=compute_90a,code=sm_90a" NVCCFLAGS="-Xptxas -v" lib tests-build
grep -E "registers|spill" $L | grep -i "bwd\|fwd" | sort | uniq -c | head -60 > $O/check/resources.txt
echo "build done at $(( $(date +%s) - t0 ))s"
(
  b() { n=$1; lim=$2; shift 2; t=$(date +%s); timeout $lim "$@" > $O/bench/$n.log 2>&1; echo "$n rc=$? $(( $(date +%s) - t ))s" >> $O/bench/summary.txt; }
  OUT=$O/ddp b ddp 150 sh scripts/gpu_ddp.sh
  export CUDA_VISIBLE_DEVICES=1 DATTN_LIBRARY=$(pwd)/build/libdattn.so PYTHONPATH=python:$PYTHONPATH
  b bwd_bench 150 python3 bench/gpu_bwd_bench.py --json $O/bench/bwd_bench.json
  b train_bench 150 python3 bench/gpu_train_bench.py --json $O/bench/train_bench.json
  b grid_fp16 150 python3 -m dattn bench --device cuda --dtypes fp16 --batches 16 --lengths 1024,2048,4096,8192 --budget 130 --out $O/i7
) &
pb=$!
export CUDA_VISIBLE_DEVICES=0
st "test_cuda_bwd (default tc3d)" 150 build/tests/test_cuda_bwd
st "DATTN_CUDA_FWD=sm80 test_cuda_bwd --sweep dropout" 90 env DATTN_CUDA_FWD=sm80 build/tests/test_cuda_bwd --sweep dropout
st "test_cuda_fwd --quick" 90 build/tests/test_cuda_fwd --quick
for tool in memcheck racecheck synccheck; do
  st "san-$tool(bwd --quick)" 120 compute-sanitizer --tool $tool --error-exitcode 9 build/tests/test_cuda_bwd --quick --seed 7
  st "san-$tool(bwd --sweep dropout --max-l 140)" 120 compute-sanitizer --tool $tool --error-exitcode 9 build/tests/test_cuda_bwd --sweep dropout --max-l 140 --seed 7
done
st "pytest(cuda)" 150 env DATTN_LIBRARY=$(pwd)/build/libdattn.so PYTHONPATH=python:$PYTHONPATH python3 -m pytest -q -rfEs -k cuda -p no:cacheprovider tests/python
st "finetune-e2e" 150 env DATTN_LIBRARY=$(pwd)/build/libdattn.so PYTHONPATH=python:$PYTHONPATH python3 scripts/finetune_e2e.py --device cuda --json $O/check/finetune_e2e.json
echo "check done at $(( $(date +%s) - t0 ))s"
wait $pb; echo "benches done at $(( $(date +%s) - t0 ))s"
cat $S $O/bench/summary.txt
grep -hE "ddp_check: (PASS|FAIL)|gpu_ddp:|max rel|backward kernels|gates" $O/ddp/*.log 2>/dev/null | head -12
grep -E "B=|dropout|tc3c" $O/bench/bwd_bench.log | grep -v "tile kind" | head -20
grep -E "ratio|top dattn" $O/bench/train_bench.log | head -10
tail -3 $O/bench/grid_fp16.log
cd $OUT && tar czf /tmp/all.tgz res && rm -rf res && mv /tmp/all.tgz $OUT/
