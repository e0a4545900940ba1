#!/bin/sh
# call 15 (x2) on s1 (main + bwd6): GPU 0: build, test_cuda_bwd default + --path tc3d --same-as
# tc3c + sanitizers on tc3d, pytest -k cuda, ncu of the backward (default tc3c, nopos) vs
# flash. GPU 1 after the build: DDP fp32 + bf16 (both GPUs), bwd bench (tc3d pinned), the
# encoder grid fp16 (python -m dattn bench), train bench.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site
export DATTN_GIT_COMMIT=${DATTN_GIT_COMMIT:?} PYTHONUNBUFFERED=1
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
O=$OUT/res; mkdir -p $O/check $O/bench $O/ddp $O/prof $O/i7
t0=$(date +%s)
S=$O/check/summary.txt; L=$O/check/log.txt; : > $S
st() { n=$1; lim=$2; shift 2; t=$(date +%s); echo "==== $n: $*" >> $L; timeout $lim "$@" >> $L 2>&1; rc=$?; printf '%-44s rc=%s %4ss  %s\n' "$n" $rc $(( $(date +%s) - t )) "$(tail -1 $L | cut -c1-80)" >> $S; }
st build 240 make -j32 CUDA=1 CUDA_ARCHS="-gencode=arch=compute_90a,code=sm_90a" NVCCFLAGS="-Xptxas -v" lib tests-build
grep -E "registers|spill" $L | grep -i "bwd" | sort | uniq -c | head -40 > $O/check/bwd_resources.txt
echo "build done at $(( $(date +%s) - t0 ))s"
(
  b() { n=$1; lim=$2; shift 2; t=$(date +%s); timeout $lim "$@" > $O/bench/$n.log 2>&1; echo "$n rc=$? $(( $(date +%s) - t ))s" >> $O/bench/summary.txt; }
  OUT=$O/ddp b ddp 150 sh scripts/gpu_ddp.sh
  export CUDA_VISIBLE_DEVICES=1 DATTN_LIBRARY=$(pwd)/build/libdattn.so PYTHONPATH=python:$PYTHONPATH
  b bwd_bench 130 python3 bench/gpu_bwd_bench.py --json $O/bench/bwd_bench.json
  b grid_fp16 200 python3 -m dattn bench --device cuda --dtypes fp16 --budget 170 --out $O/i7
  b train_bench 150 python3 bench/gpu_train_bench.py --json $O/bench/train_bench.json
) &
pb=$!
export CUDA_VISIBLE_DEVICES=0
st "test_cuda_bwd (default)" 120 build/tests/test_cuda_bwd
st "test_cuda_bwd --path tc3d --same-as tc3c" 120 build/tests/test_cuda_bwd --path tc3d --same-as tc3c
for tool in memcheck racecheck synccheck initcheck; do
  st "san-$tool(bwd --path tc3d)" 90 compute-sanitizer --tool $tool --error-exitcode 9 build/tests/test_cuda_bwd --path tc3d --quick --seed 7
done
st "pytest(cuda)" 150 env DATTN_LIBRARY=$(pwd)/build/libdattn.so PYTHONPATH=python:$PYTHONPATH python3 -m pytest -q -rfEs -k cuda -p no:cacheprovider tests/python
t=$(date +%s); KERNELS="dattn_bwd|flash_bwd" OUT=$O/prof timeout 150 sh scripts/gpu_prof.sh --shapes 32x512,2x8192 --nopos > $O/prof/stdout.txt 2>&1; echo "prof rc=$? $(( $(date +%s) - t ))s" >> $S
echo "check done at $(( $(date +%s) - t0 ))s"
wait $pb; echo "benches done at $(( $(date +%s) - t0 ))s"
cat $S $O/bench/summary.txt
grep -E "passed, " $L | tail -8
grep -hE "ddp_check: (PASS|FAIL)|gpu_ddp:|max rel|fast_bwd|backward kernels" $O/ddp/*.log 2>/dev/null | head -12
grep -E "B=|tc3d|diag|kind" $O/bench/bwd_bench.log | head -40
grep -E "ratio" $O/bench/train_bench.log | head -6
tail -5 $O/bench/grid_fp16.log
head -12 $O/prof/summary.txt 2>/dev/null
rm -f $O/prof/prof.ncu-rep
cd $OUT && tar czf /tmp/all.tgz res && rm -rf res && mv /tmp/all.tgz $OUT/
